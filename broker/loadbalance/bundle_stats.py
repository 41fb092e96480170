"""Per-bundle stats of a broker (its report's ``lastStats``): its loaded topics, grouped by bundle.

Invariants:

- a topic counts in the owned bundle whose range holds its hash (``bundle_of_loaded`` of the
  namespace service), and in no bundle while that one is being unloaded;
- rates are the topics' last ``statsUpdateFrequencyInSecs`` sample (:mod:`broker.topics.rates`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Protocol

from minipulsar.broker.loadbalance.load_report import NamespaceBundleStats
from minipulsar.broker.namespace.bundles import NamespaceBundle
from minipulsar.broker.topics.base import Topic
from minipulsar.topic_name import TopicName


class OwnedBundles(Protocol):
    """The bundles this broker serves (the namespace service)."""

    def bundle_of_loaded(self, topic: TopicName) -> NamespaceBundle | None:
        """The owned bundle holding ``topic``; None when that bundle is not owned here."""
        ...

    def owned_bundles(self) -> list[NamespaceBundle]: ...


def bundle_name_of(topic: Topic, bundles: OwnedBundles) -> str | None:
    """The bundle a loaded topic counts in; None when its bundle is not owned here (it is
    being unloaded)."""
    bundle = bundles.bundle_of_loaded(topic.name)
    return None if bundle is None else bundle.name


def topic_stats(topic: Topic) -> NamespaceBundleStats:
    rates = topic.rates
    consumers = sum(len(s.consumers) for s in topic.subscriptions.values())
    return NamespaceBundleStats(
        msg_rate_in=rates.get(topic, "msgIn"),
        msg_rate_out=rates.get(topic, "msgOut"),
        msg_throughput_in=rates.get(topic, "bytesIn"),
        msg_throughput_out=rates.get(topic, "bytesOut"),
        topics=1,
        consumer_count=consumers,
        producer_count=len(topic.counters.producers),
    )


def add(a: NamespaceBundleStats, b: NamespaceBundleStats) -> NamespaceBundleStats:
    return NamespaceBundleStats(
        a.msg_rate_in + b.msg_rate_in,
        a.msg_rate_out + b.msg_rate_out,
        a.msg_throughput_in + b.msg_throughput_in,
        a.msg_throughput_out + b.msg_throughput_out,
        a.topics + b.topics,
        a.consumer_count + b.consumer_count,
        a.producer_count + b.producer_count,
        a.cache_size + b.cache_size,
    )


def collect_bundle_stats(topics: Iterable[Topic], bundles: OwnedBundles) -> dict[str, NamespaceBundleStats]:
    """Bundle → the sum of its loaded topics' stats."""
    totals: dict[str, NamespaceBundleStats] = defaultdict(NamespaceBundleStats)
    for topic in topics:
        bundle = bundle_name_of(topic, bundles)
        if bundle is not None:
            totals[bundle] = add(totals[bundle], topic_stats(topic))
    return dict(totals)


def owned_bundle_names(bundles: OwnedBundles) -> set[str]:
    """Bundles this broker serves, with or without loaded topics."""
    return {bundle.name for bundle in bundles.owned_bundles()}
