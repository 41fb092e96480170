"""PerfSession: one run's clock, stop conditions, periodic lines and final figures.

A run measures from :meth:`PerfSession.begin` (everything set up) and ends at the first of:
the caller's ``stop`` event (Ctrl-C: the result says ``interrupted``), the test duration
(``duration_s`` > 0), or the run's own :meth:`PerfSession.finish` (enough messages, or an
error). Meanwhile a report task prints the interval line every ``interval_s`` seconds, on an
absolute schedule so the lines do not drift. The run's workers watch :attr:`done`; the mode
then drains what is in flight, calls :meth:`end` and builds the result.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from minipulsar.cli.perf.report import PerfResult, interval_line
from minipulsar.cli.perf.stats import IntervalStats, PerfStats, mbit_per_s
from minipulsar.cli.perf.timeline import LatencyTimeline
from minipulsar.errors import MiniPulsarError

Emit = Callable[[str], None]
MB = 1_000_000
DRAIN_TIMEOUT_S = 10.0
"""How long a run waits, after its end, for what is still in flight (then it is not counted)."""
YIELD_EVERY = 64
"""Operations between two yields to the event loop in a worker that did not sleep: an unpaced
sender (or a receive loop over a full queue) would otherwise hold the loop — batch timers,
the reporter and the other workers wait."""
T = TypeVar("T")


RUN_GC_THRESHOLD = 50_000
"""The cyclic collector's first-generation threshold while a run measures (Python's: 700).
A sender allocates a few objects per message that die young, by reference counting; at 700
the collector ran thousands of times a second and took a tenth of the perf process's CPU."""


class _GcRuns:
    """Runs inside :func:`run_gc_settings` now, and the thresholds before the first of them."""

    count = 0
    thresholds: tuple[int, int, int] = (0, 0, 0)


@contextlib.contextmanager
def run_gc_settings() -> Iterator[None]:
    """While a run measures: what exists after set-up is frozen out of the collector's scans
    (``gc.freeze``) and young objects are collected every :data:`RUN_GC_THRESHOLD`
    allocations; both are undone when the last concurrent run ends. Cycles are still
    collected, so memory stays bounded."""
    if _GcRuns.count == 0:
        _GcRuns.thresholds = first, second, third = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(max(RUN_GC_THRESHOLD, first), second, third)
    _GcRuns.count += 1
    try:
        yield
    finally:
        _GcRuns.count -= 1
        if _GcRuns.count == 0:
            gc.set_threshold(*_GcRuns.thresholds)
            gc.unfreeze()


class PerfInterrupted(Exception):
    """The stop event came while the run was still setting up: there are no figures."""


def print_line(line: str) -> None:
    """The default ``emit``: stdout, flushed (progress must show when piped)."""
    print(line, flush=True)


