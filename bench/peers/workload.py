"""The workload every peer runs, as the minipulsar rows run it: one producer keeping up to
``max_outstanding`` messages of ``size_bytes`` in flight as fast as they are acknowledged, one
consumer reading the same stream at the same time; ``warmup_s`` not counted, then
``duration_s`` measured; latency per message, send → the server's acknowledgement, in µs into
an HdrHistogram (the :class:`bench.suite.fallback_engine.Meter` the minipulsar rows use)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.suite.fallback_engine import DRAIN_TIMEOUT_S, MB, Meter, Reporter

Done = Callable[[BaseException | None], None]
Issue = Callable[[Done], Any]
"""Send one message; call ``done(error)`` once the server acknowledged (or refused) it. May
return an awaitable (an async client's publish), which is awaited before the next send."""


@dataclass(frozen=True, slots=True)
class PeerWorkload:
    size_bytes: int = 1024
    duration_s: float = 5.0
    warmup_s: float = 1.0
    max_outstanding: int = 1000
    interval_s: float = 5.0


async def windowed_phase(issue: Issue, window: int, duration_s: float, meter: Meter) -> None:
    """Issue messages for ``duration_s`` with at most ``window`` unacknowledged, then drain."""
    loop = asyncio.get_running_loop()
    now_ns, monotonic = time.perf_counter_ns, time.monotonic
    outstanding = 0
    room: asyncio.Future | None = None

    def finished(error: BaseException | None, sent_ns: int) -> None:
        nonlocal outstanding
        if error is None:
            meter.done((now_ns() - sent_ns) // 1000)
        else:
            meter.failed(error)
        outstanding -= 1
        meter.last_done_s = monotonic()
        if room is not None and not room.done():
            room.set_result(None)

    deadline = monotonic() + duration_s
    while monotonic() < deadline:
        while outstanding >= window:
            room = loop.create_future()
            await room
        for _ in range(min(256, window - outstanding)):
            sent_ns = now_ns()
            outstanding += 1
            pending = issue(lambda error, s=sent_ns: finished(error, s))
            if pending is not None:
                await pending
        await asyncio.sleep(0)  # let acknowledgements in
    drain_deadline = monotonic() + DRAIN_TIMEOUT_S
    while outstanding > 0 and monotonic() < drain_deadline:
        room = loop.create_future()
        try:
            await asyncio.wait_for(room, drain_deadline - monotonic())
        except TimeoutError:
            break
    meter.failures += max(0, outstanding)


class ReceiveCounter:
    """What the consumer got while measuring: count and time of the last arrival."""

    def __init__(self) -> None:
        self.received = 0
        self.measuring_from = 0
        self.started_s = 0.0
        self.last_s = 0.0

    def add(self, count: int) -> None:
        self.received += count
        self.last_s = time.monotonic()

    def start_measuring(self) -> None:
        self.measuring_from, self.started_s = self.received, time.monotonic()

    async def wait_for(self, expected: int) -> None:
        """Until the measured messages all arrived (or :data:`DRAIN_TIMEOUT_S`)."""
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while self.received - self.measuring_from < expected and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # polling a counter with a deadline

    def figures(self, size_bytes: int) -> dict[str, Any]:
        received = self.received - self.measuring_from
        duration_s = max(self.last_s - self.started_s, 1e-9)
        return {
            "received": received,
            "receive_msg_per_s": received / duration_s,
            "receive_mb_per_s": received * size_bytes / duration_s / MB,
        }


async def run_workload(
    issue: Issue, receiver: ReceiveCounter, workload: PeerWorkload, label: str, emit: Callable[[str], None]
) -> dict[str, Any]:
    """Warm up, measure, wait for the consumer: the row's figures (the minipulsar rows' keys)."""
    if workload.warmup_s > 0:
        await windowed_phase(issue, workload.max_outstanding, workload.warmup_s, Meter())
    receiver.start_measuring()
    meter = Meter()
    started = time.monotonic()
    with Reporter(label, meter, workload.interval_s, emit):
        await windowed_phase(issue, workload.max_outstanding, workload.duration_s, meter)
    end_s = meter.last_done_s if meter.acked else time.monotonic()
    duration_s = max(end_s - started, 1e-9)
    await receiver.wait_for(meter.acked)
    figures = {
        "messages": meter.acked,
        "failures": meter.failures,
        "duration_s": duration_s,
        "msg_per_s": meter.acked / duration_s,
        "mb_per_s": meter.acked * workload.size_bytes / duration_s / MB,
        "latency": meter.latency_ms(),
        **receiver.figures(workload.size_bytes),
    }
    if meter.first_error is not None:
        figures["error"] = f"{type(meter.first_error).__name__}: {meter.first_error}"
    return figures
