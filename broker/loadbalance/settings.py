"""The load balancer's knobs, in one value the pure strategies take (and the simulation builds).

Each field is a ``loadBalancer…`` key of :class:`~minipulsar.config.BrokerConfig` (the comment
names it); :meth:`LoadBalancerSettings.from_config` copies them. Durations are kept in the
unit of their key (minutes, as Pulsar's); fractions of a minute are allowed so tests and the
simulation can run Pulsar's schedules faster.

Invariant: a value, fixed for the load manager's life (the simulation builds its own).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from minipulsar.broker.loadbalance.resource_usage import ResourceWeights

if TYPE_CHECKING:
    from minipulsar.config import BrokerConfig

MB = 1024 * 1024
"""Pulsar's ``MB`` in the shedders: loadBalancerBundleUnloadMinThroughputThreshold is in MiB/s."""

SHEDDERS = ("OverloadShedder", "ThresholdShedder", "UniformLoadShedder", "AvgShedder")
PLACEMENTS = ("LeastLongTermMessageRate", "LeastResourceUsageWithWeight", "AvgShedder")


def short_class_name(name: str) -> str:
    """``org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder`` → ``ThresholdShedder``."""
    return name.rsplit(".", 1)[-1]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadBalancerSettings:
    enabled: bool = True  # loadBalancerEnabled
    shedding_enabled: bool = True  # loadBalancerSheddingEnabled
    shedding_strategy: str = "ThresholdShedder"  # loadBalancerLoadSheddingStrategy (short name)
    placement_strategy: str = "LeastLongTermMessageRate"  # loadBalancerLoadPlacementStrategy (short name)
    report_update_threshold_pct: float = 10.0  # loadBalancerReportUpdateThresholdPercentage
    report_update_min_interval_ms: int = 5000  # loadBalancerReportUpdateMinIntervalMillis
    report_update_max_interval_minutes: float = 15.0  # loadBalancerReportUpdateMaxIntervalMinutes
    host_usage_check_interval_minutes: float = 1.0  # loadBalancerHostUsageCheckIntervalMinutes
    shedding_interval_minutes: float = 1.0  # loadBalancerSheddingIntervalMinutes
    shedding_grace_period_minutes: float = 30.0  # loadBalancerSheddingGracePeriodMinutes
    overloaded_threshold_pct: float = 85.0  # loadBalancerBrokerOverloadedThresholdPercentage
    threshold_shedder_pct: float = 10.0  # loadBalancerBrokerThresholdShedderPercentage
    history_resource_percentage: float = 0.9  # loadBalancerHistoryResourcePercentage
    weights: ResourceWeights = field(default_factory=ResourceWeights)  # loadBalancer*ResourceWeight
    bundle_unload_min_throughput_mb: float = 10.0  # loadBalancerBundleUnloadMinThroughputThreshold
    lower_boundary_shedding_enabled: bool = False  # lowerBoundarySheddingEnabled
    average_usage_difference_pct: float = 10.0  # loadBalancerAverageResourceUsageDifferenceThresholdPercentage
    msg_rate_difference_pct: float = 50.0  # loadBalancerMsgRateDifferenceShedderThreshold
    msg_throughput_multiplier_difference: float = 4.0  # loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold
    max_unload_percentage: float = 0.2  # maxUnloadPercentage
    min_unload_message: float = 1000.0  # minUnloadMessage
    min_unload_message_throughput: float = 1.0 * MB  # minUnloadMessageThroughput
    max_unload_bundle_num_per_shedding: int = -1  # maxUnloadBundleNumPerShedding
    avg_shedder_low_threshold: float = 15.0  # loadBalancerAvgShedderLowThreshold
    avg_shedder_high_threshold: float = 40.0  # loadBalancerAvgShedderHighThreshold
    avg_shedder_hit_count_low_threshold: int = 8  # loadBalancerAvgShedderHitCountLowThreshold
    avg_shedder_hit_count_high_threshold: int = 2  # loadBalancerAvgShedderHitCountHighThreshold
    distribute_bundles_evenly: bool = True  # loadBalancerDistributeBundlesEvenlyEnabled
    broker_max_topics: int = 50_000  # loadBalancerBrokerMaxTopics
    resource_quota_update_interval_minutes: float = 15.0  # loadBalancerResourceQuotaUpdateIntervalMinutes
    auto_bundle_split_enabled: bool = False  # loadBalancerAutoBundleSplitEnabled (BIGO: off)
    auto_unload_split_bundles: bool = True  # loadBalancerAutoUnloadSplitBundlesEnabled
    bundle_max_topics: int = 1000  # loadBalancerNamespaceBundleMaxTopics
    bundle_max_sessions: int = 1000  # loadBalancerNamespaceBundleMaxSessions (-1: off)
    bundle_max_msg_rate: float = 30_000.0  # loadBalancerNamespaceBundleMaxMsgRate
    bundle_max_bandwidth_mbytes: float = 100.0  # loadBalancerNamespaceBundleMaxBandwidthMbytes
    namespace_maximum_bundles: int = 128  # loadBalancerNamespaceMaximumBundles
    nic_speed_gbps: float | None = None  # loadBalancerOverrideBrokerNicSpeedGbps

    def __post_init__(self) -> None:
        if self.shedding_strategy not in SHEDDERS:
            raise ValueError(
                f"loadBalancerLoadSheddingStrategy: unknown {self.shedding_strategy!r}, "
                f"expected one of {', '.join(SHEDDERS)}"
            )
        if self.placement_strategy not in PLACEMENTS:
            raise ValueError(
                f"loadBalancerLoadPlacementStrategy: unknown {self.placement_strategy!r}, "
                f"expected one of {', '.join(PLACEMENTS)}"
            )

    @property
    def overload_threshold(self) -> float:
        """loadBalancerBrokerOverloadedThresholdPercentage as a fraction (0.85)."""
        return self.overloaded_threshold_pct / 100.0

    @property
    def grace_period_s(self) -> float:
        return self.shedding_grace_period_minutes * 60.0

    def with_strategies(self, shedding: str, placement: str) -> LoadBalancerSettings:
        return replace(
            self, shedding_strategy=short_class_name(shedding), placement_strategy=short_class_name(placement)
        )

    @classmethod
    def from_config(cls, config: BrokerConfig) -> LoadBalancerSettings:
        c = config
        return cls(
            enabled=c.load_balancer_enabled,
            shedding_enabled=c.load_balancer_shedding_enabled,
            shedding_strategy=short_class_name(c.load_balancer_load_shedding_strategy),
            placement_strategy=short_class_name(c.load_balancer_load_placement_strategy),
            report_update_threshold_pct=c.load_balancer_report_update_threshold_pct,
            report_update_min_interval_ms=c.load_balancer_report_update_min_interval_ms,
            report_update_max_interval_minutes=c.load_balancer_report_update_max_interval_minutes,
            host_usage_check_interval_minutes=c.load_balancer_host_usage_check_interval_minutes,
            shedding_interval_minutes=c.load_balancer_shedding_interval_minutes,
            shedding_grace_period_minutes=c.load_balancer_shedding_grace_period_minutes,
            overloaded_threshold_pct=c.load_balancer_broker_overloaded_threshold_pct,
            threshold_shedder_pct=c.load_balancer_broker_threshold_shedder_pct,
            history_resource_percentage=c.load_balancer_history_resource_percentage,
            weights=ResourceWeights(
                cpu=c.load_balancer_cpu_resource_weight,
                memory=c.load_balancer_memory_resource_weight,
                direct_memory=c.load_balancer_direct_memory_resource_weight,
                bandwidth_in=c.load_balancer_bandwidth_in_resource_weight,
                bandwidth_out=c.load_balancer_bandwidth_out_resource_weight,
            ),
            bundle_unload_min_throughput_mb=c.load_balancer_bundle_unload_min_throughput_threshold_mb,
            lower_boundary_shedding_enabled=c.lower_boundary_shedding_enabled,
            average_usage_difference_pct=c.load_balancer_average_resource_usage_difference_threshold_pct,
            msg_rate_difference_pct=c.load_balancer_msg_rate_difference_shedder_threshold,
            msg_throughput_multiplier_difference=c.load_balancer_msg_throughput_multiplier_difference_shedder_threshold,
            max_unload_percentage=c.max_unload_percentage,
            min_unload_message=c.min_unload_message,
            min_unload_message_throughput=c.min_unload_message_throughput,
            max_unload_bundle_num_per_shedding=c.max_unload_bundle_num_per_shedding,
            avg_shedder_low_threshold=c.load_balancer_avg_shedder_low_threshold,
            avg_shedder_high_threshold=c.load_balancer_avg_shedder_high_threshold,
            avg_shedder_hit_count_low_threshold=c.load_balancer_avg_shedder_hit_count_low_threshold,
            avg_shedder_hit_count_high_threshold=c.load_balancer_avg_shedder_hit_count_high_threshold,
            distribute_bundles_evenly=c.load_balancer_distribute_bundles_evenly_enabled,
            broker_max_topics=c.load_balancer_broker_max_topics,
            resource_quota_update_interval_minutes=c.load_balancer_resource_quota_update_interval_minutes,
            auto_bundle_split_enabled=c.load_balancer_auto_bundle_split_enabled,
            auto_unload_split_bundles=c.load_balancer_auto_unload_split_bundles_enabled,
            bundle_max_topics=c.load_balancer_namespace_bundle_max_topics,
            bundle_max_sessions=c.load_balancer_namespace_bundle_max_sessions,
            bundle_max_msg_rate=c.load_balancer_namespace_bundle_max_msg_rate,
            bundle_max_bandwidth_mbytes=c.load_balancer_namespace_bundle_max_bandwidth_mbytes,
            namespace_maximum_bundles=c.load_balancer_namespace_maximum_bundles,
            nic_speed_gbps=c.load_balancer_override_broker_nic_speed_gbps,
        )
