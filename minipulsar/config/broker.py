"""A broker's config (``broker.conf``, Pulsar's key names)."""

from __future__ import annotations

from dataclasses import dataclass

from minipulsar.config.settings import Alias, setting


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    bind_address: str = setting("bindAddress", "127.0.0.1")
    advertised_address: str | None = setting("advertisedAddress", None)
    port: int = setting("brokerServicePort", 6650, min_value=0, max_value=65535)
    http_port: int = setting("webServicePort", 8080, min_value=0, max_value=65535)
    metadata_url: str = setting("metadataStoreUrl", "metastore://127.0.0.1:6680")
    cluster_name: str = setting("clusterName", "standalone")
    session_timeout_ms: int = setting(
        "metadataStoreSessionTimeoutMillis",
        30_000,
        aliases=(Alias("zooKeeperSessionTimeoutMillis", unset=("-1", "0")),),
        min_value=100,
    )
    """Pulsar still reads its older ``zooKeeperSessionTimeoutMillis`` when it is above 0."""
    keepalive_interval_s: int = setting("keepAliveIntervalSeconds", 30, min_value=1)
    max_message_size: int = setting("maxMessageSize", 5 * 1024 * 1024, min_value=1024)
    ensemble_size: int = setting("managedLedgerDefaultEnsembleSize", 2, min_value=1)
    write_quorum: int = setting("managedLedgerDefaultWriteQuorum", 2, min_value=1)
    ack_quorum: int = setting("managedLedgerDefaultAckQuorum", 2, min_value=1)
    bookkeeper_timeout_s: int = setting("bookkeeperClientTimeoutInSeconds", 30, min_value=1)
    ensemble_placement_policy: str = setting(
        "ensemblePlacementPolicy",
        "RackawareEnsemblePlacementPolicy",
        choices=(
            "DefaultEnsemblePlacementPolicy",
            "RackawareEnsemblePlacementPolicy",
            "LoadAwareEnsemblePlacementPolicy",
        ),
    )
    """BookKeeper's ``ensemblePlacementPolicy`` (short class name). Pulsar's default is rack-aware
    (``bookkeeperClientRackawarePolicyEnabled=true``), which is random while every bookie is in
    one rack."""
    bookie_load_poll_interval_s: int = setting("bookieLoadPollIntervalSeconds", 5, min_value=1)
    """How often the load-aware policy polls each bookie's load report (BOOKIE_INFO)."""
    speculative_read_timeout_ms: int = setting("bookkeeperClientSpeculativeReadTimeoutInMillis", 0, min_value=0)
    """After this long without an answer, also ask the next replica; 0 = off (Pulsar's default)."""
    health_check_enabled: bool = setting("bookkeeperClientHealthCheckEnabled", True)
    health_check_interval_s: int = setting("bookkeeperClientHealthCheckIntervalSeconds", 60, min_value=1)
    health_check_error_threshold: int = setting("bookkeeperClientHealthCheckErrorThresholdPerInterval", 5, min_value=1)
    quarantine_time_s: int = setting("bookkeeperClientHealthCheckQuarantineTimeInSeconds", 1800, min_value=0)
    quarantine_ratio: float = setting("bookkeeperClientQuarantineRatio", 1.0, min_value=0.0, max_value=1.0)
    """BookKeeper PR 2327: quarantine a faulty bookie only with this probability."""
    max_pending_add_bytes_per_ledger: int = setting(
        "bookkeeperClientMaxPendingAddBytesPerLedger", 16 * 1024 * 1024, min_value=1024
    )
    """minipulsar's own: add bytes not yet answered by every replica, per ledger; beyond it adds wait."""
    max_pending_add_bytes: int = setting("bookkeeperClientMaxPendingAddBytes", 128 * 1024 * 1024, min_value=1024)
    """minipulsar's own: the same bound for the whole BookKeeper client (all ledgers of the broker)."""
    dispatcher_max_read_batch_size: int = setting("dispatcherMaxReadBatchSize", 100, min_value=1)
    dispatcher_max_read_size_bytes: int = setting("dispatcherMaxReadSizeBytes", 5 * 1024 * 1024, min_value=1)
    dispatcher_max_round_robin_batch_size: int = setting("dispatcherMaxRoundRobinBatchSize", 20, min_value=1)
    precise_dispatcher_flow_control: bool = setting("preciseDispatcherFlowControl", False)
    max_unacked_messages_per_consumer: int = setting("maxUnackedMessagesPerConsumer", 50_000, min_value=0)
    max_unacked_messages_per_subscription: int = setting("maxUnackedMessagesPerSubscription", 200_000, min_value=0)
    key_shared_replica_points: int = setting("subscriptionKeySharedConsistentHashingReplicaPoints", 100, min_value=1)
    active_consumer_failover_delay_ms: int = setting("activeConsumerFailoverDelayTimeMillis", 1000, min_value=0)
    subscription_redelivery_tracker_enabled: bool = setting("subscriptionRedeliveryTrackerEnabled", True)
    managed_ledger_max_entries_per_ledger: int = setting("managedLedgerMaxEntriesPerLedger", 50_000, min_value=1)
    managed_ledger_max_size_per_ledger_mb: int = setting("managedLedgerMaxSizePerLedgerMbytes", 2048, min_value=1)
    managed_ledger_min_rollover_minutes: float = setting("managedLedgerMinLedgerRolloverTimeMinutes", 10.0, min_value=0)
    managed_ledger_max_rollover_minutes: float = setting(
        "managedLedgerMaxLedgerRolloverTimeMinutes", 240.0, min_value=0
    )
    retention_time_minutes: int = setting("defaultRetentionTimeInMinutes", 0, min_value=-1)
    """0: no retention (delete a ledger once every durable cursor consumed it); -1: forever."""
    retention_size_mb: int = setting("defaultRetentionSizeInMB", 0, min_value=-1)
    retention_check_interval_s: int = setting("retentionCheckIntervalInSeconds", 120, min_value=1)
    max_unacked_ranges_to_persist: int = setting("managedLedgerMaxUnackedRangesToPersist", 10_000, min_value=1)
    mark_delete_rate_limit: float = setting("managedLedgerDefaultMarkDeleteRateLimit", 1.0, min_value=0)
    """Cursor position writes per second per cursor (acks still wait for durability; see cursor.py)."""
    cursor_backlogged_threshold: int = setting("managedLedgerCursorBackloggedThreshold", 1000, min_value=1)
    cache_eviction_watermark: float = setting("managedLedgerCacheEvictionWatermark", 0.9, min_value=0.0, max_value=1.0)
    cache_eviction_interval_ms: int = setting("managedLedgerCacheEvictionIntervalMs", 10, min_value=1)
    cache_eviction_time_threshold_ms: int = setting("managedLedgerCacheEvictionTimeThresholdMillis", 1000, min_value=0)
    cache_eviction_by_mark_deleted_position: bool = setting("cacheEvictionByMarkDeletedPosition", False)
    max_reads_in_flight_size_mb: int = setting("managedLedgerMaxReadsInFlightSizeInMB", 0, min_value=0)
    """0: no bound on catch-up read bytes in flight (Pulsar's default)."""
    max_message_publish_buffer_size_mb: int = setting("maxMessagePublishBufferSizeInMB", 64, min_value=-1)
    """Broker-wide bytes of publishes not yet persisted; -1 off. Pulsar: max(64, direct memory / 2)."""
    deduplication_enabled: bool = setting("brokerDeduplicationEnabled", False)
    deduplication_entries_interval: int = setting("brokerDeduplicationEntriesInterval", 1000, min_value=1)
    deduplication_max_producers: int = setting("brokerDeduplicationMaxNumberOfProducers", 10_000, min_value=1)
    default_num_partitions: int = setting("defaultNumPartitions", 1, min_value=1)
    allow_auto_topic_creation_type: str = setting(
        "allowAutoTopicCreationType", "non-partitioned", choices=("non-partitioned", "partitioned")
    )
    # -- namespaces, bundles, ownership, lookup (reference §2; broker/namespace/ reads these) -------
    default_number_of_namespace_bundles: int = setting(
        "defaultNumberOfNamespaceBundles", 4, min_value=1, max_value=1024
    )
    """Bundles of a namespace created without an explicit count (Pulsar 4's default)."""
    default_namespace_bundle_split_algorithm: str = setting(
        "defaultNamespaceBundleSplitAlgorithm",
        "range_equally_divide",
        choices=("range_equally_divide", "topic_count_equally_divide"),
    )
    supported_namespace_bundle_split_algorithms: tuple[str, ...] = setting(
        "supportedNamespaceBundleSplitAlgorithms", ("range_equally_divide", "topic_count_equally_divide")
    )
    namespace_bundle_unloading_timeout_ms: int = setting("namespaceBundleUnloadingTimeoutMs", 60_000, min_value=1)
    max_concurrent_lookup_request: int = setting("maxConcurrentLookupRequest", 50_000, min_value=1)
    max_concurrent_topic_load_request: int = setting("maxConcurrentTopicLoadRequest", 5_000, min_value=1)
    stats_update_frequency_s: float = setting("statsUpdateFrequencyInSecs", 60.0, min_value=0.01)
    """How often topic rates (msgRateIn …) are computed from their counters; fractions allowed."""
    managed_ledger_cache_size_mb: int = setting("managedLedgerCacheSizeMB", 64, min_value=0)
    """Pulsar's default is 1/5 of direct memory; 64 MB suits a laptop-sized standalone."""
    max_pending_publish_requests_per_connection: int = setting(
        "maxPendingPublishRequestsPerConnection", 1000, min_value=1
    )
    # -- load balancer (reference §1.12; broker/loadbalance/settings.py reads these) -----------------
    load_balancer_enabled: bool = setting("loadBalancerEnabled", True)
    load_balancer_shedding_enabled: bool = setting("loadBalancerSheddingEnabled", True)
    load_balancer_load_shedding_strategy: str = setting(
        "loadBalancerLoadSheddingStrategy",
        "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
        choices=tuple(
            f"{prefix}{name}"
            for name in ("OverloadShedder", "ThresholdShedder", "UniformLoadShedder", "AvgShedder")
            for prefix in ("", "org.apache.pulsar.broker.loadbalance.impl.")
        ),
    )
    """Pulsar's class name or its short name; ThresholdShedder is Pulsar's default since 2.10."""
    load_balancer_load_placement_strategy: str = setting(
        "loadBalancerLoadPlacementStrategy",
        "org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate",
        choices=tuple(
            f"{prefix}{name}"
            for name in ("LeastLongTermMessageRate", "LeastResourceUsageWithWeight", "AvgShedder")
            for prefix in ("", "org.apache.pulsar.broker.loadbalance.impl.")
        ),
    )
    load_balancer_report_update_threshold_pct: float = setting(
        "loadBalancerReportUpdateThresholdPercentage", 10.0, min_value=0
    )
    load_balancer_report_update_min_interval_ms: int = setting(
        "loadBalancerReportUpdateMinIntervalMillis", 5000, min_value=10
    )
    """How often a broker checks whether its load report must be rewritten (Pulsar: a fixed 5 s)."""
    load_balancer_report_update_max_interval_minutes: float = setting(
        "loadBalancerReportUpdateMaxIntervalMinutes", 15.0, min_value=0
    )
    load_balancer_host_usage_check_interval_minutes: float = setting(
        "loadBalancerHostUsageCheckIntervalMinutes", 1.0, min_value=0.0001
    )
    load_balancer_shedding_interval_minutes: float = setting(
        "loadBalancerSheddingIntervalMinutes", 1.0, min_value=0.0001
    )
    load_balancer_shedding_grace_period_minutes: float = setting(
        "loadBalancerSheddingGracePeriodMinutes", 30.0, min_value=0
    )
    load_balancer_broker_overloaded_threshold_pct: float = setting(
        "loadBalancerBrokerOverloadedThresholdPercentage", 85.0, min_value=0
    )
    load_balancer_broker_threshold_shedder_pct: float = setting(
        "loadBalancerBrokerThresholdShedderPercentage", 10.0, min_value=0
    )
    load_balancer_history_resource_percentage: float = setting(
        "loadBalancerHistoryResourcePercentage", 0.9, min_value=0.0, max_value=1.0
    )
    load_balancer_cpu_resource_weight: float = setting("loadBalancerCPUResourceWeight", 1.0, min_value=0)
    load_balancer_memory_resource_weight: float = setting("loadBalancerMemoryResourceWeight", 1.0, min_value=0)
    load_balancer_direct_memory_resource_weight: float = setting(
        "loadBalancerDirectMemoryResourceWeight", 1.0, min_value=0
    )
    load_balancer_bandwidth_in_resource_weight: float = setting(
        "loadBalancerBandwidthInResourceWeight",
        1.0,
        aliases=(Alias("loadBalancerBandwithInResourceWeight"),),
        min_value=0,
    )
    """Pulsar before 4.0 spelled it ``…Bandwith…``, and still reads that."""
    load_balancer_bandwidth_out_resource_weight: float = setting(
        "loadBalancerBandwidthOutResourceWeight",
        1.0,
        aliases=(Alias("loadBalancerBandwithOutResourceWeight"),),
        min_value=0,
    )
    load_balancer_bundle_unload_min_throughput_threshold_mb: float = setting(
        "loadBalancerBundleUnloadMinThroughputThreshold", 10.0, min_value=0
    )
    lower_boundary_shedding_enabled: bool = setting("lowerBoundarySheddingEnabled", False)
    load_balancer_average_resource_usage_difference_threshold_pct: float = setting(
        "loadBalancerAverageResourceUsageDifferenceThresholdPercentage", 10.0, min_value=0
    )
    load_balancer_msg_rate_difference_shedder_threshold: float = setting(
        "loadBalancerMsgRateDifferenceShedderThreshold", 50.0
    )
    load_balancer_msg_throughput_multiplier_difference_shedder_threshold: float = setting(
        "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold", 4.0
    )
    max_unload_percentage: float = setting("maxUnloadPercentage", 0.2, min_value=0.0, max_value=1.0)
    min_unload_message: float = setting("minUnloadMessage", 1000.0, min_value=0)
    min_unload_message_throughput: float = setting("minUnloadMessageThroughput", 1024.0 * 1024, min_value=0)
    max_unload_bundle_num_per_shedding: int = setting("maxUnloadBundleNumPerShedding", -1, min_value=-1)
    load_balancer_avg_shedder_low_threshold: float = setting("loadBalancerAvgShedderLowThreshold", 15.0, min_value=0)
    load_balancer_avg_shedder_high_threshold: float = setting("loadBalancerAvgShedderHighThreshold", 40.0, min_value=0)
    load_balancer_avg_shedder_hit_count_low_threshold: int = setting(
        "loadBalancerAvgShedderHitCountLowThreshold", 8, min_value=1
    )
    load_balancer_avg_shedder_hit_count_high_threshold: int = setting(
        "loadBalancerAvgShedderHitCountHighThreshold", 2, min_value=1
    )
    load_balancer_distribute_bundles_evenly_enabled: bool = setting("loadBalancerDistributeBundlesEvenlyEnabled", True)
    load_balancer_broker_max_topics: int = setting("loadBalancerBrokerMaxTopics", 50_000, min_value=1)
    load_balancer_resource_quota_update_interval_minutes: float = setting(
        "loadBalancerResourceQuotaUpdateIntervalMinutes", 15.0, min_value=0.0001
    )
    load_balancer_auto_bundle_split_enabled: bool = setting("loadBalancerAutoBundleSplitEnabled", False)
    """Pulsar's default is true; off here as the BIGO report recommends (a split disconnects clients)."""
    load_balancer_auto_unload_split_bundles_enabled: bool = setting("loadBalancerAutoUnloadSplitBundlesEnabled", True)
    load_balancer_namespace_bundle_max_topics: int = setting("loadBalancerNamespaceBundleMaxTopics", 1000, min_value=1)
    load_balancer_namespace_bundle_max_sessions: int = setting(
        "loadBalancerNamespaceBundleMaxSessions", 1000, min_value=-1
    )
    load_balancer_namespace_bundle_max_msg_rate: float = setting(
        "loadBalancerNamespaceBundleMaxMsgRate", 30_000.0, min_value=0
    )
    load_balancer_namespace_bundle_max_bandwidth_mbytes: float = setting(
        "loadBalancerNamespaceBundleMaxBandwidthMbytes", 100.0, min_value=0
    )
    load_balancer_namespace_maximum_bundles: int = setting("loadBalancerNamespaceMaximumBundles", 128, min_value=1)
    load_balancer_override_broker_nic_speed_gbps: float | None = setting(
        "loadBalancerOverrideBrokerNicSpeedGbps", None, min_value=0.000001
    )
    """NIC capacity for the bandwidth usage; unset: the physical NICs' link speed, else 1 Gbit/s."""
    expose_bundles_metrics_in_prometheus: bool = setting("exposeBundlesMetricsInPrometheus", False)

    def __post_init__(self) -> None:
        if not self.ensemble_size >= self.write_quorum >= self.ack_quorum:
            raise ValueError(
                "managedLedgerDefaultEnsembleSize >= managedLedgerDefaultWriteQuorum >= "
                f"managedLedgerDefaultAckQuorum must hold, got {self.ensemble_size}/"
                f"{self.write_quorum}/{self.ack_quorum}"
            )

    @property
    def max_frame_size(self) -> int:
        return self.max_message_size + 64 * 1024
