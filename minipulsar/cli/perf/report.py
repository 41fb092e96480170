"""pulsar-perf's output lines, and :class:`PerfResult` — the same figures as data and JSON.

The lines copy pulsar-perf's text layout (``PerformanceProducer`` / ``PerformanceConsumer`` /
``ManagedLedgerWriter``) field for field, so that scripts reading pulsar-perf output read
ours: produce and managed-ledger print latencies in ms with three decimals (recorded in µs);
consume prints the end-to-end latency's percentiles in whole ms, as it records them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from minipulsar.cli.perf.stats import IntervalStats, LatencySummary
from minipulsar.cli.perf.timeline import Bucket

PRODUCE, CONSUME, MANAGED_LEDGER = "produce", "consume", "managed-ledger"
MODES = (PRODUCE, CONSUME, MANAGED_LEDGER)
LATENCY_KINDS = {PRODUCE: "publish", CONSUME: "end-to-end", MANAGED_LEDGER: "add-entry"}
"""What the latency measures: send → broker receipt; publish time → receive; add → Qa bookies."""


def _ms3(latency: LatencySummary, with_99999: bool = False) -> str:
    """Latency in ms with three decimals (produce, managed-ledger)."""
    head = (
        f"Latency: mean: {latency.mean_ms:7.3f} ms - med: {latency.p50_ms:7.3f}"
        f" - 95pct: {latency.p95_ms:7.3f} - 99pct: {latency.p99_ms:7.3f}"
        f" - 99.9pct: {latency.p999_ms:7.3f} - 99.99pct: {latency.p9999_ms:7.3f}"
    )
    tail = f" - 99.999pct: {latency.p99999_ms:7.3f}" if with_99999 else ""
    return f"{head}{tail} - Max: {latency.max_ms:7.3f}"


def _ms_whole(latency: LatencySummary, with_99999: bool = False) -> str:
    """Latency with a 3-decimal mean and whole-ms percentiles (consume)."""
    head = (
        f"Latency: mean: {latency.mean_ms:.3f} ms - med: {latency.p50_ms:.0f}"
        f" - 95pct: {latency.p95_ms:.0f} - 99pct: {latency.p99_ms:.0f}"
        f" - 99.9pct: {latency.p999_ms:.0f} - 99.99pct: {latency.p9999_ms:.0f}"
    )
    tail = f" - 99.999pct: {latency.p99999_ms:.0f}" if with_99999 else ""
    return f"{head}{tail} - Max: {latency.max_ms:.0f}"


def interval_line(mode: str, interval: IntervalStats) -> str:
    """The periodic line of ``mode``."""
    if mode == CONSUME:
        return (
            f"Throughput received: {interval.total_messages:7d} msg --- {interval.msg_per_s:.3f} msg/s"
            f" --- {interval.mbit_per_s:.3f} Mbit/s --- {_ms_whole(interval.latency)}"
        )
    head = (
        f"Throughput produced: {interval.total_messages:7d} msg --- {interval.msg_per_s:8.1f} msg/s"
        f" --- {interval.mbit_per_s:8.1f} Mbit/s"
    )
    if mode == PRODUCE:
        head += f" --- failure {interval.failures_per_s:8.1f} msg/s"
    return f"{head} --- {_ms3(interval.latency)}"


@dataclass
class PerfResult:
    """One run's figures: what the aggregate lines print, plus every interval.

    ``duration_s`` runs from the start of measuring (producers/consumers/ledgers ready) to
    the end (sends drained, or the consumers stopped); ``msg_per_s`` and ``mbit_per_s`` are
    over it. ``latency`` is cumulative over the run, in ms (publish latency leaves out the
    warm-up). ``error`` is set when the run ended on an error (the figures up to it stand).
    """

    mode: str
    messages: int = 0
    bytes: int = 0
    failures: int = 0
    duration_s: float = 0.0
    msg_per_s: float = 0.0
    mbit_per_s: float = 0.0
    mb_per_s: float = 0.0
    """Decimal megabytes per second (10^6 B/s), for comparison with disk figures."""
    latency: LatencySummary = field(default_factory=LatencySummary)
    intended_latency: LatencySummary | None = None
    """Produce at a fixed rate: latency from each message's intended send time, corrected for
    coordinated omission (None: not paced). ``latency`` is pulsar-perf's, from the send call."""
    acks: int = 0
    ack_failures: int = 0
    ack_per_s: float = 0.0
    interrupted: bool = False
    error: str | None = None
    targets: list[str] = field(default_factory=list)
    """Topics (produce, consume) or ledger ids (managed-ledger)."""
    options: dict[str, Any] = field(default_factory=dict)
    intervals: list[IntervalStats] = field(default_factory=list)
    timeline: list[Bucket] = field(default_factory=list)
    """Latency per bucket of receipt time, when asked for (``timeline_s``)."""

    @property
    def latency_kind(self) -> str:
        return LATENCY_KINDS[self.mode]

    def aggregate_lines(self) -> list[str]:
        """pulsar-perf's two closing lines (produce at a fixed rate: and the intended-time latency)."""
        if self.mode == CONSUME:
            return [
                f"Aggregated throughput stats --- {self.messages} records received --- {self.msg_per_s:.3f} msg/s"
                f" --- {self.mbit_per_s:.3f} Mbit/s --- AckRate: {self.ack_per_s:.1f} msg/s"
                f" --- ack failed {self.ack_failures} msg",
                f"Aggregated latency stats --- {_ms_whole(self.latency, with_99999=True)}",
            ]
        lines = [
            f"Aggregated throughput stats --- {self.messages} records sent --- {self.msg_per_s:.3f} msg/s"
            f" --- {self.mbit_per_s:.3f} Mbit/s",
            f"Aggregated latency stats --- {_ms3(self.latency, with_99999=True)}",
        ]
        if self.intended_latency is not None:
            lines.append(
                "Aggregated intended-time latency stats (coordinated omission corrected) --- "
                + _ms3(self.intended_latency, with_99999=True)
            )
        return lines

    def to_json(self) -> dict[str, Any]:
        """Plain data: every field, ``latency_kind``, intervals as objects (all latencies in ms)."""
        data = asdict(self)
        data["latency_kind"] = self.latency_kind
        return data

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n"
