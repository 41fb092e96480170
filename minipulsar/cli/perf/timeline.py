"""The latency timeline of a perf run: per bucket of ``bucket_s`` (100 ms for the bench), how
many samples arrived, their p99 and max — to see *when* latency went up, next to the stall
events of :mod:`minipulsar.diagnostics`.

Samples are bucketed by the time their acknowledgement arrived (when the latency was
recorded): the recorder's sample array is in that order, so a bucket is the slice of it
appended since the previous tick. No per-message cost: a tick copies its slice (C) and sorts
it (C, ~1000 ints at 10k msg/s); when the interval reporter folds samples away
(``on_fold``), those not yet bucketed are kept for the next tick. Bucket times are
``time.monotonic()`` at the tick, the one clock of every process on the host. Bounded: at
most :data:`MAX_BUCKETS` buckets are kept.
"""

from __future__ import annotations

import array
import asyncio
import time
from dataclasses import dataclass

from minipulsar.cli.perf.stats import LatencyRecorder

MAX_BUCKETS = 36_000
"""An hour of 100 ms buckets."""


@dataclass(frozen=True, slots=True)
class Bucket:
    t: float
    """End of the bucket (monotonic s): its samples were recorded in (previous t, t]."""
    count: int
    p99_ms: float
    max_ms: float


def bucket_of(t: float, samples: array.array | list[int], unit_ms: float) -> Bucket:
    """The bucket ending at ``t`` holding ``samples`` (in the recorder's unit)."""
    if not samples:
        return Bucket(t, 0, 0.0, 0.0)
    ordered = sorted(samples)
    # the nearest-rank p99, as HdrHistogram's value at percentile (without its bucketing)
    rank = max(0, -(-len(ordered) * 99 // 100) - 1)
    return Bucket(t, len(ordered), ordered[rank] * unit_ms, ordered[-1] * unit_ms)


class LatencyTimeline:
    """Ticks every ``bucket_s`` while :meth:`run` runs; :attr:`buckets` is the timeline."""

    def __init__(self, recorder: LatencyRecorder, bucket_s: float) -> None:
        if bucket_s <= 0:
            raise ValueError(f"the timeline bucket must be > 0 s, got {bucket_s}")
        self.bucket_s = bucket_s
        self.buckets: list[Bucket] = []
        self._recorder = recorder
        self._seen = 0
        """Samples of the recorder's current array already bucketed."""
        self._carried = array.array("q")
        """Samples folded away by the reporter before this bucket's tick."""
        recorder.on_fold = self._folded

    def _folded(self, oldest: array.array) -> None:
        """The recorder moves its ``oldest`` samples out of :attr:`LatencyRecorder.pending`."""
        self._carried.extend(oldest[self._seen :])
        self._seen = max(0, self._seen - len(oldest))

    def tick(self, now: float | None = None) -> Bucket:
        """Close the bucket ending now."""
        pending = self._recorder.pending
        samples = self._carried + pending[self._seen :]
        self._seen = len(pending)
        self._carried = array.array("q")
        bucket = bucket_of(time.monotonic() if now is None else now, samples, self._recorder.unit_ms)
        if len(self.buckets) < MAX_BUCKETS:
            self.buckets.append(bucket)
        return bucket

    async def run(self, start_s: float) -> None:
        """Tick on an absolute schedule from ``start_s`` until cancelled."""
        due = start_s
        while True:
            due += self.bucket_s
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            self.tick()

    def reset(self) -> None:
        """Forget what the recorder holds now: the next bucket starts now."""
        self._seen = len(self._recorder.pending)
        self._carried = array.array("q")
        self.buckets.clear()
