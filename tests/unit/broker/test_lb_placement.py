"""Placement strategies, the selection pipeline, the unload planner and the auto split (§1.7–1.10)."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest

from minipulsar.broker.loadbalance.bundle_split import find_bundles_to_split
from minipulsar.broker.loadbalance.placement.least_long_term_message_rate import LeastLongTermMessageRate
from minipulsar.broker.loadbalance.placement.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from minipulsar.broker.loadbalance.placement.pipeline import select_broker
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings
from minipulsar.broker.loadbalance.shedding.base import Unload
from minipulsar.broker.loadbalance.strategies import create_strategies
from minipulsar.broker.loadbalance.unload_planner import plan_unloads, unload_done
from tests.support.load_reports import MB, broker_with, bundle, load_data, report, stats

pytestmark = pytest.mark.unit

SETTINGS = LoadBalancerSettings(distribute_bundles_evenly=False)


def choices(strategy, candidates, data, times: int = 200) -> Counter:
    return Counter(
        strategy.select_broker(candidates, bundle(99), data.bundle_history(bundle(99)), data) for _ in range(times)
    )


# -- LeastLongTermMessageRate ---------------------------------------------------------------------


def test_least_long_term_message_rate_picks_the_least_rate_and_skips_overloaded() -> None:
    data = load_data(
        {
            "busy": report(cpu=30, bundles={bundle(1): stats(5000)}),
            "quiet": report(cpu=30, bundles={bundle(2): stats(100)}),
            "hot": report(cpu=90, bundles={bundle(3): stats(10)}),
        }
    )  # least rate, but > 85 %
    assert set(choices(LeastLongTermMessageRate(SETTINGS, random.Random(1)), ["busy", "quiet", "hot"], data)) == {
        "quiet"
    }


def test_least_long_term_message_rate_counts_preallocated_bundles() -> None:
    data = load_data({"a": report(bundles={bundle(1): stats(100)}), "b": report(bundles={bundle(2): stats(150)})})
    data.bundles[bundle(7)] = data.bundle_history(bundle(2))  # a bundle known to carry 150 msg/s
    data.preallocate(bundle(7), "a")
    assert set(choices(LeastLongTermMessageRate(SETTINGS, random.Random(1)), ["a", "b"], data)) == {"b"}


def test_least_long_term_message_rate_ties_are_random() -> None:
    data = load_data({"a": report(), "b": report(), "c": report()})
    assert set(choices(LeastLongTermMessageRate(SETTINGS, random.Random(1)), ["a", "b", "c"], data)) == {"a", "b", "c"}


# -- LeastResourceUsageWithWeight -----------------------------------------------------------------


def test_least_resource_usage_example_10_30_80() -> None:
    """PR 16281: usages 10/30/80 % → average 40 → the 10 % and 30 % brokers are eligible."""
    data = load_data(
        {n: broker_with(u, {bundle(i): MB}) for i, (n, u) in enumerate([("b10", 10), ("b30", 30), ("b80", 80)])}
    )
    assert set(choices(LeastResourceUsageWithWeight(SETTINGS, random.Random(1)), ["b10", "b30", "b80"], data)) == {
        "b10",
        "b30",
    }


def test_least_resource_usage_is_random_among_all_when_nobody_is_clearly_below() -> None:
    """PIP-364's failure case: 40,40,40,40,69,70 → nobody 10 points under the mean → any broker."""
    usages = [40, 40, 40, 40, 69, 70]
    data = load_data({f"b{i}": broker_with(u, {bundle(i): MB}) for i, u in enumerate(usages)})
    picked = choices(LeastResourceUsageWithWeight(SETTINGS, random.Random(1)), sorted(data.brokers), data)
    assert {"b4", "b5"} & set(picked)


# -- pipeline -------------------------------------------------------------------------------------


def test_distribute_bundles_evenly_keeps_the_brokers_with_fewest_bundles_of_the_namespace() -> None:
    data = load_data(
        {
            "many": broker_with(5, {bundle(1): MB, bundle(2): MB}),  # least loaded, 2 bundles
            "few": broker_with(50, {bundle(3): MB}),
        }
    )
    strategy = LeastResourceUsageWithWeight(SETTINGS, random.Random(1))
    evenly = LoadBalancerSettings(distribute_bundles_evenly=True)
    assert {select_broker(bundle(9), data, strategy, evenly) for _ in range(20)} == {"few"}
    other_namespace = bundle(9, namespace="t/other")  # no bundles of t/other anywhere: no filtering
    assert "many" in {select_broker(other_namespace, data, strategy, evenly) for _ in range(20)}


def test_a_pick_above_the_overload_threshold_is_retried_among_all_brokers() -> None:
    data = load_data({"hot": report(cpu=95, owned={bundle(1)}), "cold": report(cpu=10, owned={bundle(2), bundle(3)})})
    evenly = LoadBalancerSettings(distribute_bundles_evenly=True)  # keeps only "hot" (fewest bundles)
    strategy = LeastLongTermMessageRate(evenly, random.Random(1))
    assert select_broker(bundle(9), data, strategy, evenly) == "cold"


