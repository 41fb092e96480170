"""The shedding strategies, on hand-made LoadData."""

from __future__ import annotations

import random

import pytest

from minipulsar.broker.loadbalance.settings import LoadBalancerSettings
from minipulsar.broker.loadbalance.shedding.avg import AvgShedder
from minipulsar.broker.loadbalance.shedding.overload import OverloadShedder
from minipulsar.broker.loadbalance.shedding.threshold import ThresholdShedder
from minipulsar.broker.loadbalance.shedding.uniform import UniformLoadShedder
from tests.support.load_reports import MB, broker_with, bundle, load_data, report, stats

pytestmark = pytest.mark.unit

SETTINGS = LoadBalancerSettings()


def unloaded(unloads) -> list[tuple[str, str]]:
    return [(u.broker, u.bundle) for u in unloads]


# -- OverloadShedder ------------------------------------------------------------------------------


def test_overload_shedder_sheds_only_above_85_percent_largest_bundles_first() -> None:
    data = load_data(
        {
            "hot": broker_with(95, {bundle(1): 100 * MB, bundle(2): 300 * MB, bundle(3): 50 * MB}),
            "warm": broker_with(80, {bundle(4): 100 * MB, bundle(5): 100 * MB}),
            "idle": broker_with(0, {}),
        }
    )
    unloads = OverloadShedder(SETTINGS).find_bundles_for_unloading(data, 0)
    # need = 450 MB × (0.95 − 0.85 + 0.05) = 67.5 MB: the largest bundle covers it
    assert unloaded(unloads) == [("hot", bundle(2))]
    assert unloads[0].reason == "Overloaded"


def test_overload_shedder_skips_recently_unloaded_bundles_and_sole_bundles() -> None:
    data = load_data(
        {
            "hot": broker_with(95, {bundle(1): 100 * MB, bundle(2): 300 * MB}),
            "solo": broker_with(99, {bundle(3): 500 * MB}),
        }
    )
    data.recently_unloaded[bundle(2)] = 0.0
    assert unloaded(OverloadShedder(SETTINGS).find_bundles_for_unloading(data, 0)) == [("hot", bundle(1))]


def test_overload_shedder_leaves_an_empty_broker_empty() -> None:
    """BIGO: nobody above 85 % → nothing moves, however uneven (a new broker never gets load)."""
    data = load_data({"a": broker_with(80, {bundle(1): 100 * MB, bundle(2): 100 * MB}), "new": broker_with(0, {})})
    assert OverloadShedder(SETTINGS).find_bundles_for_unloading(data, 0) == []


# -- ThresholdShedder -----------------------------------------------------------------------------


def test_threshold_shedder_docs_example_40_10_10() -> None:
    """Pulsar's docs: usages 40/10/10 % → average 20 %; broker1 (40 > 20 + 10) sheds."""
    data = load_data(
        {
            "broker1": broker_with(40, {bundle(1): 200 * MB, bundle(2): 100 * MB}),
            "broker2": broker_with(10, {bundle(3): 50 * MB, bundle(4): 50 * MB}),
            "broker3": broker_with(10, {bundle(5): 50 * MB, bundle(6): 50 * MB}),
        }
    )
    unloads = ThresholdShedder(SETTINGS).find_bundles_for_unloading(data, 0)
    # need = 300 MB × (0.40 − 0.20 − 0.10 + 0.05) = 45 MB → the largest bundle
    assert unloaded(unloads) == [("broker1", bundle(1))]


@pytest.mark.parametrize("usages", [[12, 2, 1, 1], [50, 50, 50, 50, 50, 0]])
def test_threshold_shedder_pip_220_edge_cases_shed_nothing(usages: list[float]) -> None:
    """PIP-220: [12,2,1,1] (avg 4, nobody > 14) and [50×5, 0] (avg 41.7, nobody > 51.7)."""
    data = load_data(
        {f"b{i}": broker_with(u, {bundle(2 * i): 100 * MB, bundle(2 * i + 1): 100 * MB}) for i, u in enumerate(usages)}
    )
    assert ThresholdShedder(SETTINGS).find_bundles_for_unloading(data, 0) == []


def test_threshold_shedder_skips_a_shed_under_the_minimum_throughput() -> None:
    data = load_data(
        {
            "a": broker_with(40, {bundle(1): 10 * MB, bundle(2): 10 * MB}),
            "b": broker_with(10, {}),
            "c": broker_with(10, {}),
        }
    )
    # need = 20 MB × 0.15 = 3 MB < 10 MB (loadBalancerBundleUnloadMinThroughputThreshold)
    assert ThresholdShedder(SETTINGS).find_bundles_for_unloading(data, 0) == []


def test_threshold_shedder_smooths_usage_over_cycles() -> None:
    """One spike does not shed; with H = 0.9 the moving average needs several hot cycles."""
    shedder = ThresholdShedder(SETTINGS)
    calm = {
        "a": broker_with(20, {bundle(1): 200 * MB, bundle(2): 200 * MB}),
        "b": broker_with(20, {}),
        "c": broker_with(20, {}),
    }
    shedder.find_bundles_for_unloading(load_data(calm), 0)
    hot = dict(calm, a=broker_with(90, {bundle(1): 200 * MB, bundle(2): 200 * MB}))
    cycles = 0
    while not shedder.find_bundles_for_unloading(load_data(hot), 0):
        cycles += 1
        assert cycles < 20
    assert cycles >= 1
    assert shedder.history.averages["a"] > shedder.history.averages["b"]


