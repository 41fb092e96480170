"""Supervision: the only place where an exception nobody expected is caught.

A bug crashes what it happens in: its exception propagates up to the boundary of the task,
thread or callback it runs in. At that boundary there is nothing left to crash into, so the
exception is logged once, at ERROR, with its traceback — and a test fails when a project
logger writes ERROR it did not expect (``tests/conftest.py``). The helpers here are those
boundaries; code elsewhere catches only the errors it expects, by type, and handles them.

Invariants:
- an exception that ends a :func:`spawn`ed task, a :class:`Periodic` round or a
  :func:`guarded` (or :func:`guarded_each`) call is logged at ERROR with its traceback, exactly once;
- ``asyncio.CancelledError`` is never logged: cancelling is how tasks are stopped;
- a failed :class:`Periodic` round does not end the task: the next round runs on time (a
  load report or an eviction pass that stopped for good would go unnoticed);
- errors a round expects (``expected``) are logged at ``expected_level`` without a traceback:
  they are the world (a store unreachable for a while), not bugs;
- :func:`failure_of` logs as :func:`guarded` does and hands the exception back, so that its
  caller fails what depended on the call (a writer thread fails its journal, and no record
  waits forever for it);
- :func:`outcome_of` logs nothing: the exception is the outcome of a call made for a caller
  waiting elsewhere (a future on the loop), and that caller raises it — the bug crashes there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, ParamSpec, TypeVar

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")
P = ParamSpec("P")


def spawn(coro: Coroutine[Any, Any, T], *, name: str, logger: logging.Logger) -> asyncio.Task[T]:
    """Run ``coro`` as a task of the running loop; if it ends with an exception other than
    cancellation, ``logger`` reports it at ERROR (an awaiter still sees the exception)."""
    task = asyncio.get_running_loop().create_task(coro, name=name)
    task.add_done_callback(lambda done: _report(done, logger))
    return task


def _report(task: asyncio.Task[Any], logger: logging.Logger) -> None:
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        logger.error("task %s failed", task.get_name(), exc_info=error)


def guarded(logger: logging.Logger, what: str, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
    """Call ``fn(*args, **kwargs)`` at a boundary (a thread's body, one listener among many):
    an exception is logged at ERROR as "``what`` failed" and None returned, so the caller goes
    on with the others."""
    try:
        return fn(*args, **kwargs)
    except Exception:
        logger.exception("%s failed", what)
        return None


def guarded_each(
    logger: logging.Logger, what: str, fns: Sequence[Callable[[A, B], object]], first: A, seconds: Sequence[B]
) -> None:
    """Call ``fns[i](first, seconds[i])`` for every i, in order, each at a boundary as
    :func:`guarded` (an exception is logged and the next call made) — for many listeners at
    once, without a frame per call."""
    start, count = 0, len(fns)
    while start < count:
        index = start
        try:
            for index in range(start, count):
                fns[index](first, seconds[index])
            return
        except Exception:
            logger.exception("%s failed", what)
            start = index + 1


class Periodic:
    """Runs ``action`` every ``interval_s`` (first after one interval) until :meth:`stop`.

    Args:
        name: the task's name, and the subject of its log lines.
        interval_s: seconds between the end of one round and the start of the next; a
            callable is asked again before each round (settings that change at run time).
        action: one round; a coroutine function or a plain function.
        logger: where failed rounds are reported.
        expected: exception types a round may end with in normal operation; logged at
            ``expected_level`` as one line.
        skip: when it returns True the round is skipped (not the leader, say).
    """

    def __init__(
        self,
        name: str,
        interval_s: float | Callable[[], float],
        action: Callable[[], Awaitable[None] | None],
        *,
        logger: logging.Logger,
        expected: tuple[type[BaseException], ...] = (),
        expected_level: int = logging.WARNING,
        skip: Callable[[], bool] | None = None,
    ) -> None:
        self.name = name
        self._interval_s = interval_s
        self._action = action
        self._logger = logger
        self._expected = expected
        self._expected_level = expected_level
        self._skip = skip
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        assert self._task is None, f"{self.name} started twice"
        self._task = spawn(self._run(), name=self.name, logger=self._logger)

    async def stop(self) -> None:
        """Cancel the task and wait until it has ended (a round in progress is cancelled)."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    def _interval(self) -> float:
        return self._interval_s() if callable(self._interval_s) else self._interval_s

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval())
            if self._skip is None or not self._skip():
                await self.run_once()

    async def run_once(self) -> None:
        """One round now, reported like a scheduled one (tests drive rounds with it)."""
        try:
            result = self._action()
            if result is not None:
                await result
        except self._expected as error:
            self._logger.log(self._expected_level, "%s: %s", self.name, error)
        except Exception:
            self._logger.exception("%s failed", self.name)


def failure_of(
    logger: logging.Logger, what: str, fn: Callable[P, object], *args: P.args, **kwargs: P.kwargs
) -> Exception | None:
    """:func:`guarded` for a boundary that must know whether ``fn`` failed — a thread's loop
    that fails its pending work on any error, so that nothing waits forever for it: the
    exception is logged at ERROR as "``what`` failed", with its traceback, and returned;
    None when ``fn`` returned."""
    try:
        fn(*args, **kwargs)
    except Exception as error:
        logger.exception("%s failed", what)
        return error
    return None


def outcome_of(fn: Callable[[], T]) -> tuple[T, None] | tuple[None, Exception]:
    """Call ``fn()`` for a caller waiting elsewhere (a worker thread's task, awaited as a future
    on the loop): ``(result, None)``, or ``(None, exception)`` — not logged here: the waiting
    caller raises it, so that a bug crashes there, as with :mod:`concurrent.futures`."""
    try:
        return fn(), None
    except Exception as error:  # noqa: BLE001 -- handed to the waiting caller, which raises it
        return None, error
