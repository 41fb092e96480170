"""Perf statistics: interval and cumulative HdrHistograms, rates, pulsar-perf's Mbit/s."""

from __future__ import annotations

import pytest

from minipulsar.cli.perf.stats import (
    MAX_LATENCY_US,
    SAMPLES_PER_TURN,
    LatencyRecorder,
    LatencySummary,
    PerfStats,
    mbit_per_s,
)
from tests.support.clock import ManualClock


def test_an_interval_holds_only_its_own_samples_and_the_cumulative_all() -> None:
    recorder = LatencyRecorder(unit_ms=0.001, highest_value=MAX_LATENCY_US)
    for latency_us in (1000, 2000, 3000, 4000):
        recorder.record(latency_us)
    first = recorder.take_interval()
    recorder.record(100_000)
    second = recorder.take_interval()
    total = recorder.cumulative()
    assert (first.count, second.count, total.count) == (4, 1, 5)
    assert first.mean_ms == pytest.approx(2.5)
    assert first.max_ms == pytest.approx(4.0, rel=1e-3)
    assert second.p50_ms == pytest.approx(100.0, rel=1e-3)
    assert total.mean_ms == pytest.approx((10_000 + 100_000) / 5 / 1000)
    assert total.max_ms == pytest.approx(100.0, rel=1e-3)


def test_percentiles_are_hdrhistogram_values_to_three_digits() -> None:
    recorder = LatencyRecorder(unit_ms=0.001, highest_value=MAX_LATENCY_US)
    for latency_us in range(1, 10_001):
        recorder.record(latency_us)
    summary = recorder.take_interval()
    assert summary.p50_ms == pytest.approx(5.0, rel=2e-3)
    assert summary.p99_ms == pytest.approx(9.9, rel=2e-3)
    assert summary.p999_ms == pytest.approx(9.99, rel=2e-3)


def test_samples_still_pending_at_the_end_reach_the_cumulative_figures() -> None:
    recorder = LatencyRecorder(unit_ms=1.0, highest_value=1000)
    recorder.record(7)
    assert recorder.cumulative().count == 1
    assert recorder.cumulative().p50_ms == 7


def test_values_above_the_highest_are_clamped_not_dropped() -> None:
    recorder = LatencyRecorder(unit_ms=1.0, highest_value=1000)
    recorder.record(10**9)
    summary = recorder.take_interval()
    assert summary.count == 1
    assert summary.max_ms == pytest.approx(1000, rel=1e-3)


def test_an_empty_interval_reports_zeros() -> None:
    assert LatencyRecorder(unit_ms=1.0, highest_value=1000).take_interval() == LatencySummary()


def test_interval_rates_use_the_interval_elapsed_time() -> None:
    clock = ManualClock(0.0)
    stats = PerfStats(latency_unit_ms=0.001, latency_highest=MAX_LATENCY_US, clock=clock)
    stats.restart_interval()
    for _ in range(2000):
        stats.record(1024, 500)
    stats.record_failure()
    stats.record_ack()
    clock.advance(2.0)
    first = stats.take_interval()
    assert (first.total_messages, first.messages) == (2000, 2000)
    assert first.msg_per_s == pytest.approx(1000)
    assert first.failures_per_s == pytest.approx(0.5)
    assert first.acks_per_s == pytest.approx(0.5)
    assert first.mbit_per_s == pytest.approx(1000 * 1024 * 8 / 1024 / 1024)
    stats.record(1024, None)  # counted, latency not measured (warm-up)
    clock.advance(1.0)
    second = stats.take_interval()
    assert (second.total_messages, second.messages, second.latency.count) == (2001, 1, 0)
    assert second.msg_per_s == pytest.approx(1.0)


def test_mbit_per_s_is_pulsar_perfs_binary_megabits() -> None:
    assert mbit_per_s(1024 * 1024, 8.0) == pytest.approx(1.0)
    assert mbit_per_s(123, 0.0) == 0.0


async def test_folding_in_slices_gives_the_same_interval_as_folding_at_once() -> None:
    sliced = LatencyRecorder(unit_ms=0.001, highest_value=MAX_LATENCY_US)
    whole = LatencyRecorder(unit_ms=0.001, highest_value=MAX_LATENCY_US)
    samples = [1000 + (i * 7919) % 50_000 for i in range(3 * SAMPLES_PER_TURN + 5)]
    for value in samples:
        sliced.record(value)
        whole.record(value)
    await sliced.fold_pending()
    assert len(sliced.pending) == 0, "folded into the interval"
    sliced.record(123_456)  # recorded while folding: still this interval's
    whole.record(123_456)
    assert sliced.take_interval() == whole.take_interval()
    assert sliced.cumulative() == whole.cumulative()


async def test_a_folded_interval_is_counted_by_the_cumulative_figures() -> None:
    recorder = LatencyRecorder(unit_ms=1.0, highest_value=1000)
    recorder.record(5)
    await recorder.fold_pending()
    assert recorder.cumulative().count == 1
