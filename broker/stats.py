"""Broker metrics, named as Pulsar names them, collected at scrape time.

Hot paths bump plain ints on topics and consumers; this collector turns them into
``pulsar_*`` families with Pulsar's labels (cluster, namespace, topic) when /metrics is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

if TYPE_CHECKING:
    from broker.service import BrokerService

LABELS = ["cluster", "namespace", "topic"]


class BrokerCollector:
    def __init__(self, service: "BrokerService") -> None:
        self._service = service
        REGISTRY.register(self)

    def unregister(self) -> None:
        REGISTRY.unregister(self)

    def collect(self):
        cluster = self._service.config.cluster_name
        families = {
            "in_messages": CounterMetricFamily("pulsar_in_messages", "Messages published", labels=LABELS),
            "in_bytes": CounterMetricFamily("pulsar_in_bytes", "Bytes published", labels=LABELS),
            "out_messages": CounterMetricFamily("pulsar_out_messages", "Messages dispatched", labels=LABELS),
            "out_bytes": CounterMetricFamily("pulsar_out_bytes", "Bytes dispatched", labels=LABELS),
            "producers": GaugeMetricFamily("pulsar_producers_count", "Producers", labels=LABELS),
            "subscriptions": GaugeMetricFamily("pulsar_subscriptions_count", "Subscriptions", labels=LABELS),
            "consumers": GaugeMetricFamily("pulsar_consumers_count", "Consumers", labels=LABELS),
            "backlog": GaugeMetricFamily("pulsar_msg_backlog", "Entries not yet acknowledged", labels=LABELS),
        }
        topics = self._service.loaded_topics()
        for topic in topics:
            labels = [cluster, topic.name.namespace_name, str(topic.name)]
            consumers = [c for s in topic.subscriptions.values() for c in s.consumers]
            families["in_messages"].add_metric(labels, topic.counters.messages_in)
            families["in_bytes"].add_metric(labels, topic.counters.bytes_in)
            families["out_messages"].add_metric(labels, topic.counters.messages_out)
            families["out_bytes"].add_metric(labels, topic.counters.bytes_out)
            families["producers"].add_metric(labels, len(topic.counters.producers))
            families["subscriptions"].add_metric(labels, len(topic.subscriptions))
            families["consumers"].add_metric(labels, len(consumers))
            families["backlog"].add_metric(labels, sum(s.cursor.backlog_entries for s in topic.subscriptions.values()))
        yield from families.values()
        yield GaugeMetricFamily("pulsar_topics_count", "Topics loaded on this broker", value=len(topics))
        cache = self._service.cache
        yield GaugeMetricFamily("pulsar_ml_cache_used_size", "Bytes in the entry cache", value=cache.size_bytes)
        yield CounterMetricFamily("pulsar_ml_cache_hits", "Entry cache hits", value=cache.hits)
        yield CounterMetricFamily("pulsar_ml_cache_misses", "Entry cache misses", value=cache.misses)
        yield CounterMetricFamily("pulsar_ml_cache_evictions", "Entries evicted from the cache", value=cache.evictions)
