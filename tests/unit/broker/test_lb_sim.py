"""bench/lb_sim.py reproduces the tuning reports' findings (reference tuning-reports.md §1–2).

The simulation is deterministic for a seed; these figures are the default run (seed 1,
8 simulated hours, ~3 s), asserted with margins, not exact values."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

BENCH = Path(__file__).resolve().parents[3] / "bench" / "lb_sim.py"


def load_sim():
    spec = importlib.util.spec_from_file_location("lb_sim", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["lb_sim"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results():
    sim = load_sim()
    params = sim.SimParams()
    assert params.brokers >= 5 and params.bundles >= 100
    return {(r.shedder, r.placement): r for r in sim.run_all(params, seed=sim.DEFAULT_SEED)}


def test_overload_shedder_leaves_most_traffic_on_a_few_brokers(results) -> None:
    overload = results["OverloadShedder", "LeastLongTermMessageRate"]
    assert overload.top2_share > 0.6  # two of six brokers carry most of the bytes
    for pair in (
        ("ThresholdShedder", "LeastLongTermMessageRate"),
        ("ThresholdShedder", "LeastResourceUsageWithWeight"),
        ("AvgShedder", "AvgShedder"),
    ):
        assert results[pair].top2_share < overload.top2_share - 0.05


def test_threshold_shedder_spreads_the_load(results) -> None:
    overload = results["OverloadShedder", "LeastLongTermMessageRate"]
    for placement in ("LeastLongTermMessageRate", "LeastResourceUsageWithWeight"):
        threshold = results["ThresholdShedder", placement]
        assert threshold.spread_max_min < 0.75 * overload.spread_max_min
        assert threshold.spread_stddev < 0.75 * overload.spread_stddev


def test_threshold_shedder_with_least_long_term_message_rate_oscillates(results) -> None:
    oscillating = results["ThresholdShedder", "LeastLongTermMessageRate"]
    assert oscillating.movebacks >= 20
    assert oscillating.landed_above_average > 0.5 * oscillating.unloads  # placed on busy brokers


def test_least_resource_usage_with_weight_and_avg_shedder_do_not_oscillate(results) -> None:
    oscillating = results["ThresholdShedder", "LeastLongTermMessageRate"]
    for pair in (("ThresholdShedder", "LeastResourceUsageWithWeight"), ("AvgShedder", "AvgShedder")):
        calm = results[pair]
        assert calm.movebacks * 4 <= oscillating.movebacks
        assert calm.landed_above_average < 0.3 * calm.unloads
        assert calm.spread_max_min < oscillating.spread_max_min


def test_a_restarted_broker_receives_load(results) -> None:
    assert results["OverloadShedder", "LeastLongTermMessageRate"].restarted_ratio < 0.4  # stays nearly empty
    for pair in (("ThresholdShedder", "LeastResourceUsageWithWeight"), ("AvgShedder", "AvgShedder")):
        assert results[pair].restarted_ratio > 0.6


def test_the_simulation_is_deterministic_for_a_seed() -> None:
    sim = load_sim()
    params = sim.SimParams(hours=2.0, restart_at_hours=1.5)
    first = sim.simulate("ThresholdShedder", "LeastLongTermMessageRate", params, seed=5)
    again = sim.simulate("ThresholdShedder", "LeastLongTermMessageRate", params, seed=5)
    assert first == again
    table = sim.markdown_table([first], params)
    assert table.splitlines()[0].startswith("| shedder + placement |") and "ThresholdShedder" in table
