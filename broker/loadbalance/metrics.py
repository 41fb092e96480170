"""Load-balancer metrics, collected at scrape time.

Pulsar's names (labels ``cluster``, ``broker``):

- ``pulsar_lb_cpu_usage``, ``pulsar_lb_memory_usage``, ``pulsar_lb_directMemory_usage``,
  ``pulsar_lb_bandwidth_in_usage``, ``pulsar_lb_bandwidth_out_usage``: this broker's last
  report, in percent;
- ``pulsar_lb_unload_broker_total``, ``pulsar_lb_unload_bundle_total`` (+ ``reason``:
  Overloaded / Underloaded / Balanced, each exported from start), ``pulsar_lb_bundles_split_total``:
  what this broker did while it led the load manager;
- ``pulsar_lb_resource_usage{broker, feature=max|max_ema}``: every broker's weighted max usage
  and its moving average, as this broker sees them (the leader's view is the one that acts;
  the name is the extensible load manager's);
- ``pulsar_broker_load_manager_bundle_assigment`` (sic, Pulsar's spelling): placement latency.

minipulsar's own: ``pulsar_lb_leader_changes_total`` (leader changes this broker saw),
``pulsar_lb_is_leader``, ``pulsar_lb_bundles_count{broker}`` (bundles each broker reports
serving), ``pulsar_lb_unload_failures_total``; with ``exposeBundlesMetricsInPrometheus``, the
per-bundle ``pulsar_bundle_*`` families of this broker's report.

Invariant: collecting reads the load manager's last state only; it changes nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

from minipulsar.broker.loadbalance.shedding.base import BALANCED, OVERLOADED, UNDERLOADED
from minipulsar.metrics import RegisteredCollector

if TYPE_CHECKING:
    from minipulsar.broker.loadbalance.leader import LeaderElection
    from minipulsar.broker.loadbalance.load_data import LoadData
    from minipulsar.broker.loadbalance.reporter import LoadReporter
    from minipulsar.broker.loadbalance.settings import LoadBalancerSettings
    from minipulsar.broker.loadbalance.shedding.threshold import BrokerUsageHistory


@dataclass(slots=True)
class LoadBalancerCounters:
    """What the metrics report, counted since this broker started."""

    unload_broker_total: int = 0
    """Shedding cycles × brokers that lost at least one bundle in the cycle."""
    unload_bundle_total: Counter[str] = field(default_factory=Counter)
    """Bundles unloaded by shedding, by reason."""
    unload_failures: int = 0
    bundles_split_total: int = 0
    assignments: int = 0
    assignment_seconds: float = 0.0


class LoadManagerView(Protocol):
    """What the metrics read of the load manager."""

    @property
    def broker_id(self) -> str: ...

    @property
    def is_leader(self) -> bool: ...

    @property
    def counters(self) -> LoadBalancerCounters: ...

    @property
    def election(self) -> LeaderElection: ...

    @property
    def reporter(self) -> LoadReporter: ...

    @property
    def load_data(self) -> LoadData: ...

    @property
    def settings(self) -> LoadBalancerSettings: ...

    @property
    def usage_history(self) -> BrokerUsageHistory: ...


_USAGE_FAMILIES = [
    ("cpu", "pulsar_lb_cpu_usage", "CPU usage of the broker (percent)"),
    ("memory", "pulsar_lb_memory_usage", "Memory usage of the broker (percent)"),
    ("direct_memory", "pulsar_lb_directMemory_usage", "Direct memory usage of the broker (percent)"),
    ("bandwidth_in", "pulsar_lb_bandwidth_in_usage", "Inbound bandwidth usage of the broker (percent)"),
    ("bandwidth_out", "pulsar_lb_bandwidth_out_usage", "Outbound bandwidth usage of the broker (percent)"),
]
_BUNDLE_FAMILIES = [
    ("msg_rate_in", "pulsar_bundle_msg_rate_in", "Messages published per second"),
    ("msg_rate_out", "pulsar_bundle_msg_rate_out", "Messages dispatched per second"),
    ("msg_throughput_in", "pulsar_bundle_msg_throughput_in", "Bytes published per second"),
    ("msg_throughput_out", "pulsar_bundle_msg_throughput_out", "Bytes dispatched per second"),
    ("topics", "pulsar_bundle_topics_count", "Topics loaded"),
    ("consumer_count", "pulsar_bundle_consumer_count", "Consumers"),
    ("producer_count", "pulsar_bundle_producer_count", "Producers"),
]


_NO_UNLOADS = dict.fromkeys((OVERLOADED, UNDERLOADED, BALANCED), 0)
"""Every shedding reason at 0: each series exists before the first unload."""


class LoadBalancerCollector(RegisteredCollector):
    def __init__(self, manager: LoadManagerView, cluster: str, expose_bundles: bool = False) -> None:
        self._manager = manager
        self._cluster = cluster
        self._expose_bundles = expose_bundles
        super().__init__()

    def collect(self):
        manager, cluster = self._manager, self._cluster
        me = manager.broker_id
        yield from self._usage(cluster, me)
        counters = manager.counters
        labels = ["cluster"]
        yield _counter(
            "pulsar_lb_unload_broker_total",
            "Brokers that lost bundles, per shedding cycle",
            labels,
            [([cluster], counters.unload_broker_total)],
        )
        yield _counter(
            "pulsar_lb_unload_bundle_total",
            "Bundles unloaded by load shedding",
            [*labels, "reason"],
            [([cluster, reason], n) for reason, n in sorted({**_NO_UNLOADS, **counters.unload_bundle_total}.items())],
        )
        yield _counter(
            "pulsar_lb_unload_failures",
            "Unloads the shedder asked for that failed",
            labels,
            [([cluster], counters.unload_failures)],
        )
        yield _counter(
            "pulsar_lb_bundles_split_total",
            "Bundles split by the load manager",
            labels,
            [([cluster], counters.bundles_split_total)],
        )
        yield _counter(
            "pulsar_lb_leader_changes",
            "Changes of load-manager leader seen by this broker",
            labels,
            [([cluster], manager.election.leader_changes)],
        )
        yield _gauge(
            "pulsar_lb_is_leader",
            "1 when this broker leads the load manager",
            [*labels, "broker"],
            [([cluster, me], int(manager.is_leader))],
        )
        yield from self._cluster_view(cluster)
        summary = SummaryMetricFamily(
            "pulsar_broker_load_manager_bundle_assigment",
            "Time to choose a broker for a bundle (seconds)",
            labels=labels,
        )
        summary.add_metric([cluster], count_value=counters.assignments, sum_value=counters.assignment_seconds)
        yield summary
        if self._expose_bundles:
            yield from self._bundles(cluster, me)

    def _usage(self, cluster: str, me: str):
        report = self._manager.reporter.current
        if report is None:
            return
        for attribute, name, text in _USAGE_FAMILIES:
            yield _gauge(
                name, text, ["cluster", "broker"], [([cluster, me], getattr(report.usage, attribute).percent_usage)]
            )

    def _cluster_view(self, cluster: str):
        manager = self._manager
        brokers = manager.load_data.brokers
        weights = manager.settings.weights
        usage = GaugeMetricFamily(
            "pulsar_lb_resource_usage",
            "Weighted max resource usage (fraction) by broker",
            labels=["cluster", "broker", "feature"],
        )
        counts = GaugeMetricFamily(
            "pulsar_lb_bundles_count", "Bundles each broker reports serving", labels=["cluster", "broker"]
        )
        for broker, data in sorted(brokers.items()):
            usage.add_metric([cluster, broker, "max"], data.local.max_resource_usage_with_weight(weights))
            ema = manager.usage_history.averages.get(broker)
            if ema is not None:
                usage.add_metric([cluster, broker, "max_ema"], ema)
            counts.add_metric([cluster, broker], len(data.local.bundles))
        yield usage
        yield counts

    def _bundles(self, cluster: str, me: str):
        report = self._manager.reporter.current
        if report is None:
            return
        families = {
            key: GaugeMetricFamily(name, text, labels=["cluster", "broker", "bundle"])
            for key, name, text in _BUNDLE_FAMILIES
        }
        for bundle, stats in sorted(report.last_stats.items()):
            for key, family in families.items():
                family.add_metric([cluster, me, bundle], getattr(stats, key))
        yield from families.values()


def _gauge(name: str, text: str, labels: list[str], samples: list[tuple[list[str], float]]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, text, labels=labels)
    for values, value in samples:
        family.add_metric(values, value)
    return family


def _counter(name: str, text: str, labels: list[str], samples: list[tuple[list[str], float]]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, text, labels=labels)
    for values, value in samples:
        family.add_metric(values, value)
    return family