class PerfSession:
    def __init__(
        self,
        mode: str,
        stats: PerfStats,
        *,
        interval_s: float,
        duration_s: float = 0.0,
        warmup_s: float = 0.0,
        emit: Emit | None = print_line,
        stop: asyncio.Event | None = None,
        timeline_s: float = 0.0,
    ) -> None:
        """``timeline_s`` > 0: keep a latency timeline in buckets of that many seconds
        (:mod:`minipulsar.cli.perf.timeline`; the result's ``timeline``)."""
        if interval_s <= 0:
            raise ValueError(f"the stats interval must be > 0 s, got {interval_s}")
        self.mode = mode
        self.stats = stats
        self._interval_s = interval_s
        self._duration_s = duration_s
        self._warmup_s = warmup_s
        self._emit = emit
        self._stop = stop
        self.done = asyncio.Event()
        """Set when the run should end; workers stop taking new work."""
        self.interrupted = False
        self.error: BaseException | None = None
        self.intervals: list[IntervalStats] = []
        self.start_s = self.warmup_end_s = self.end_s = 0.0
        self._reporter: asyncio.Task | None = None
        self._workers: list[asyncio.Task] = []
        self.timeline = LatencyTimeline(stats.latency, timeline_s) if timeline_s > 0 else None
        self._timeline_task: asyncio.Task | None = None

    def emit(self, line: str) -> None:
        if self._emit is not None:
            self._emit(line)

    async def set_up(self, awaitable: Awaitable[T]) -> T:
        """Await the run's set-up (lookups, subscriptions, new ledgers), which the stop event
        cancels: an unreachable cluster must not hold Ctrl-C for the operation timeout.

        Raises:
            PerfInterrupted: the stop event came first.
        """
        task = asyncio.ensure_future(awaitable)
        if self._stop is None:
            return await task
        stopper = asyncio.ensure_future(self._stop.wait())
        try:
            finished, _ = await asyncio.wait([task, stopper], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            if not task.done():  # stopped (or this call cancelled): abandon the set-up
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if task not in finished:
            raise PerfInterrupted(f"perf {self.mode} stopped while setting up")
        return task.result()

    def begin(self) -> None:
        """Start measuring: now is time zero of the run and of its first interval."""
        self.start_s = time.monotonic()
        self.warmup_end_s = self.start_s + self._warmup_s
        self.stats.restart_interval()
        self._reporter = asyncio.get_running_loop().create_task(self._report())
        if self.timeline is not None:
            self.timeline.reset()
            self._timeline_task = asyncio.get_running_loop().create_task(self.timeline.run(self.start_s))

    def finish(self, error: BaseException | None = None) -> None:
        """End the run (the first error given is kept)."""
        if error is not None and self.error is None:
            self.error = error
        self.done.set()

    def start_worker(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task:
        """Run ``coro`` (a sender, a receive loop) until :meth:`stop_workers`; if it fails,
        the run ends with its error."""
        task = asyncio.get_running_loop().create_task(coro)
        task.add_done_callback(self._worker_exited)
        self._workers.append(task)
        return task

    def _worker_exited(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.finish(task.exception())

    async def stop_workers(self) -> None:
        """Cancel the workers and wait for them. A worker's bug (anything but a
        MiniPulsarError, which the result reports) is raised here."""
        workers, self._workers = self._workers, []
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        if self.error is not None and not isinstance(self.error, MiniPulsarError):
            raise self.error

    async def wait(self) -> None:
        """Until the run should end: finish(), the stop event, or the test duration."""
        waits = [asyncio.ensure_future(self.done.wait())]
        if self._stop is not None:
            waits.append(asyncio.ensure_future(self._stop.wait()))
        timeout_s = None
        if self._duration_s > 0:
            timeout_s = max(0.0, self.start_s + self._duration_s - time.monotonic())
        try:
            await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()
        if self._stop is not None and self._stop.is_set() and not self.done.is_set():
            self.interrupted = True
        self.done.set()

    async def sleep(self, seconds: float) -> None:
        """Sleep, but return as soon as the run is done."""
        if seconds < 0.05:  # short waits: pacing a send loop, not worth a waiter
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.done.wait(), seconds)

    def end(self) -> None:
        """Stop the clock and the periodic lines (what is still in flight is no longer counted)."""
        self.end_s = time.monotonic()
        if self._reporter is not None:
            self._reporter.cancel()
            self._reporter = None
        if self._timeline_task is not None and self.timeline is not None:
            self._timeline_task.cancel()
            self._timeline_task = None
            self.timeline.tick(self.end_s)  # the last, partial bucket

    async def _report(self) -> None:
        due_s = self.start_s
        while True:
            due_s += self._interval_s
            await asyncio.sleep(max(0.0, due_s - time.monotonic()))
            await self.stats.latency.fold_pending()  # a slice per loop turn: the loop is not held
            if self.stats.intended is not None:
                await self.stats.intended.fold_pending()
            interval = self.stats.take_interval()
            self.intervals.append(interval)
            self.emit(interval_line(self.mode, interval))

    def result(self, *, targets: list[str], options: dict[str, Any]) -> PerfResult:
        """The run's figures; emits pulsar-perf's aggregate lines."""
        if self._reporter is not None:
            self.end()
        stats = self.stats
        duration_s = max(0.0, self.end_s - self.start_s)
        result = PerfResult(
            mode=self.mode,
            messages=stats.messages,
            bytes=stats.bytes,
            failures=stats.failures,
            duration_s=duration_s,
            msg_per_s=stats.messages / duration_s if duration_s else 0.0,
            mbit_per_s=mbit_per_s(stats.bytes, duration_s),
            mb_per_s=stats.bytes / duration_s / MB if duration_s else 0.0,
            latency=stats.latency.cumulative(),
            intended_latency=stats.intended.cumulative() if stats.intended is not None else None,
            acks=stats.acks,
            ack_failures=stats.ack_failures,
            ack_per_s=stats.acks / duration_s if duration_s else 0.0,
            interrupted=self.interrupted,
            error=_describe(self.error) if self.error is not None else None,
            targets=targets,
            options=options,
            intervals=list(self.intervals),
            timeline=list(self.timeline.buckets) if self.timeline is not None else [],
        )
        for line in result.aggregate_lines():
            self.emit(line)
        return result


def _describe(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