def test_lower_boundary_shedding_takes_from_the_busiest_when_someone_is_idle() -> None:
    settings = LoadBalancerSettings(lower_boundary_shedding_enabled=True)
    data = load_data(
        {
            "a": broker_with(30, {bundle(1): 100 * MB, bundle(2): 100 * MB}),
            "b": broker_with(30, {bundle(3): 100 * MB, bundle(4): 50 * MB}),
            "c": broker_with(2, {}),
        }
    )
    unloads = ThresholdShedder(settings).find_bundles_for_unloading(data, 0)
    assert [u.reason for u in unloads] == ["Underloaded"] and unloads[0].broker in ("a", "b")
    assert ThresholdShedder(SETTINGS).find_bundles_for_unloading(data, 0) == []  # off by default


# -- UniformLoadShedder ---------------------------------------------------------------------------


def test_uniform_shedder_moves_a_share_of_the_message_rate_gap_from_one_broker() -> None:
    data = load_data(
        {
            "busy": report(bundles={bundle(1): stats(8000), bundle(2): stats(3000), bundle(3): stats(1500)}),
            "quiet": report(bundles={bundle(4): stats(1000)}),
            "mid": report(bundles={bundle(5): stats(1200), bundle(6): stats(300)}),
        }
    )
    unloads = UniformLoadShedder(SETTINGS).find_bundles_for_unloading(data, 0)
    # gap 11 500 msg/s → need 2300: bundle 2 (3000 ≤ 2300 + 1000) is taken, then nothing fits
    assert unloaded(unloads) == [("busy", bundle(2))] and unloads[0].reason == "Balanced"


def test_uniform_shedder_balances_throughput_when_message_rates_agree() -> None:
    """Rates equal (the rate branch has priority); throughput 35 MB vs 5 MB (7× > 4×):
    need = 30 MB × 0.2 = 6 MB, so the 5 MB bundle is taken and the 30 MB one is not."""
    data = load_data(
        {
            "a": report(bundles={bundle(1): stats(50, 30 * MB), bundle(2): stats(50, 5 * MB)}),
            "b": report(bundles={bundle(3): stats(100, 5 * MB)}),
        }
    )
    assert unloaded(UniformLoadShedder(SETTINGS).find_bundles_for_unloading(data, 0)) == [("a", bundle(2))]


def test_uniform_shedder_rate_branch_has_priority_even_when_it_moves_nothing() -> None:
    data = load_data(
        {
            "a": report(bundles={bundle(1): stats(100, 30 * MB), bundle(2): stats(100, 5 * MB)}),
            "b": report(bundles={bundle(3): stats(100, 5 * MB)}),
        }
    )
    # rates 200 vs 100 (+100 %): need = 20 msg/s < minUnloadMessage (1000) → nothing, no throughput fallback
    assert UniformLoadShedder(SETTINGS).find_bundles_for_unloading(data, 0) == []


# -- AvgShedder -----------------------------------------------------------------------------------


def avg_cluster(high: float, low: float):
    return load_data(
        {
            "high": broker_with(high, {bundle(1): 50 * MB, bundle(2): 20 * MB, bundle(3): 10 * MB}, rate_per_byte=1e-4),
            "low": broker_with(low, {bundle(4): 5 * MB}, rate_per_byte=1e-4),
        }
    )


def test_avg_shedder_needs_two_cycles_of_a_large_gap() -> None:
    shedder = AvgShedder(SETTINGS, random.Random(1))
    assert shedder.find_bundles_for_unloading(avg_cluster(80, 20), 0) == []  # 1st hit
    unloads = shedder.find_bundles_for_unloading(avg_cluster(80, 20), 0)  # 2nd hit: fires
    # rate gap 8000 − 500 = 7500 msg/s × 0.2 = 1500 > 1000: by rate; bundles ≤ 1500 msg/s: 2000? no; 1000 yes
    assert unloaded(unloads) == [("high", bundle(3))]
    assert shedder.plan[bundle(3)] == "low"  # the destination is planned


def test_avg_shedder_needs_eight_cycles_of_a_moderate_gap_and_forgets_when_it_closes() -> None:
    shedder = AvgShedder(SETTINGS, random.Random(1))
    for _ in range(7):
        assert shedder.find_bundles_for_unloading(avg_cluster(50, 20), 0) == []
    assert shedder.find_bundles_for_unloading(avg_cluster(45, 40), 0) == []  # gap < 15: counts reset
    for _ in range(7):
        assert shedder.find_bundles_for_unloading(avg_cluster(50, 20), 0) == []
    assert shedder.find_bundles_for_unloading(avg_cluster(50, 20), 0) != []


def test_avg_shedder_placement_honours_the_plan_else_scatters() -> None:
    shedder = AvgShedder(SETTINGS, random.Random(3))
    data = avg_cluster(80, 20)
    shedder.plan[bundle(9)] = "low"
    assert shedder.select_broker(["high", "low"], bundle(9), data.bundle_history(bundle(9)), data) == "low"
    chosen = {
        shedder.select_broker(["a", "b", "c"], bundle(i), data.bundle_history(bundle(i)), data) for i in range(10, 40)
    }
    assert chosen == {"a", "b", "c"}  # a random number's hash, not the bundle's: dead brokers' bundles scatter
