"""The workload every peer runs, measured as ``minipulsar perf`` measures the minipulsar rows.

- One producer keeps up to ``max_outstanding`` messages of ``size_bytes`` in flight, as fast
  as they are acknowledged, for ``warmup_s + duration_s``; one consumer reads the same stream
  meanwhile.
- The measuring is perf's own (:func:`minipulsar.cli.perf.publish_session` and
  :func:`~minipulsar.cli.perf.publish_recorder`, as in ``perf produce``): the same clock,
  pulsar-perf's warm-up (its messages count in the throughput, their latencies are not
  recorded), the same HdrHistogram (µs, 3 significant digits, the same clamp), the same
  periodic lines and figures. What is still in flight at the end is waited for (perf's
  drain timeout) and counted.
- The consumer's figure is what it received while the producer ran, per second: what
  ``perf consume`` beside ``perf produce`` for the same test duration reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from bench.suite.perf_adapter import Emit, Figures, figures_of
from minipulsar.cli.perf import DRAIN_TIMEOUT_S, YIELD_EVERY, PerfSession, publish_recorder, publish_session

MB = 1_000_000
Done = Callable[[BaseException | None], None]
Issue = Callable[[Done], Awaitable[Any] | None]
"""Send one message; call ``done(error)`` once the server acknowledged (or refused) it. May
return an awaitable (an async client's publish), which is awaited before the next send."""


@dataclass(frozen=True, slots=True)
class PeerWorkload:
    size_bytes: int = 1024
    duration_s: float = 5.0
    """Measured seconds, after the warm-up."""
    warmup_s: float = 1.0
    max_outstanding: int = 1000
    interval_s: float = 5.0


class Window:
    """At most ``size`` messages unacknowledged (the peers' clients have no such limit)."""

    def __init__(self, size: int) -> None:
        self._room = asyncio.Semaphore(size)
        self.outstanding = 0
        self._empty = asyncio.Event()
        self._empty.set()

    async def acquire(self) -> None:
        await self._room.acquire()
        self.outstanding += 1
        self._empty.clear()

    def release(self) -> None:
        self._room.release()
        self.outstanding -= 1
        if self.outstanding == 0:
            self._empty.set()

    async def drained(self, timeout_s: float) -> int:
        """Wait until nothing is outstanding (at most ``timeout_s``); what still is."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._empty.wait(), timeout_s)
        return self.outstanding


class ReceiveCounter:
    """What the consumer received between :meth:`start` and :meth:`stop`; ``add`` is the hot path."""

    def __init__(self) -> None:
        self.total = 0
        self._from = 0
        self._started_s = 0.0
        self.received = 0
        self.duration_s = 0.0

    def add(self, count: int) -> None:
        self.total += count

    def start(self) -> None:
        self._from, self._started_s = self.total, time.monotonic()

    def stop(self) -> None:
        self.received, self.duration_s = self.total - self._from, time.monotonic() - self._started_s

    def figures(self, size_bytes: int) -> Figures:
        rate = self.received / self.duration_s if self.duration_s > 0 else 0.0
        return {"received": self.received, "receive_msg_per_s": rate, "receive_mb_per_s": rate * size_bytes / MB}


async def run_workload(
    issue: Issue, receiver: ReceiveCounter, workload: PeerWorkload, label: str, emit: Emit
) -> Figures:
    """The row's figures (the minipulsar rows' keys); perf's periodic lines go to ``emit``."""
    session = publish_session(
        interval_s=workload.interval_s,
        duration_s=workload.warmup_s + workload.duration_s,
        warmup_s=workload.warmup_s,
        emit=emit,
    )
    window = Window(workload.max_outstanding)
    session.begin()
    receiver.start()
    session.start_worker(_send(issue, window, session, workload.size_bytes))
    try:
        await session.wait()
    finally:
        await session.stop_workers()
    receiver.stop()
    if late := await window.drained(DRAIN_TIMEOUT_S):
        emit(f"{late} messages still unacknowledged {DRAIN_TIMEOUT_S:.0f} s after the end of the run; not counted")
    session.end()
    result = session.result(targets=[label], options=asdict(workload))
    return figures_of(result) | receiver.figures(workload.size_bytes)


async def _send(issue: Issue, window: Window, session: PerfSession, size_bytes: int) -> None:
    acknowledged, record_failure = publish_recorder(session, size_bytes), session.stats.record_failure

    def done(sent_ns: int, error: BaseException | None) -> None:
        window.release()
        if error is None:
            acknowledged(sent_ns)
        else:
            record_failure()

    sent = 0
    while not session.done.is_set():
        await window.acquire()
        pending = issue(functools.partial(done, time.monotonic_ns()))
        if pending is not None:
            await pending
        sent += 1
        if sent % YIELD_EVERY == 0:  # let acknowledgements in while the window has room
            await asyncio.sleep(0)
