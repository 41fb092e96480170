"""What a perf run counts: messages, bytes, failures, acks, and latencies (HdrHistogram).

pulsar-perf keeps two HdrHistogram ``Recorder``s fed with every sample: one read (and reset)
per report interval, one read once at the end. Here the hot path appends the sample to an
array (~0.1 µs; ``HdrHistogram.record_value`` costs ~1 µs in pure Python, enough to make the
tool its own bottleneck), and :meth:`LatencyRecorder.take_interval` folds the samples into
that interval's histogram, then adds the interval into the cumulative one. So both hold
exactly the same samples, and every percentile is HdrHistogram's (3 significant digits).

Units: a recorder counts in whatever integer unit its caller records — microseconds for
publish and add-entry latency, whole milliseconds for end-to-end latency, as pulsar-perf — and
reports milliseconds (``unit_ms`` converts). Throughput in Mbit/s is pulsar-perf's:
bytes/s / 1024 / 1024 * 8.
"""

from __future__ import annotations

import array
import asyncio
import collections
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hdrh.histogram import HdrHistogram

from minipulsar.clock import MONOTONIC, Clock

SIGNIFICANT_DIGITS = 3
PERCENTILES = (50, 95, 99, 99.9, 99.99, 99.999)
MAX_LATENCY_US = 3_600_000_000
"""pulsar-perf's clamp for µs latencies (one hour): slower means the run is broken, not slow."""
MAX_LATENCY_MS = 10 * 24 * 3_600_000
"""pulsar-perf's clamp for end-to-end latencies in ms (ten days)."""


def mbit_per_s(size_bytes: int, elapsed_s: float) -> float:
    """pulsar-perf's Mbit/s: binary megabits."""
    return size_bytes / elapsed_s / 1024 / 1024 * 8 if elapsed_s > 0 else 0.0


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Latency figures in milliseconds (all 0.0 when ``count`` is 0)."""

    count: int = 0
    mean_ms: float = 0.0
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    p99_ms: float = 0.0
    p999_ms: float = 0.0
    p9999_ms: float = 0.0
    p99999_ms: float = 0.0
    max_ms: float = 0.0

    @classmethod
    def of(cls, histogram: HdrHistogram, value_sum: int, unit_ms: float) -> LatencySummary:
        count = histogram.get_total_count()
        if count == 0:
            return cls()
        values = histogram.get_percentile_to_value_dict(list(PERCENTILES))
        p50, p95, p99, p999, p9999, p99999 = (values[p] * unit_ms for p in PERCENTILES)
        # the exact mean (HdrHistogram's get_mean_value walks every bucket: ~40 ms a call)
        return cls(
            count, value_sum / count * unit_ms, p50, p95, p99, p999, p9999, p99999, histogram.get_max_value() * unit_ms
        )


SAMPLES_PER_TURN = 4096
""":meth:`LatencyRecorder.fold_pending`: samples counted per event-loop turn (~1 ms)."""
VALUES_PER_TURN = 256
"""... and distinct values recorded per turn (HdrHistogram's ``record_value`` is pure Python,
~5-9 µs: a 5 s interval at 10k msg/s has ~4,000 distinct µs values, which held perf's loop for
35-65 ms in one go — a stall of every message in flight, seen in the latency timeline)."""


class LatencyRecorder:
    """Interval and cumulative latency histograms. ``record(value)`` is the hot path."""

    __slots__ = (
        "_cumulative",
        "_cumulative_sum",
        "_highest",
        "_interval",
        "_interval_sum",
        "_pending",
        "on_fold",
        "record",
        "unit_ms",
    )

    def __init__(self, unit_ms: float, highest_value: int) -> None:
        self.unit_ms = unit_ms
        self._highest = highest_value
        self._pending = array.array("q")
        self._interval = HdrHistogram(1, highest_value, SIGNIFICANT_DIGITS)
        self._interval_sum = 0
        self._cumulative = HdrHistogram(1, highest_value, SIGNIFICANT_DIGITS)
        self._cumulative_sum = 0
        self.record: Callable[[int], None] = self._pending.append
        """``record(value)``: one sample, in the recorder's unit (values >= 0)."""
        self.on_fold: Callable[[array.array], None] | None = None
        """Called with the oldest samples (in recording order) just before they leave
        :attr:`pending` for the interval histogram."""

    @property
    def pending(self) -> array.array:
        """The samples not yet folded into the histograms, in recording order."""
        return self._pending

    def _take_pending(self, count: int) -> array.array:
        """Remove and return the oldest ``count`` samples (in place: ``record`` stays bound)."""
        samples = self._pending[:count]
        if self.on_fold is not None:
            self.on_fold(samples)
        del self._pending[:count]
        return samples

    def _fold(self, counted: Iterable[tuple[int, int]]) -> None:
        interval, highest, value_sum = self._interval, self._highest, 0
        for value, count in counted:
            value = highest if value > highest else value  # out of range would be dropped silently
            interval.record_value(value, count)
            value_sum += value * count
        self._interval_sum += value_sum

    async def fold_pending(self) -> None:
        """Fold the samples recorded so far into the current interval, a slice per event-loop
        turn (:data:`SAMPLES_PER_TURN`, :data:`VALUES_PER_TURN`), so that the interval report
        does not hold the loop; :meth:`take_interval` then has only the newest few left."""
        todo, counter = len(self._pending), collections.Counter[int]()
        while todo > 0:
            samples = self._take_pending(min(todo, SAMPLES_PER_TURN))
            todo -= len(samples)
            counter.update(samples)
            await asyncio.sleep(0)
        # no list of the (value, count) pairs: thousands of tuples alive at once would make
        # the young-generation collections that follow rescan them
        counted = iter(counter.items())  # the counter no longer changes: safe across the awaits
        for _ in range(0, len(counter), VALUES_PER_TURN):
            self._fold(itertools.islice(counted, VALUES_PER_TURN))
            await asyncio.sleep(0)

    def take_interval(self) -> LatencySummary:
        """The samples recorded since the last call (which move to the cumulative histogram)."""
        if self._pending:
            self._fold(collections.Counter(self._take_pending(len(self._pending))).items())
        interval, value_sum = self._interval, self._interval_sum
        self._cumulative.add(interval)
        self._cumulative_sum += value_sum
        summary = LatencySummary.of(interval, value_sum, self.unit_ms)
        interval.reset()
        self._interval_sum = 0
        return summary

    def cumulative(self) -> LatencySummary:
        """Every sample so far (the pending ones are folded in first, as their own interval)."""
        if self._pending or self._interval.get_total_count():
            self.take_interval()
        return LatencySummary.of(self._cumulative, self._cumulative_sum, self.unit_ms)


