"""Where the bookie runs the blocking part of a read: the :class:`ReadExecutor` contract.

:meth:`bookie.bookie_impl.BookieImpl.read_entries` hands ``storage.read_entries`` (a thread-safe,
blocking function) to ``read_executor.submit(ledger_id, fn)``. The process wiring passes
BookKeeper's ordered, bounded read thread pool (:class:`bookie.read_pool.ReadThreadPool`);
:class:`ThreadPoolReadExecutor` is the plain default for everything else (tests, tools).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

from minipulsar.errors import ServiceNotReadyError

T = TypeVar("T")


def copy_outcome(source: asyncio.Future[T], target: asyncio.Future[T]) -> None:
    """Complete ``target`` as ``source`` completes (unless ``target`` was cancelled meanwhile)."""

    def copy(done: asyncio.Future[T]) -> None:
        if target.done():
            return
        if done.cancelled():
            target.cancel()
        elif (error := done.exception()) is not None:
            target.set_exception(error)
        else:
            target.set_result(done.result())

    source.add_done_callback(copy)


class ReadExecutor(Protocol):
    def submit(self, key: int, fn: Callable[[], T], ready: asyncio.Future[None] | None = None) -> asyncio.Future[T]:
        """Run ``fn()`` off the loop; called on the loop, the future completes on the loop.

        ``key`` (the ledger id) lets an ordered executor keep one ledger's reads in order.
        ``ready``: the read is admitted now but runs only once ``ready`` is done (cancelled or
        failed: it never runs, and its future is cancelled or fails with ``ready``'s error).

        Raises:
            TooManyRequestsError: the executor's queue for ``key`` is full (the read is refused).
        """


class ThreadPoolReadExecutor:
    """``numReadWorkerThreads`` threads, one shared unbounded queue, no ordering by key."""

    def __init__(self, threads: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="bookie-read")

    def submit(self, key: int, fn: Callable[[], T], ready: asyncio.Future[None] | None = None) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        if ready is None or (ready.done() and not ready.cancelled() and ready.exception() is None):
            return loop.run_in_executor(self._pool, fn)
        result: asyncio.Future[T] = loop.create_future()

        def start(_: asyncio.Future[None]) -> None:
            if ready.cancelled() or result.cancelled():
                result.cancel()
                return
            if (refusal := ready.exception()) is not None:
                result.set_exception(refusal)
                return
            try:
                running = loop.run_in_executor(self._pool, fn)
            except RuntimeError as exc:  # closed while the read waited for its turn
                result.set_exception(ServiceNotReadyError(f"the bookie is shutting down: {exc}"))
                return
            copy_outcome(running, result)

        ready.add_done_callback(start)
        return result

    def close(self) -> None:
        """Blocking: waits for the reads in flight."""
        self._pool.shutdown(wait=True)
