"""Broker metrics, named as Pulsar names them, collected at scrape time.

Hot paths bump plain ints on topics, producers and consumers; the stats timer turns them into
rates every ``statsUpdateFrequencyInSecs``; this collector reads both when /metrics is
scraped and yields Pulsar's families:

- per topic (labels cluster, namespace, topic): ``pulsar_in_messages_total``,
  ``pulsar_in_bytes_total``, ``pulsar_out_messages_total``, ``pulsar_out_bytes_total``,
  ``pulsar_rate_in``/``_out`` (msg/s), ``pulsar_throughput_in``/``_out`` (B/s),
  ``pulsar_storage_size``, ``pulsar_storage_backlog_size``, ``pulsar_msg_backlog``, producer /
  subscription / consumer counts; for persistent topics Pulsar's storage write latency
  buckets of the last stats interval, ``pulsar_storage_write_latency_le_0_5`` … ``_le_1000``,
  ``_le_overflow``, ``_count`` and ``_sum`` (ms: add_entry → durable;
  :mod:`broker.managed_ledger.stats_buckets`);
- per subscription (+ ``subscription``): ``pulsar_subscription_back_log``,
  ``…_unacked_messages``, ``…_msg_rate_out`` (the dispatch rate), ``…_msg_throughput_out``,
  ``…_msg_rate_redeliver``, ``…_blocked_on_unacked_messages``, ``…_msg_drop_rate``;
- per consumer (+ ``consumer_name``, ``consumer_id``): ``pulsar_consumer_available_permits``,
  ``…_unacked_messages``, ``…_msg_rate_out``, ``…_blocked_on_unacked_messages``;
- broker (label cluster): ``pulsar_broker_rate_in``/``_out``, ``pulsar_broker_throughput_in``/
  ``_out``, ``pulsar_broker_msg_backlog``, ``pulsar_broker_storage_size``, the entry cache
  (``pulsar_ml_cache_used_size``, ``…_hits_rate``, ``…_misses_rate``, ``…_evictions``,
  ``…_inserted``), publish throttling (``pulsar_broker_publish_buffer_usage`` and
  ``…_max_usage`` as in PIP-410, ``…_publish_buffer_limit``,
  ``pulsar_broker_throttled_connections``, ``…_throttled_connections_global_limit``) and
  minipulsar's pause counters ``pulsar_broker_publish_buffer_pauses_total`` (the broker-wide
  limit paused every producer connection) and ``pulsar_broker_connection_pauses_total`` (one
  connection hit ``maxPendingPublishRequestsPerConnection``), and ``pulsar_broker_publish_latency``
  (summary, ms: SEND read → SEND_RECEIPT written; quantiles of the last stats interval,
  :mod:`broker.publish_latency`);
- client connections (labels cluster, protocol: ``minipulsar`` or ``pulsar``):
  ``pulsar_active_connections``, ``pulsar_connection_created_total_count``,
  ``pulsar_connection_closed_total_count`` (:mod:`broker.connection_counts`).

Invariant: collecting reads counters and the last rates only; it changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from minipulsar.broker.connection_counts import PROTOCOLS, ConnectionCounts
from minipulsar.broker.managed_ledger.entry_cache import EntryCache
from minipulsar.broker.managed_ledger.stats_buckets import WRITE_LATENCY_BUCKETS_MS, StatsBuckets, bucket_metric_names
from minipulsar.broker.publish_buffer import PublishBuffer
from minipulsar.broker.publish_latency import LatencyWindow, summary_metric
from minipulsar.broker.throttling import ConnectionThrottling
from minipulsar.broker.topics.base import Subscription, Topic
from minipulsar.broker.topics.registry import LoadedTopics
from minipulsar.broker.topics.topic_stats import backlog_entries, backlog_size, storage_size
from minipulsar.metrics import RegisteredCollector

Family = CounterMetricFamily | GaugeMetricFamily

LABELS = ["cluster", "namespace", "topic"]
SUBSCRIPTION_LABELS = [*LABELS, "subscription"]
CONSUMER_LABELS = [*SUBSCRIPTION_LABELS, "consumer_name", "consumer_id"]

_TOPIC_FAMILIES = [
    ("in_messages", CounterMetricFamily, "pulsar_in_messages", "Messages published"),
    ("in_bytes", CounterMetricFamily, "pulsar_in_bytes", "Bytes published"),
    ("out_messages", CounterMetricFamily, "pulsar_out_messages", "Messages dispatched"),
    ("out_bytes", CounterMetricFamily, "pulsar_out_bytes", "Bytes dispatched"),
    ("rate_in", GaugeMetricFamily, "pulsar_rate_in", "Messages published per second"),
    ("rate_out", GaugeMetricFamily, "pulsar_rate_out", "Messages dispatched per second"),
    ("throughput_in", GaugeMetricFamily, "pulsar_throughput_in", "Bytes published per second"),
    ("throughput_out", GaugeMetricFamily, "pulsar_throughput_out", "Bytes dispatched per second"),
    ("storage", GaugeMetricFamily, "pulsar_storage_size", "Bytes stored in the topic's ledgers"),
    ("backlog_size", GaugeMetricFamily, "pulsar_storage_backlog_size", "Estimated bytes of the largest backlog"),
    ("backlog", GaugeMetricFamily, "pulsar_msg_backlog", "Entries not yet acknowledged, all subscriptions"),
    ("producers", GaugeMetricFamily, "pulsar_producers_count", "Producers"),
    ("subscriptions", GaugeMetricFamily, "pulsar_subscriptions_count", "Subscriptions"),
    ("consumers", GaugeMetricFamily, "pulsar_consumers_count", "Consumers"),
]
_WRITE_LATENCY = "pulsar_storage_write_latency"
_WRITE_LATENCY_BUCKETS = bucket_metric_names(_WRITE_LATENCY, WRITE_LATENCY_BUCKETS_MS)
_WRITE_LATENCY_RANGES = (
    *(f"<= {bound:g} ms" for bound in WRITE_LATENCY_BUCKETS_MS),
    f"> {WRITE_LATENCY_BUCKETS_MS[-1]:g} ms",
)
_WRITE_LATENCY_FAMILIES = [
    *(
        (name, f"Adds of the last stats interval that took {latency} from add_entry to durable")
        for name, latency in zip(_WRITE_LATENCY_BUCKETS, _WRITE_LATENCY_RANGES, strict=True)
    ),
    (f"{_WRITE_LATENCY}_count", "Adds completed in the last stats interval"),
    (f"{_WRITE_LATENCY}_sum", "Write latency summed over the last stats interval's adds (ms)"),
]
_SUBSCRIPTION_FAMILIES = [
    ("back_log", "pulsar_subscription_back_log", "Entries not yet acknowledged"),
    ("unacked", "pulsar_subscription_unacked_messages", "Messages delivered and not acknowledged"),
    ("rate_out", "pulsar_subscription_msg_rate_out", "Messages dispatched per second"),
    ("throughput_out", "pulsar_subscription_msg_throughput_out", "Bytes dispatched per second"),
    ("rate_redeliver", "pulsar_subscription_msg_rate_redeliver", "Messages redelivered per second"),
    ("blocked", "pulsar_subscription_blocked_on_unacked_messages", "1 when dispatch is blocked on unacked messages"),
    ("drop_rate", "pulsar_subscription_msg_drop_rate", "Messages dropped per second (non-persistent)"),
]
_CONSUMER_FAMILIES = [
    ("permits", "pulsar_consumer_available_permits", "Permits (messages) the consumer granted"),
    ("unacked", "pulsar_consumer_unacked_messages", "Messages delivered and not acknowledged"),
    ("rate_out", "pulsar_consumer_msg_rate_out", "Messages dispatched per second"),
    ("blocked", "pulsar_consumer_blocked_on_unacked_messages", "1 when blocked on unacked messages"),
]


class BrokerCollector(RegisteredCollector):
    def __init__(
        self,
        cluster_name: str,
        topics: LoadedTopics,
        cache: EntryCache,
        publish_buffer: PublishBuffer,
        throttling: ConnectionThrottling,
        publish_latency: LatencyWindow,
        connection_counts: ConnectionCounts,
    ) -> None:
        self._cluster_name = cluster_name
        self._connection_counts = connection_counts
        self._topics = topics
        self._cache = cache
        self._publish_buffer = publish_buffer
        self._throttling = throttling
        self._publish_latency = publish_latency
        super().__init__()

    def collect(self) -> Iterator[Metric]:
        cluster = self._cluster_name
        topics = self._topics.loaded_topics()
        families = {key: kind(name, text, labels=LABELS) for key, kind, name, text in _TOPIC_FAMILIES}
        subscriptions = {
            key: GaugeMetricFamily(name, text, labels=SUBSCRIPTION_LABELS) for key, name, text in _SUBSCRIPTION_FAMILIES
        }
        consumers = {
            key: GaugeMetricFamily(name, text, labels=CONSUMER_LABELS) for key, name, text in _CONSUMER_FAMILIES
        }
        write_latency = [GaugeMetricFamily(name, text, labels=LABELS) for name, text in _WRITE_LATENCY_FAMILIES]
        for topic in topics:
            labels = [cluster, topic.name.namespace_name, str(topic.name)]
            self._topic(topic, labels, families)
            if topic.ledger is not None:
                _write_latency(topic.ledger.write_latency, labels, write_latency)
            for subscription in topic.subscriptions.values():
                self._subscription(topic, subscription, labels, subscriptions, consumers)
        yield from families.values()
        yield from write_latency
        yield from subscriptions.values()
        yield from consumers.values()
        yield from self._broker(cluster, topics, families)

    def _topic(self, topic: Topic, labels: list[str], families: dict[str, Family]) -> None:
        counters, rates = topic.counters, topic.rates
        subscriptions = topic.subscriptions.values()
        backlog = backlog_entries(topic)
        families["in_messages"].add_metric(labels, counters.messages_in)
        families["in_bytes"].add_metric(labels, counters.bytes_in)
        families["out_messages"].add_metric(labels, counters.messages_out)
        families["out_bytes"].add_metric(labels, counters.bytes_out)
        families["rate_in"].add_metric(labels, rates.get(topic, "msgIn"))
        families["rate_out"].add_metric(labels, rates.get(topic, "msgOut"))
        families["throughput_in"].add_metric(labels, rates.get(topic, "bytesIn"))
        families["throughput_out"].add_metric(labels, rates.get(topic, "bytesOut"))
        families["storage"].add_metric(labels, storage_size(topic))
        families["backlog_size"].add_metric(labels, backlog_size(topic))
        families["backlog"].add_metric(labels, backlog)
        families["producers"].add_metric(labels, len(counters.producers))
        families["subscriptions"].add_metric(labels, len(topic.subscriptions))
        families["consumers"].add_metric(labels, sum(len(s.consumers) for s in subscriptions))

    def _subscription(
        self,
        topic: Topic,
        subscription: Subscription,
        labels: list[str],
        families: dict[str, GaugeMetricFamily],
        consumer_families: dict[str, GaugeMetricFamily],
    ) -> None:
        rates = topic.rates
        sub_labels = [*labels, subscription.name]
        cursor = subscription.cursor
        consumers = subscription.consumers
        families["back_log"].add_metric(sub_labels, cursor.backlog_entries if cursor is not None else 0)
        families["unacked"].add_metric(sub_labels, sum(c.unacked_messages for c in consumers))
        families["rate_out"].add_metric(sub_labels, sum(rates.get(c, "msgOut") for c in consumers))
        families["throughput_out"].add_metric(sub_labels, sum(rates.get(c, "bytesOut") for c in consumers))
        families["rate_redeliver"].add_metric(sub_labels, rates.get(subscription, "redeliver"))
        families["blocked"].add_metric(sub_labels, int(subscription.blocked_on_unacked))
        families["drop_rate"].add_metric(sub_labels, rates.get(subscription, "drop"))
        for consumer in consumers:
            consumer_labels = [*sub_labels, consumer.name, str(consumer.consumer_id)]
            consumer_families["permits"].add_metric(consumer_labels, consumer.permits)
            consumer_families["unacked"].add_metric(consumer_labels, consumer.unacked_messages)
            consumer_families["rate_out"].add_metric(consumer_labels, rates.get(consumer, "msgOut"))
            consumer_families["blocked"].add_metric(consumer_labels, int(consumer.blocked_on_unacked))

    def _broker(self, cluster: str, topics: list[Topic], families: dict[str, Family]) -> Iterator[Metric]:
        labels = ["cluster"]

        def gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, text, labels=labels)
            family.add_metric([cluster], value)
            return family

        def counter(name: str, text: str, value: float) -> CounterMetricFamily:
            family = CounterMetricFamily(name, text, labels=labels)
            family.add_metric([cluster], value)
            return family

        def total(key: str) -> float:
            return sum(sample.value for sample in families[key].samples)

        yield gauge("pulsar_topics_count", "Topics loaded on this broker", len(topics))
        yield gauge("pulsar_broker_rate_in", "Messages published per second", total("rate_in"))
        yield gauge("pulsar_broker_rate_out", "Messages dispatched per second", total("rate_out"))
        yield gauge("pulsar_broker_throughput_in", "Bytes published per second", total("throughput_in"))
        yield gauge("pulsar_broker_throughput_out", "Bytes dispatched per second", total("throughput_out"))
        yield gauge("pulsar_broker_msg_backlog", "Entries not yet acknowledged", total("backlog"))
        yield gauge("pulsar_broker_storage_size", "Bytes stored", total("storage"))
        cache = self._cache
        yield gauge("pulsar_ml_cache_used_size", "Bytes in the entry cache", cache.size_bytes)
        yield gauge("pulsar_ml_cache_hits_rate", "Entry cache hits per second", cache.hits_rate)
        yield gauge("pulsar_ml_cache_misses_rate", "Entry cache misses per second", cache.misses_rate)
        yield counter("pulsar_ml_cache_hits", "Entry cache hits", cache.hits)
        yield counter("pulsar_ml_cache_misses", "Entry cache misses", cache.misses)
        yield counter("pulsar_ml_cache_evictions", "Entries evicted from the cache", cache.evictions)
        yield counter("pulsar_ml_cache_inserted", "Entries inserted in the cache", cache.inserted)
        buffer = self._publish_buffer
        yield gauge("pulsar_broker_publish_buffer_usage", "Bytes of publishes not yet persisted", buffer.size_bytes)
        yield gauge(
            "pulsar_broker_publish_buffer_max_usage", "Highest publish buffer usage since start", buffer.max_usage_bytes
        )
        yield gauge(
            "pulsar_broker_publish_buffer_limit", "maxMessagePublishBufferSizeInMB in bytes (-1: off)", buffer.max_bytes
        )
        yield gauge(
            "pulsar_broker_throttled_connections",
            "Connections not read now (either publish limit)",
            self._throttling.throttled_connections,
        )
        yield gauge(
            "pulsar_broker_throttled_connections_global_limit",
            "Connections paused by the broker-wide publish buffer",
            buffer.throttled_connections,
        )
        yield counter(
            "pulsar_broker_publish_buffer_pauses",
            "Times the publish buffer paused every producer connection",
            buffer.pauses,
        )
        yield counter(
            "pulsar_broker_connection_pauses",
            "Times a connection reached maxPendingPublishRequestsPerConnection",
            self._throttling.connection_pauses,
        )
        yield from self._connections(cluster)
        yield summary_metric(
            "pulsar_broker_publish_latency",
            "SEND read to SEND_RECEIPT written (ms); quantiles of the last stats interval",
            cluster,
            self._publish_latency,
        )

    def _connections(self, cluster: str) -> Iterator[Metric]:
        counts = self._connection_counts
        families = [
            ("pulsar_active_connections", "Client connections open now", counts.active),
            ("pulsar_connection_created_total_count", "Client connections opened", counts.created.__getitem__),
            ("pulsar_connection_closed_total_count", "Client connections closed", counts.closed.__getitem__),
        ]
        for name, text, value in families:
            family = GaugeMetricFamily(name, text, labels=["cluster", "protocol"])
            for protocol in PROTOCOLS:
                family.add_metric([cluster, protocol], value(protocol))
            yield family


def _write_latency(buckets: StatsBuckets, labels: list[str], families: list[GaugeMetricFamily]) -> None:
    """One topic's samples of :data:`_WRITE_LATENCY_FAMILIES`, in their order."""
    values = (*buckets.buckets, buckets.count, buckets.sum)
    for family, value in zip(families, values, strict=True):
        family.add_metric(labels, value)