def test_brokers_over_the_topic_limit_are_left_out() -> None:
    data = load_data({"full": report(bundles={bundle(1): stats(topics=10)}), "spare": report(cpu=50)})
    limited = replace(SETTINGS, broker_max_topics=5)
    strategy = LeastLongTermMessageRate(limited, random.Random(1))
    data.bundles.clear()  # equal long-term rates: only the topic filter decides
    assert {select_broker(bundle(9), data, strategy, limited) for _ in range(10)} == {"spare"}


def test_avg_shedder_configured_for_both_roles_is_one_object() -> None:
    shedder, placement = create_strategies(
        replace(SETTINGS, shedding_strategy="AvgShedder", placement_strategy="AvgShedder")
    )
    assert shedder is placement


# -- unload planner -------------------------------------------------------------------------------


class FixedShedder:
    name = "Fixed"

    def __init__(self, *unloads: Unload) -> None:
        self.unloads = list(unloads)

    def find_bundles_for_unloading(self, load_data, now_s):
        return [u for u in self.unloads if u.bundle not in load_data.recently_unloaded]


class FixedPlacement:
    name = "Fixed"

    def __init__(self, broker: str) -> None:
        self.broker = broker

    def select_broker(self, candidates, bundle_name, bundle_data, load_data):
        return self.broker


def test_planner_plans_destinations_preallocates_them_and_respects_the_grace_period() -> None:
    data = load_data({"a": report(owned={bundle(1), bundle(2)}), "b": report()})
    shedder = FixedShedder(Unload("a", bundle(1), "Overloaded"))
    planned = plan_unloads(data, shedder, FixedPlacement("b"), SETTINGS, now_s=0)
    assert [(p.bundle, p.destination) for p in planned] == [(bundle(1), "b")]
    assert data.preallocated[bundle(1)] == "b" and bundle(1) in data.brokers["b"].preallocated
    unload_done(data, planned[0], ok=True, now_s=0)
    assert plan_unloads(data, shedder, FixedPlacement("b"), SETTINGS, now_s=60) == []  # in grace
    assert plan_unloads(data, shedder, FixedPlacement("b"), SETTINGS, now_s=31 * 60) != []  # grace over


def test_planner_skips_an_unload_that_would_land_where_it_is() -> None:
    data = load_data({"a": report(owned={bundle(1)}), "b": report()})
    shedder = FixedShedder(Unload("a", bundle(1), "Overloaded"))
    assert plan_unloads(data, shedder, FixedPlacement("a"), SETTINGS, now_s=0) == []


def test_a_failed_unload_gives_its_preallocation_back_and_is_not_in_grace() -> None:
    data = load_data({"a": report(owned={bundle(1)}), "b": report()})
    [planned] = plan_unloads(
        data, FixedShedder(Unload("a", bundle(1), "Overloaded")), FixedPlacement("b"), SETTINGS, now_s=0
    )
    unload_done(data, planned, ok=False, now_s=0)
    assert bundle(1) not in data.preallocated and not data.brokers["b"].preallocated
    assert bundle(1) not in data.recently_unloaded


def test_nothing_is_shed_with_a_single_broker() -> None:
    data = load_data({"a": report(owned={bundle(1), bundle(2)})})
    assert (
        plan_unloads(data, FixedShedder(Unload("a", bundle(1), "Overloaded")), FixedPlacement("a"), SETTINGS, 0) == []
    )


def test_a_preallocation_ends_when_the_broker_reports_the_bundle() -> None:
    data = load_data({"a": report(), "b": report()})
    data.preallocate(bundle(1), "b")
    data.update_reports({"a": report(), "b": report(owned={bundle(1)})})
    assert bundle(1) not in data.preallocated and not data.brokers["b"].preallocated
    data.preallocate(bundle(2), "b")
    data.update_reports({"a": report()})  # b left
    assert bundle(2) not in data.preallocated


# -- auto split -----------------------------------------------------------------------------------


def test_split_picks_bundles_over_any_limit_with_more_than_one_topic() -> None:
    settings = replace(SETTINGS, auto_bundle_split_enabled=True, bundle_max_topics=10, bundle_max_msg_rate=1000)
    data = load_data(
        {
            "a": report(
                bundles={
                    bundle(1): stats(rate=10, topics=11),  # too many topics
                    bundle(2): stats(rate=5000, topics=2),  # too many messages
                    bundle(3): stats(rate=5000, topics=1),  # one topic: cannot split
                    bundle(4): stats(rate=10, topics=2),
                }
            )
        }
    )  # fine
    assert find_bundles_to_split(data, settings, {"public/default": 4}) == {bundle(1): "a", bundle(2): "a"}


def test_split_stops_at_the_namespace_bundle_limit() -> None:
    settings = replace(SETTINGS, bundle_max_topics=10, namespace_maximum_bundles=5)
    data = load_data({"a": report(bundles={bundle(1): stats(topics=20), bundle(2): stats(topics=20)})})
    assert len(find_bundles_to_split(data, settings, {"public/default": 4})) == 1
    assert find_bundles_to_split(data, settings, {"public/default": 5}) == {}
