"""The load balancer's config keys (Pulsar names and defaults) and what the strategies get."""

from __future__ import annotations

import pytest

from minipulsar.broker.loadbalance.placement.least_long_term_message_rate import LeastLongTermMessageRate
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings
from minipulsar.broker.loadbalance.shedding.threshold import ThresholdShedder
from minipulsar.broker.loadbalance.strategies import create_strategies
from minipulsar.config import BrokerConfig, config_keys, load_config
from minipulsar.errors import ConfigError

pytestmark = pytest.mark.unit


def test_defaults_are_pulsars_except_auto_split() -> None:
    keys = config_keys(BrokerConfig)
    assert keys["loadBalancerLoadSheddingStrategy"] == "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder"
    assert keys["loadBalancerLoadPlacementStrategy"].endswith(".LeastLongTermMessageRate")
    assert keys["loadBalancerReportUpdateMaxIntervalMinutes"] == 15
    assert keys["loadBalancerReportUpdateThresholdPercentage"] == 10
    assert keys["loadBalancerSheddingIntervalMinutes"] == 1
    assert keys["loadBalancerSheddingGracePeriodMinutes"] == 30
    assert keys["loadBalancerBrokerOverloadedThresholdPercentage"] == 85
    assert keys["loadBalancerBrokerThresholdShedderPercentage"] == 10
    assert keys["loadBalancerHistoryResourcePercentage"] == 0.9
    assert keys["loadBalancerBandwidthInResourceWeight"] == 1.0
    assert keys["loadBalancerBundleUnloadMinThroughputThreshold"] == 10
    assert keys["loadBalancerAvgShedderHitCountHighThreshold"] == 2
    assert keys["loadBalancerAutoBundleSplitEnabled"] is False  # BIGO: off
    assert keys["loadBalancerNamespaceBundleMaxMsgRate"] == 30_000
    assert keys["loadBalancerOverrideBrokerNicSpeedGbps"] is None


def test_class_names_short_names_and_fractional_minutes_are_accepted() -> None:
    config = load_config(
        BrokerConfig,
        overrides={
            "loadBalancerLoadSheddingStrategy": "AvgShedder",
            "loadBalancerLoadPlacementStrategy": "org.apache.pulsar.broker.loadbalance.impl.AvgShedder",
            "loadBalancerSheddingIntervalMinutes": "0.05",
            "loadBalancerOverrideBrokerNicSpeedGbps": "0.5",
        },
    )
    settings = LoadBalancerSettings.from_config(config)
    assert settings.shedding_strategy == settings.placement_strategy == "AvgShedder"
    assert settings.shedding_interval_minutes == 0.05 and settings.nic_speed_gbps == 0.5
    with pytest.raises(ConfigError):
        load_config(BrokerConfig, overrides={"loadBalancerLoadSheddingStrategy": "DeviationShedder"})


def test_default_config_builds_threshold_shedder_and_least_long_term_message_rate() -> None:
    shedder, placement = create_strategies(LoadBalancerSettings.from_config(BrokerConfig()))
    assert isinstance(shedder, ThresholdShedder) and isinstance(placement, LeastLongTermMessageRate)
