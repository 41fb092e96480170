"""The BookKeeper client's metrics, under the names a Pulsar broker exports them
(``pulsar_managedLedger_client_`` + BookKeeper's stat names).

BookKeeper's counters carry no ``_total`` suffix; prometheus-client would add one to a
Counter, so counters whose exact name operators query are monotonically increasing Gauges.
Latencies are histograms in milliseconds (BookKeeper exports summaries; p99 is derivable with
``histogram_quantile``). Metric objects are process-wide: one broker per process.

Invariant: every metric here only grows, except the gauges of what is pending or quarantined now.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import REGISTRY, Gauge, Histogram
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

PREFIX = "pulsar_managedLedger_client_bookkeeper_client_"
LATENCY_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class _Observed:
    """One label value's buckets (not cumulative; the last one is +Inf) and sum."""

    __slots__ = ("_bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self._bounds, value)] += 1
        self.total += value


class LoopHistogram(Collector):
    """A histogram with one label (``success`` unless ``label`` says), exported exactly as
    prometheus-client's ``Histogram`` (``_bucket`` with ``le``, ``_count``, ``_sum``) but
    observed without a lock or a value object per bucket: one ``bisect`` and two additions.
    For a hot path with a single writer, the event loop (an ADD per entry); a scrape reads the
    counts as they are."""

    def __init__(
        self,
        name: str,
        documentation: str,
        buckets: tuple[float, ...],
        registry: CollectorRegistry = REGISTRY,
        label: str = "success",
    ) -> None:
        self._name, self._documentation, self._label = name, documentation, label
        self._bounds = tuple(float(b) for b in buckets)
        self._children: dict[str, _Observed] = {}
        registry.register(self)

    def labels(self, value: str) -> _Observed:
        """The child for this label value (created on first use: it is exported from then on)."""
        child = self._children.get(value)
        if child is None:
            child = self._children[value] = _Observed(self._bounds)
        return child

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=[self._label])
        edges = [*(floatToGoString(b) for b in self._bounds), "+Inf"]
        for value, child in list(self._children.items()):
            cumulative, buckets = 0, []
            for edge, count in zip(edges, list(child.counts), strict=True):
                cumulative += count
                buckets.append((edge, float(cumulative)))
            family.add_metric([value], buckets, child.total)
        yield family


ADD_ENTRY = LoopHistogram(
    PREFIX + "ADD_ENTRY", "Add latency: from add() to its completion (ms)", buckets=LATENCY_BUCKETS_MS
)
READ_ENTRY = Histogram(
    PREFIX + "READ_ENTRY", "Read latency of one range read (ms)", ["success"], buckets=LATENCY_BUCKETS_MS
)
LEDGER_RECOVER = Histogram(
    PREFIX + "LEDGER_RECOVER",
    "Duration of ledger recoveries (ms); _count is the number",
    ["success"],
    buckets=LATENCY_BUCKETS_MS,
)
NUM_ENSEMBLE_CHANGE = Gauge(PREFIX + "NUM_ENSEMBLE_CHANGE", "Ensemble changes made by this client (counter)")
SPECULATIVE_READ_COUNT = Gauge(
    PREFIX + "SPECULATIVE_READ_COUNT", "Reads also sent to another replica after speculativeReadTimeout (counter)"
)
READ_ENTRY_DM = Gauge(
    PREFIX + "READ_ENTRY_DM",
    "Entries read whose bytes did not match their digest; the read went to another replica (counter)",
)
BOOKIE_QUARANTINE = Gauge(PREFIX + "BOOKIE_QUARANTINE", "Faulty bookies quarantined (counter)")
BOOKIE_QUARANTINE_SKIP = Gauge(
    PREFIX + "BOOKIE_QUARANTINE_SKIP",
    "Faulty bookies not quarantined because of bookkeeperClientQuarantineRatio (counter)",
)
QUARANTINED_BOOKIES = Gauge(PREFIX + "QUARANTINED_BOOKIES", "Bookies in quarantine now")
NUM_PENDING_ADD = Gauge(PREFIX + "NUM_PENDING_ADD", "Adds not yet completed, all ledgers")
PENDING_ADD_BYTES = Gauge(
    PREFIX + "PENDING_ADD_BYTES", "Add payload bytes not yet answered by every replica, all ledgers"
)
BOOKIE_PENDING_REQUESTS = Gauge(
    PREFIX + "BOOKIE_PENDING_REQUESTS",
    "Requests (adds, reads, fences) awaiting the bookie's answer: the per-bookie request queue as this broker sees it",
    ["bookie"],
)
