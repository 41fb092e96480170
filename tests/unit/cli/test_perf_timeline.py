"""perf's latency timeline: buckets by receipt time, p99 and max per bucket, no sample lost
or counted twice when the interval reporter folds samples away between ticks."""

from __future__ import annotations

import pytest

from minipulsar.cli.perf.stats import MAX_LATENCY_US, LatencyRecorder
from minipulsar.cli.perf.timeline import LatencyTimeline, bucket_of


def test_a_bucket_has_the_nearest_rank_p99_and_the_max() -> None:
    bucket = bucket_of(1.0, list(range(1, 201)), unit_ms=1.0)
    assert (bucket.count, bucket.p99_ms, bucket.max_ms) == (200, 198.0, 200.0)
    assert bucket_of(2.0, [], unit_ms=1.0).count == 0


def test_each_tick_buckets_the_samples_recorded_since_the_previous_one() -> None:
    recorder = LatencyRecorder(unit_ms=0.001, highest_value=MAX_LATENCY_US)
    timeline = LatencyTimeline(recorder, 0.1)
    recorder.record(999)  # before the run: not in the timeline
    timeline.reset()
    for value in (1000, 2000):
        recorder.record(value)
    timeline.tick(10.1)
    recorder.record(50_000)
    timeline.tick(10.2)
    timeline.tick(10.3)
    assert [(b.t, b.count, b.max_ms) for b in timeline.buckets] == [
        (10.1, 2, pytest.approx(2.0)),
        (10.2, 1, pytest.approx(50.0)),
        (10.3, 0, 0.0),
    ]


async def test_samples_folded_away_between_ticks_stay_in_their_bucket() -> None:
    recorder = LatencyRecorder(unit_ms=1.0, highest_value=MAX_LATENCY_US)
    timeline = LatencyTimeline(recorder, 0.1)
    for value in (1, 2, 3):
        recorder.record(value)
    timeline.tick(1.0)
    recorder.record(40)
    await recorder.fold_pending()  # the interval reporter, between two ticks
    recorder.record(50)
    recorder.take_interval()
    recorder.record(60)
    timeline.tick(2.0)
    assert [(b.count, b.max_ms) for b in timeline.buckets] == [(3, 3.0), (3, 60.0)]


def test_a_bucket_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        LatencyTimeline(LatencyRecorder(unit_ms=1.0, highest_value=10), 0)
