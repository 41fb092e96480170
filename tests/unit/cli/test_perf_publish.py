"""publish_session / publish_recorder: a load loop of one's own measured as ``perf produce``
measures — acknowledgements counted, latency in µs, warm-up latencies left out."""

from __future__ import annotations

import time

from minipulsar.cli.perf import publish_recorder, publish_session

HOUR_S = 3600.0


async def test_an_acknowledgement_after_the_warm_up_records_its_latency_in_microseconds() -> None:
    session = publish_session(interval_s=10.0, emit=None)
    session.begin()
    publish_recorder(session, 100)(time.monotonic_ns() - 2_000_000)  # sent 2 ms ago
    result = session.result(targets=["t"], options={})
    assert (result.mode, result.messages, result.bytes) == ("produce", 1, 100)
    assert result.latency.count == 1 and 2.0 <= result.latency.max_ms < HOUR_S * 1000


async def test_acknowledgements_during_the_warm_up_are_counted_without_latency() -> None:
    session = publish_session(interval_s=10.0, warmup_s=HOUR_S, emit=None)
    session.begin()
    acknowledged = publish_recorder(session, 10)
    for _ in range(3):
        acknowledged(time.monotonic_ns())
    result = session.result(targets=["t"], options={})
    assert (result.messages, result.bytes, result.latency.count) == (3, 30, 0)
