"""Where an unowned bundle goes: Pulsar's ``selectBroker`` pipeline, pure.

1. candidates = every broker with a report (minipulsar has no isolation policies);
2. drop brokers serving more than ``loadBalancerBrokerMaxTopics`` topics (unless none is left);
3. with ``loadBalancerDistributeBundlesEvenlyEnabled`` (PR 16059) keep only the brokers with
   the fewest bundles of the bundle's namespace;
4. an empty set falls back to step 1; the placement strategy picks;
5. if the pick's unweighted max usage is above the overload threshold, the strategy picks
   again among all brokers.

The caller (the load manager, or the simulation) records the answer as a preallocation.

Invariant: pure; the answer is a broker with a report, or None when there is none.
"""

from __future__ import annotations

from minipulsar.broker.loadbalance.load_data import LoadData, namespace_of
from minipulsar.broker.loadbalance.placement.base import PlacementStrategy
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings


def filter_large_topic_count(candidates: list[str], load_data: LoadData, max_topics: int) -> list[str]:
    def topics(broker: str) -> int:
        data = load_data.brokers[broker]
        return data.local.num_topics + sum(b.topics for b in data.preallocated.values())

    kept = [b for b in candidates if topics(b) <= max_topics]
    return kept or candidates


def remove_most_servicing_brokers(bundle: str, candidates: list[str], load_data: LoadData) -> list[str]:
    """PR 16059: only the brokers that serve the fewest bundles of the bundle's namespace."""
    if not candidates:
        return candidates
    counts = load_data.namespace_bundle_counts(candidates, namespace_of(bundle))
    fewest = min(counts.values())
    return [b for b in candidates if counts[b] == fewest]


def select_broker(
    bundle: str, load_data: LoadData, strategy: PlacementStrategy, settings: LoadBalancerSettings
) -> str | None:
    """The broker ``bundle`` should go to, or None when no broker reports."""
    everyone = sorted(load_data.brokers)
    if not everyone:
        return None
    history = load_data.bundle_history(bundle)
    candidates = filter_large_topic_count(everyone, load_data, settings.broker_max_topics)
    if settings.distribute_bundles_evenly:
        candidates = remove_most_servicing_brokers(bundle, candidates, load_data)
    chosen = strategy.select_broker(candidates or everyone, bundle, history, load_data)
    if chosen is not None and load_data.brokers[chosen].local.max_resource_usage() > settings.overload_threshold:
        chosen = strategy.select_broker(everyone, bundle, history, load_data)
    return chosen
