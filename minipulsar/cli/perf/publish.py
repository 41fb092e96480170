"""Publish measurement: how ``perf produce`` measures a sender, for any sender.

``perf produce`` drives minipulsar producers; a load loop of one's own (the bench's Redis and
NATS workload) gets the same figures by measuring through the same two pieces:

- :func:`publish_session`: a produce-mode :class:`PerfSession` — publish latency recorded in
  µs into the same HdrHistogram (3 significant digits, pulsar-perf's one-hour clamp), the same
  periodic lines, the test duration and warm-up as ``-time`` and ``--warmup-time``;
- :func:`publish_recorder`: the acknowledgement callback — the message is counted (bytes
  and throughput include the warm-up, as pulsar-perf), its latency (send → acknowledgement)
  recorded only when it completes after the warm-up; :func:`publish_callback` is the same as
  a producer's ``send_async`` callback, in one call per message (``perf produce``'s hot path).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from minipulsar.cli.perf.report import PRODUCE
from minipulsar.cli.perf.session import Emit, PerfSession, print_line
from minipulsar.cli.perf.stats import MAX_LATENCY_US, PerfStats

PUBLISH_LATENCY_UNIT_MS = 0.001
"""Publish latency is recorded in µs (pulsar-perf's producer records µs, prints ms)."""


def publish_session(
    *,
    interval_s: float,
    duration_s: float = 0.0,
    warmup_s: float = 0.0,
    emit: Emit | None = print_line,
    stop: asyncio.Event | None = None,
    timeline_s: float = 0.0,
) -> PerfSession:
    """A session measuring publish latency; ``duration_s`` includes ``warmup_s``;
    ``timeline_s`` > 0: with a latency timeline in buckets of that many seconds."""
    stats = PerfStats(latency_unit_ms=PUBLISH_LATENCY_UNIT_MS, latency_highest=MAX_LATENCY_US)
    return PerfSession(
        PRODUCE,
        stats,
        interval_s=interval_s,
        duration_s=duration_s,
        warmup_s=warmup_s,
        emit=emit,
        stop=stop,
        timeline_s=timeline_s,
    )


def publish_recorder(session: PerfSession, size_bytes: int) -> Callable[[int], None]:
    """``acknowledged(sent_ns)``: one message of ``size_bytes`` acknowledged, sent at
    ``sent_ns`` (``time.monotonic_ns()``). Call it after :meth:`PerfSession.begin`."""
    record = session.stats.record
    warmup_end_ns = int(session.warmup_end_s * 1e9)
    monotonic_ns = time.monotonic_ns

    def acknowledged(sent_ns: int) -> None:
        now_ns = monotonic_ns()
        record(size_bytes, (now_ns - sent_ns) // 1000 if now_ns >= warmup_end_ns else None)

    return acknowledged


def publish_callback(
    session: PerfSession, size_bytes: int, failed: Callable[[Any], None], *, paced: bool = False
) -> Callable[[int, int | None, Any, Any], None]:
    """``callback(sent_ns, intended_ns, error, message_id)``: :func:`publish_recorder`'s
    acknowledgement when ``error`` is None, else ``failed(error)`` — what ``send_async`` calls
    (with the two times bound), the counting inlined (:meth:`PerfStats.record`'s, without its
    call). ``intended_ns`` (a paced run: when the message's rate-limiter permit was due; None
    otherwise) also goes into the session's intended-time recorder (``paced``: created here):
    latency corrected for coordinated omission."""
    stats = session.stats
    record_latency = stats.latency.record
    # unpaced, intended_ns is always None and this is never called
    record_intended = stats.measure_intended().record if paced else stats.latency.record
    warmup_end_ns = int(session.warmup_end_s * 1e9)
    monotonic_ns = time.monotonic_ns

    def completed(sent_ns: int, intended_ns: int | None, error: Any, _message_id: Any) -> None:
        if error is None:
            now_ns = monotonic_ns()
            stats.messages += 1
            stats.bytes += size_bytes
            if now_ns >= warmup_end_ns:
                record_latency((now_ns - sent_ns) // 1000)
                if intended_ns is not None:
                    record_intended((now_ns - intended_ns) // 1000)
        else:
            failed(error)

    return completed
