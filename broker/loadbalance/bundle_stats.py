"""Per-bundle stats of a broker (its report's ``lastStats``): its loaded topics, grouped by bundle.

A topic's bundle comes from the namespace service (``bundle_of_loaded``: the owned bundle whose
range holds the topic's hash). Without a namespace service (a broker built without
``broker/namespace``), every topic counts in its namespace's full range
``tenant/ns/0x00000000_0xffffffff``. Rates are the topics' last ``statsUpdateFrequencyInSecs``
sample (:mod:`broker.topics.rates`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from minipulsar.broker.loadbalance.load_report import NamespaceBundleStats

FULL_RANGE = "0x00000000_0xffffffff"


def bundle_name_of(topic: Any, namespaces: Any) -> str | None:
    """The bundle a loaded topic counts in; None when its bundle is not owned here (it is
    being unloaded)."""
    if namespaces is None:
        return f"{topic.name.namespace_name}/{FULL_RANGE}"
    bundle = namespaces.bundle_of_loaded(topic.name)
    return None if bundle is None else bundle.name


def topic_stats(topic: Any) -> NamespaceBundleStats:
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


def collect_bundle_stats(topics: Iterable[Any], namespaces: Any) -> dict[str, NamespaceBundleStats]:
    """Bundle → the sum of its loaded topics' stats."""
    totals: dict[str, NamespaceBundleStats] = defaultdict(NamespaceBundleStats)
    for topic in topics:
        bundle = bundle_name_of(topic, namespaces)
        if bundle is not None:
            totals[bundle] = add(totals[bundle], topic_stats(topic))
    return dict(totals)


def owned_bundle_names(namespaces: Any) -> set[str]:
    """Bundles this broker serves, with or without loaded topics."""
    if namespaces is None:
        return set()
    return {bundle.name for bundle in namespaces.owned_bundles()}
