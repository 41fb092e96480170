"""PerfSession: how a perf run ends (duration, stop event, finish, worker error), its
cancellable set-up, its periodic lines and its final figures. Event loop only, no sockets."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

from minipulsar.cli.perf.report import PRODUCE
from minipulsar.cli.perf.session import RUN_GC_THRESHOLD, PerfInterrupted, PerfSession, run_gc_settings
from minipulsar.cli.perf.stats import MAX_LATENCY_US, PerfStats
from minipulsar.errors import ConnectionClosedError

DEADLINE_S = 5.0


def session(stop: asyncio.Event | None = None, **kwargs) -> PerfSession:
    stats = PerfStats(latency_unit_ms=0.001, latency_highest=MAX_LATENCY_US)
    return PerfSession(PRODUCE, stats, interval_s=10.0, emit=None, stop=stop, **kwargs)


async def test_set_up_returns_what_it_awaited() -> None:
    run = session(stop=asyncio.Event())
    assert await run.set_up(asyncio.sleep(0, result="ready")) == "ready"


async def test_the_stop_event_cancels_the_set_up() -> None:
    """Goal: Ctrl-C while producers are still being created (an unreachable cluster retries
    for the whole operation timeout) ends at once, and abandons the set-up."""
    stop = asyncio.Event()
    run = session(stop=stop)
    never = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(stop.set)
    with pytest.raises(PerfInterrupted):
        await asyncio.wait_for(run.set_up(never), DEADLINE_S)
    assert never.cancelled()


async def test_a_run_ends_at_its_duration_not_interrupted() -> None:
    run = session(stop=asyncio.Event(), duration_s=0.05)
    run.begin()
    await asyncio.wait_for(run.wait(), DEADLINE_S)
    run.end()
    assert run.done.is_set() and not run.interrupted
    assert 0.045 <= run.end_s - run.start_s < DEADLINE_S  # uvloop timers may fire up to 1 ms early


async def test_the_stop_event_ends_a_run_as_interrupted() -> None:
    stop = asyncio.Event()
    run = session(stop=stop)
    run.begin()
    asyncio.get_running_loop().call_soon(stop.set)
    await asyncio.wait_for(run.wait(), DEADLINE_S)
    assert run.interrupted and run.done.is_set()
    run.end()


async def test_finish_ends_a_run_without_interrupting_it() -> None:
    run = session(stop=asyncio.Event())
    run.begin()
    asyncio.get_running_loop().call_soon(run.finish)
    await asyncio.wait_for(run.wait(), DEADLINE_S)
    assert not run.interrupted and run.error is None
    run.end()


async def test_a_failing_worker_ends_the_run_with_its_error() -> None:
    run = session()
    run.begin()

    async def worker() -> None:
        raise ConnectionClosedError("bookie gone")

    run.start_worker(worker())
    await asyncio.wait_for(run.wait(), DEADLINE_S)
    await run.stop_workers()
    run.end()
    result = run.result(targets=[], options={})
    assert result.error == "ConnectionClosedError: bookie gone"


async def test_a_workers_bug_is_raised_not_reported() -> None:
    run = session()
    run.begin()

    async def worker() -> None:
        raise KeyError("bug")

    run.start_worker(worker())
    await asyncio.wait_for(run.wait(), DEADLINE_S)
    with pytest.raises(KeyError):
        await run.stop_workers()
    run.end()


async def test_periodic_lines_come_every_interval_and_the_aggregate_at_the_end() -> None:
    lines: list[str] = []
    two_lines = asyncio.Event()

    def emit(line: str) -> None:
        lines.append(line)
        if len(lines) >= 2:
            two_lines.set()

    run = PerfSession(
        PRODUCE, PerfStats(latency_unit_ms=0.001, latency_highest=MAX_LATENCY_US), interval_s=0.02, emit=emit
    )
    run.begin()
    run.stats.record(1024, 1500)
    await asyncio.wait_for(two_lines.wait(), DEADLINE_S)
    run.finish()
    run.end()
    result = run.result(targets=["t"], options={"k": 1})
    assert lines[0].startswith("Throughput produced:       1 msg")
    assert " - med:   1.500 - " in lines[0]
    assert lines[-2].startswith("Aggregated throughput stats --- 1 records sent --- ")
    assert lines[-1].startswith("Aggregated latency stats --- Latency: mean:   1.500 ms")
    assert len(result.intervals) >= 2 and result.messages == 1 and result.bytes == 1024
    assert result.msg_per_s == pytest.approx(1 / result.duration_s)


def test_run_gc_settings_raise_the_threshold_and_restore_it_after_the_last_run() -> None:
    before = gc.get_threshold()
    with run_gc_settings():
        with run_gc_settings():  # a consume run beside a produce run
            assert gc.get_threshold()[0] == max(RUN_GC_THRESHOLD, before[0])
        assert gc.get_threshold()[0] == max(RUN_GC_THRESHOLD, before[0]), "one run still measures"
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_a_paced_run_also_reports_latency_from_the_intended_send_time() -> None:
    """Goal: coordinated omission corrected at fixed rates — a message sent late because the
    sender was held up counts the wait from when it should have been sent."""
    from minipulsar.cli.perf.publish import publish_callback, publish_session

    async def scenario() -> list[str]:
        lines: list[str] = []
        session = publish_session(interval_s=60.0, emit=lines.append)
        session.begin()
        completed = publish_callback(session, 1024, lambda error: None, paced=True)
        now_ns = time.monotonic_ns()
        completed(now_ns - 2_000_000, now_ns - 30_000_000, None, None)  # sent 2 ms ago, due 30 ms ago
        session.end()
        result = session.result(targets=["t"], options={})
        assert result.latency.max_ms == pytest.approx(2.0, rel=0.05)
        assert result.intended_latency is not None and result.intended_latency.max_ms == pytest.approx(30.0, rel=0.05)
        return lines

    lines = asyncio.run(scenario())
    assert lines[-1].startswith("Aggregated intended-time latency stats (coordinated omission corrected) --- ")
