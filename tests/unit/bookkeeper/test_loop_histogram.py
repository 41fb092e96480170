"""Goal: the lock-free ADD latency histogram exports exactly what prometheus-client's Histogram
exports for the same observations (names, ``le`` labels, cumulative counts, sums), so
dashboards and ``histogram_quantile`` read it alike.

Method: the same values into both, each on its own registry; compare their samples."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram

from minipulsar.bookkeeper.metrics import LATENCY_BUCKETS_MS, LoopHistogram

VALUES = [0.0, 0.5, 0.50001, 1, 3, 25, 99.9, 30000, 30001, 1e9]


def samples(registry: CollectorRegistry) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    return {
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for family in registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")
    }


def test_it_exports_what_a_prometheus_histogram_exports() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    loop = LoopHistogram("x_ADD_ENTRY", "doc", LATENCY_BUCKETS_MS, registry=ours)
    reference = Histogram("x_ADD_ENTRY", "doc", ["success"], buckets=LATENCY_BUCKETS_MS, registry=theirs)
    for value in VALUES:
        loop.labels("true").observe(value)
        reference.labels("true").observe(value)
    loop.labels("false").observe(7)
    reference.labels("false").observe(7)
    assert samples(ours) == samples(theirs)