@dataclass(frozen=True, slots=True)
class IntervalStats:
    """One report interval: rates over it, the running total of messages, its latencies."""

    elapsed_s: float
    total_messages: int
    messages: int
    msg_per_s: float
    mbit_per_s: float
    failures_per_s: float
    acks_per_s: float
    latency: LatencySummary


class PerfStats:
    """Counters and latencies of one run. The run's tasks call :meth:`record` /
    :meth:`record_failure` / :meth:`record_ack`; the reporter calls :meth:`take_interval`."""

    def __init__(self, latency_unit_ms: float, latency_highest: int, clock: Clock = MONOTONIC):
        self.latency = LatencyRecorder(latency_unit_ms, latency_highest)
        self.intended: LatencyRecorder | None = None
        """At a fixed rate: latency from each message's intended send time (its permit's due
        time) to its receipt — corrected for coordinated omission: a sender held back by a
        stall still charges the stall to every message it should have sent meanwhile."""
        self._clock = clock
        self._latency_highest = latency_highest
        self.messages = 0
        self.bytes = 0
        self.failures = 0
        self.acks = 0
        self.ack_failures = 0
        self._marks = (0, 0, 0, 0)
        """(messages, bytes, failures, acks) at the start of the current interval."""
        self._interval_start_s = clock()

    def record(self, size_bytes: int, latency: int | None) -> None:
        """One message done; ``latency`` None: not measured (warm-up, clock skew)."""
        self.messages += 1
        self.bytes += size_bytes
        if latency is not None:
            self.latency.record(latency)

    def measure_intended(self) -> LatencyRecorder:
        """Start recording intended-time latency too (a paced run); returns its recorder."""
        if self.intended is None:
            self.intended = LatencyRecorder(self.latency.unit_ms, self._latency_highest)
        return self.intended

    def record_failure(self) -> None:
        self.failures += 1

    def record_ack(self, ok: bool = True) -> None:
        if ok:
            self.acks += 1
        else:
            self.ack_failures += 1

    def restart_interval(self) -> None:
        """Start the first interval now (when measuring starts, after set-up)."""
        self._marks = (self.messages, self.bytes, self.failures, self.acks)
        self._interval_start_s = self._clock()

    def take_interval(self) -> IntervalStats:
        now = self._clock()
        elapsed_s = now - self._interval_start_s
        messages, size_bytes, failures, acks = self._marks
        interval = IntervalStats(
            elapsed_s=elapsed_s,
            total_messages=self.messages,
            messages=self.messages - messages,
            msg_per_s=_rate(self.messages - messages, elapsed_s),
            mbit_per_s=mbit_per_s(self.bytes - size_bytes, elapsed_s),
            failures_per_s=_rate(self.failures - failures, elapsed_s),
            acks_per_s=_rate(self.acks - acks, elapsed_s),
            latency=self.latency.take_interval(),
        )
        self._marks = (self.messages, self.bytes, self.failures, self.acks)
        self._interval_start_s = now
        return interval


def _rate(count: int, elapsed_s: float) -> float:
    return count / elapsed_s if elapsed_s > 0 else 0.0
