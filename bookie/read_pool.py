"""The bookie's read thread pool: BookKeeper's ``BookieReadThreadPool``, an ordered executor.

``numReadWorkerThreads`` threads, each with its own FIFO queue. A read is keyed by its
ledger id and always runs on thread ``key mod n``, so the reads of one ledger run in the
order they were submitted, and a slow ledger holds up only the ledgers that share its thread.

Invariants:

- each thread holds at most ``maxPendingReadRequestsPerThread`` tasks, counting the one it is
  running: past that, :meth:`ReadThreadPool.submit` raises :class:`TooManyRequestsError` at
  once, and the request handler answers ``TooManyRequests`` (BookKeeper's
  ``READ_ENTRY_REJECTED``). A catch-up reader is pushed back at the door instead of queueing
  without bound in front of everyone else's reads;
- ``pending`` counts are touched only on the event loop (incremented in ``submit``,
  decremented when the result is handed back), so they need no lock;
- every submitted task's future is completed exactly once, on the loop, unless the loop is
  already closed — with the task's result or the exception it raised (handed over by
  :func:`~minipulsar.supervision.outcome_of`: the awaiting request answers it); ``close()``
  runs the tasks already queued, then stops the threads.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from minipulsar.bookie import metrics
from minipulsar.errors import ServiceNotReadyError, TooManyRequestsError
from minipulsar.supervision import guarded, outcome_of

log = logging.getLogger(__name__)

T = TypeVar("T")

_STOP = object()
"""Queued once per thread by ``close()``: the thread exits when it reaches it."""


class ReadThreadPool:
    def __init__(self, threads: int, pending_per_thread_max: int, name: str = "BookieReadThreadPool") -> None:
        """``threads``: numReadWorkerThreads; ``pending_per_thread_max``: maxPendingReadRequestsPerThread."""
        if threads < 1 or pending_per_thread_max < 1:
            raise ValueError(
                f"need threads >= 1 and pending_per_thread_max >= 1, got {threads}, {pending_per_thread_max}"
            )
        self.name = name
        self.pending_per_thread_max = pending_per_thread_max
        self.pending = [0] * threads
        """Tasks submitted to each thread and not yet handed back (queued + running)."""
        self._queues: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in range(threads)]
        self._threads = [
            threading.Thread(target=guarded, args=(log, f"{name}-{i}", self._work, q), name=f"{name}-{i}", daemon=True)
            for i, q in enumerate(self._queues)
        ]
        self._closed = False
        for thread in self._threads:
            thread.start()
        metrics.READ_POOLS.add(self)  # /metrics reports its queue sizes

    @property
    def threads(self) -> int:
        return len(self._threads)

    @property
    def pending_total(self) -> int:
        return sum(self.pending)

    def submit(self, key: int, fn: Callable[[], T], ready: asyncio.Future[None] | None = None) -> asyncio.Future[T]:
        """Run ``fn()`` on thread ``key mod threads``; must be called on the event loop.

        ``ready``: the task takes its place in the thread's count now, and joins the thread's
        queue once ``ready`` is done (cancelled or failed: it never runs, and its future is
        cancelled or fails with ``ready``'s error) — as a BookKeeper read thread blocked on a
        channel that is not writable holds its queue.

        Returns:
            A future of the loop, completed with ``fn``'s result or exception.

        Raises:
            TooManyRequestsError: that thread already holds ``pending_per_thread_max`` tasks.
            ServiceNotReadyError: the pool is closed.
        """
        if self._closed:
            raise ServiceNotReadyError("the bookie is shutting down: reads are no longer served")
        index = key % len(self._queues)
        if self.pending[index] >= self.pending_per_thread_max:
            metrics.READ_ENTRY_REJECTED.inc()
            raise TooManyRequestsError(
                f"{self.pending[index]} reads are pending on read thread {index} "
                f"(maxPendingReadRequestsPerThread={self.pending_per_thread_max})"
            )
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self.pending[index] += 1
        if ready is None or (ready.done() and not ready.cancelled() and ready.exception() is None):
            self._queues[index].put((fn, future, loop, index, time.monotonic()))
        else:
            ready.add_done_callback(functools.partial(self._ready, fn, future, loop, index))
        return future

    def _ready(
        self,
        fn: Callable[[], Any],
        future: asyncio.Future,
        loop: asyncio.AbstractEventLoop,
        index: int,
        ready: asyncio.Future[None],
    ) -> None:
        """A task's turn came (or it was given up): queue it, or give its place back."""
        refusal = None if ready.cancelled() else ready.exception()
        if ready.cancelled() or refusal is not None or future.cancelled() or self._closed:
            self.pending[index] -= 1
            if not future.done():
                if refusal is not None:
                    future.set_exception(refusal)
                elif self._closed and not ready.cancelled():
                    future.set_exception(
                        ServiceNotReadyError("the bookie is shutting down: reads are no longer served")
                    )
                else:
                    future.cancel()
            return
        self._queues[index].put((fn, future, loop, index, time.monotonic()))

    def close(self) -> None:
        """Run every task already queued, then stop the threads. Blocking: call it off the loop
        (``asyncio.to_thread``) when tasks may still be queued. Idempotent."""
        if not self._closed:
            self._closed = True
            for q in self._queues:
                q.put(_STOP)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join()
        metrics.READ_POOLS.discard(self)

    # -- the worker threads ---------------------------------------------------------------------

    def _work(self, tasks: queue.SimpleQueue) -> None:
        task_queued, task_execution = metrics.READ_POOL_TASK_QUEUED, metrics.READ_POOL_TASK_EXECUTION
        while (task := tasks.get()) is not _STOP:
            fn, future, loop, index, submitted = task
            started = time.monotonic()
            task_queued.observe((started - submitted) * 1000)
            outcome = outcome_of(fn)  # an error is handed to the awaiting request, which answers it
            task_execution.observe((time.monotonic() - started) * 1000)
            try:
                loop.call_soon_threadsafe(self._complete, future, index, outcome)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                log.debug("%s: loop closed, dropping a read result", self.name)

    def _complete(self, future: asyncio.Future[Any], index: int, outcome: tuple[Any, Exception | None]) -> None:
        self.pending[index] -= 1
        assert self.pending[index] >= 0, "a read was handed back twice"
        if future.cancelled():
            return
        value, error = outcome
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)
