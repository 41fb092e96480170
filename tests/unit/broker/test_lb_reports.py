"""Load reports (LocalBrokerData), the rewrite rule, time averages and bundle histories."""

from __future__ import annotations

import json
import math

import pytest

from minipulsar.broker.loadbalance.bundle_data import BundleData, TimeAverageBrokerData
from minipulsar.broker.loadbalance.load_report import LocalBrokerData, needs_update, percent_change
from minipulsar.broker.loadbalance.resource_usage import ResourceUsage, ResourceWeights
from minipulsar.broker.loadbalance.time_average import DEFAULT_MSG_RATE, TimeAverageMessageData
from tests.support.load_reports import bundle, report, stats

pytestmark = pytest.mark.unit


def test_report_aggregates_are_the_sums_of_its_bundles() -> None:
    data = report(
        bundles={bundle(1): stats(100, 1000, topics=3), bundle(2): stats(50, 500, topics=2)}, owned={bundle(3)}
    )
    assert data.msg_rate_in == 75 and data.msg_rate_out == 75
    assert data.msg_throughput == 1500
    assert data.num_topics == 5 and data.num_producers == 2 and data.num_consumers == 2
    assert data.bundles == {bundle(1), bundle(2), bundle(3)} and data.num_bundles == 3


def test_report_json_uses_pulsar_field_names_and_round_trips() -> None:
    data = report(cpu=40, bw_out=70, bundles={bundle(1): stats(10, 100)}, owned={bundle(2)})
    raw = json.loads(data.to_bytes())
    for key in (
        "webServiceUrl",
        "pulsarServiceUrl",
        "cpu",
        "memory",
        "directMemory",
        "bandwidthIn",
        "bandwidthOut",
        "msgRateIn",
        "msgThroughputOut",
        "numBundles",
        "bundles",
        "lastStats",
        "lastUpdate",
    ):
        assert key in raw
    assert raw["cpu"] == {"usage": 40, "limit": 100}
    assert raw["lastStats"][bundle(1)]["msgThroughputIn"] == 50
    assert LocalBrokerData.from_bytes(data.to_bytes()) == data


def test_a_registration_without_a_report_reads_as_zeros() -> None:
    data = LocalBrokerData.from_bytes(b'{"pulsarServiceUrl": "pulsar://h:1", "webServiceUrl": "http://h:2"}')
    assert data.pulsar_service_url == "pulsar://h:1" and data.max_resource_usage() == 0 and not data.bundles
    with pytest.raises(ValueError):
        LocalBrokerData.from_bytes(b"[1, 2]")


def test_max_usage_weighs_each_resource() -> None:
    data = report(cpu=50, memory=90, bw_out=60)
    assert data.max_resource_usage() == pytest.approx(0.9)
    assert data.max_resource_usage_with_weight(ResourceWeights(memory=0.0)) == pytest.approx(0.6)
    assert ResourceUsage(5, 0).percent_usage == 0  # unknown limit


def test_gains_and_losses_are_relative_to_the_last_written_report() -> None:
    before = report(owned={bundle(1), bundle(2)})
    after = report(owned={bundle(2), bundle(3)}).with_changes_since(before)
    assert after.last_bundle_gains == {bundle(3)} and after.last_bundle_losses == {bundle(1)}


def test_percent_change_follows_pulsar() -> None:
    assert percent_change(0, 0) == 0
    assert percent_change(0, 1) == math.inf
    assert percent_change(200, 150) == 25


@pytest.mark.parametrize(
    ("last", "current", "elapsed_s", "expected"),
    [
        (None, report(), 0, True),  # nothing written yet
        (report(cpu=50), report(cpu=55), 60, False),  # 5 points: below 10 %
        (report(cpu=50), report(cpu=65), 60, True),  # 15 points of max usage
        (report(bundles={bundle(1): stats(100)}), report(bundles={bundle(1): stats(115)}), 60, True),  # rate +15 %
        (report(owned={bundle(1)}), report(owned={bundle(1), bundle(2)}), 60, True),  # bundle count doubled
        (report(cpu=50), report(cpu=50), 16 * 60, True),  # max interval passed
    ],
)
def test_report_is_rewritten_on_a_significant_change_or_after_the_max_interval(
    last, current, elapsed_s, expected
) -> None:
    assert needs_update(last, current, elapsed_s, threshold_pct=10, max_interval_minutes=15) is expected


def test_time_average_replaces_the_defaults_then_averages_then_decays() -> None:
    window = TimeAverageMessageData(max_samples=3)
    assert window.msg_rate_in == DEFAULT_MSG_RATE
    window.update(stats(rate=20))  # 10 in
    assert window.msg_rate_in == 10  # the first sample replaces the default
    window.update(stats(rate=40))  # 20 in → mean 15
    window.update(stats(rate=60))  # 30 in → mean 20
    assert window.msg_rate_in == pytest.approx(20)
    window.update(stats(rate=0))  # saturated: EMA with α = 1/3
    assert window.num_samples == 3 and window.msg_rate_in == pytest.approx(20 * 2 / 3)


def test_bundle_data_round_trips_and_broker_sums_count_unknown_bundles_at_defaults() -> None:
    history = BundleData()
    history.update(stats(rate=100, throughput=1000, topics=4))
    again = BundleData.from_bytes(history.to_bytes())
    assert again.long_term.msg_rate == 100 and again.topics == 4 and again.short_term.num_samples == 1
    sums = TimeAverageBrokerData.of([bundle(1), bundle(2)], {bundle(1): history})
    assert sums.long_term_msg_rate == 100 + 2 * DEFAULT_MSG_RATE
