"""Lookup, ownership and topic-load metrics with Pulsar's names, read at scrape time.

- ``pulsar_broker_bundles_count``: bundles this broker owns (the per-broker bundle count);
- ``pulsar_broker_lookup_answers_total`` / ``…_redirects_total`` / ``…_failures_total``: lookups answered
  connect / redirect / failed;
- ``pulsar_broker_lookup`` (summary, seconds): how long lookups took; ``…_lookup_pending_requests``;
- ``pulsar_broker_topic_load_pending_requests``, ``pulsar_topic_load_times`` (summary, milliseconds);
- ``pulsar_broker_bundle_unloads_total`` / ``pulsar_broker_bundle_splits_total``: unloads and splits
  this broker carried out (whoever asked: admin, load manager, shutdown).

Invariant: every counter only grows; collecting changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

from minipulsar.metrics import RegisteredCollector


@dataclass(slots=True)
class NamespaceMetrics:
    """Plain counters bumped by the namespace service and the broker's topic loader."""

    lookup_answers: int = 0
    lookup_redirects: int = 0
    lookup_failures: int = 0
    lookup_pending: int = 0
    lookup_count: int = 0
    lookup_seconds: float = 0.0
    topic_load_pending: int = 0
    topic_load_count: int = 0
    topic_load_ms: float = 0.0
    unloads: int = 0
    splits: int = 0

    def lookup_done(self, kind: str, elapsed_s: float) -> None:
        if kind == "connect":
            self.lookup_answers += 1
        elif kind == "redirect":
            self.lookup_redirects += 1
        else:
            self.lookup_failures += 1
        self.lookup_count += 1
        self.lookup_seconds += elapsed_s

    def topic_loaded(self, elapsed_ms: float) -> None:
        self.topic_load_count += 1
        self.topic_load_ms += elapsed_ms


class NamespaceCollector(RegisteredCollector):
    def __init__(self, cluster: str, metrics: NamespaceMetrics, owned_bundles) -> None:
        self._cluster = cluster
        self._metrics = metrics
        self._owned_bundles = owned_bundles
        """() -> int: bundles owned now."""
        super().__init__()

    def collect(self):
        m, labels = self._metrics, [self._cluster]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, doc, labels=["cluster"])
            family.add_metric(labels, value)
            return family

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            family = CounterMetricFamily(name, doc, labels=["cluster"])
            family.add_metric(labels, value)
            return family

        def summary(name: str, doc: str, count: int, total: float) -> SummaryMetricFamily:
            family = SummaryMetricFamily(name, doc, labels=["cluster"])
            family.add_metric(labels, count_value=count, sum_value=total)
            return family

        yield gauge("pulsar_broker_bundles_count", "Namespace bundles this broker owns", self._owned_bundles())
        yield counter("pulsar_broker_lookup_answers", "Lookups answered connect", m.lookup_answers)
        yield counter("pulsar_broker_lookup_redirects", "Lookups answered redirect", m.lookup_redirects)
        yield counter("pulsar_broker_lookup_failures", "Lookups answered failed", m.lookup_failures)
        yield summary("pulsar_broker_lookup", "Lookup latency (seconds)", m.lookup_count, m.lookup_seconds)
        yield gauge("pulsar_broker_lookup_pending_requests", "Lookups in progress", m.lookup_pending)
        yield gauge("pulsar_broker_topic_load_pending_requests", "Topic loads in progress", m.topic_load_pending)
        yield summary("pulsar_topic_load_times", "Topic load time (milliseconds)", m.topic_load_count, m.topic_load_ms)
        yield counter("pulsar_broker_bundle_unloads", "Bundles this broker unloaded", m.unloads)
        yield counter("pulsar_broker_bundle_splits", "Bundles this broker split", m.splits)
