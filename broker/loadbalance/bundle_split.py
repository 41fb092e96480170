"""Which bundles the leader splits (Pulsar's ``BundleSplitterTask``), pure.

A bundle reported by its owner is too big when any of: more than
``loadBalancerNamespaceBundleMaxTopics`` topics, more than ``…MaxSessions`` producers +
consumers (−1: not checked), a long-term message rate (in+out) above ``…MaxMsgRate``, a
long-term throughput above ``…MaxBandwidthMbytes`` MB/s. It is split only if it has more than
one topic and its namespace has fewer than ``loadBalancerNamespaceMaximumBundles`` bundles
(counting the splits already chosen this round). Off by default
(``loadBalancerAutoBundleSplitEnabled=false``): a split disconnects every client of the bundle,
at the worst moment — when it is hot (BIGO).

Invariant: pure; a namespace never gets more than ``loadBalancerNamespaceMaximumBundles``
bundles from one round.
"""

from __future__ import annotations

from collections.abc import Mapping

from minipulsar.broker.loadbalance.load_data import LoadData, namespace_of
from minipulsar.broker.loadbalance.load_report import NamespaceBundleStats
from minipulsar.broker.loadbalance.settings import MB, LoadBalancerSettings


def is_too_big(
    stats: NamespaceBundleStats, long_rate: float, long_throughput: float, settings: LoadBalancerSettings
) -> bool:
    s = settings
    sessions = stats.consumer_count + stats.producer_count
    return (
        stats.topics > s.bundle_max_topics
        or (s.bundle_max_sessions > 0 and sessions > s.bundle_max_sessions)
        or long_rate > s.bundle_max_msg_rate
        or long_throughput > s.bundle_max_bandwidth_mbytes * MB
    )


def find_bundles_to_split(
    load_data: LoadData, settings: LoadBalancerSettings, namespace_bundle_counts: Mapping[str, int]
) -> dict[str, str]:
    """Bundle → the broker owning it, for each bundle to split now.

    ``namespace_bundle_counts``: how many bundles each namespace has (a namespace missing
    from it counts the bundles the reports show).
    """
    counts = dict(namespace_bundle_counts)
    chosen: dict[str, str] = {}
    for broker, data in sorted(load_data.brokers.items()):
        for bundle, stats in sorted(data.local.last_stats.items()):
            history = load_data.bundles.get(bundle)
            long_rate = history.long_term.msg_rate if history is not None else 0.0
            long_tput = history.long_term.msg_throughput if history is not None else 0.0
            if not is_too_big(stats, long_rate, long_tput, settings) or stats.topics <= 1:
                continue
            namespace = namespace_of(bundle)
            count = counts.get(namespace)
            if count is None:
                count = sum(
                    1 for d in load_data.brokers.values() for b in d.local.bundles if namespace_of(b) == namespace
                )
            if count >= settings.namespace_maximum_bundles:
                continue
            counts[namespace] = count + 1
            chosen[bundle] = broker
    return chosen
