"""A broker's config (``broker.conf``, Pulsar's key names)."""

from __future__ import annotations

from dataclasses import dataclass

from minipulsar.config.settings import Alias, setting


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    """A broker; keys follow Pulsar's broker.conf (the BookKeeper client's as Pulsar names them)."""

    bind_address: str = setting(
        "bindAddress",
        "127.0.0.1",
        doc="Address the broker listens on (client port and HTTP).",
        upstream="Pulsar's default: 0.0.0.0 (every interface).",
    )
    advertised_address: str | None = setting(
        "advertisedAddress",
        None,
        doc="Host name or address the broker gives clients and other brokers; empty: bindAddress.",
        upstream="Pulsar's default: the host's canonical name.",
    )
    port: int = setting(
        "brokerServicePort", 6650, doc="Port clients connect to; 0 picks a free one.", min_value=0, max_value=65535
    )
    http_port: int = setting(
        "webServicePort",
        8080,
        doc="Port of the admin REST API and /metrics; 0 picks a free one.",
        min_value=0,
        max_value=65535,
    )
    metadata_url: str = setting(
        "metadataStoreUrl",
        "metastore://127.0.0.1:6680",
        doc="The metadata store: metastore://host:port, zk:host:port[,host:port][/chroot] or memory://name.",
        upstream="Pulsar's default: none (a ZooKeeper, etcd, Oxia or RocksDB URL is required).",
    )
    cluster_name: str = setting(
        "clusterName",
        "standalone",
        doc="Name of the cluster this broker belongs to.",
        upstream="Pulsar's default: none (required).",
    )
    session_timeout_ms: int = setting(
        "metadataStoreSessionTimeoutMillis",
        30_000,
        doc="Metadata session timeout (ms): a broker silent this long loses its ephemeral keys.",
        aliases=(Alias("zooKeeperSessionTimeoutMillis", unset=("-1", "0")),),
        min_value=100,
    )
    """Pulsar still reads its older ``zooKeeperSessionTimeoutMillis`` when it is above 0."""
    keepalive_interval_s: int = setting(
        "keepAliveIntervalSeconds",
        30,
        doc="Keep-alive interval (s) of client connections: idle ones get a PING, silent ones are closed.",
        min_value=1,
    )
    max_message_size: int = setting(
        "maxMessageSize",
        5 * 1024 * 1024,
        doc="Largest message (bytes) a producer may send; a frame may be 64 KiB larger.",
        upstream="Pulsar's frames may be 10 KiB larger than maxMessageSize.",
        min_value=1024,
    )
    ensemble_size: int = setting(
        "managedLedgerDefaultEnsembleSize", 2, doc="Bookies a topic's ledger is spread over (E).", min_value=1
    )
    write_quorum: int = setting(
        "managedLedgerDefaultWriteQuorum", 2, doc="Bookies each entry is written to (Qw).", min_value=1
    )
    ack_quorum: int = setting(
        "managedLedgerDefaultAckQuorum",
        2,
        doc="Bookies that must acknowledge an entry before it is acknowledged (Qa).",
        min_value=1,
    )
    digest_type: str = setting(
        "managedLedgerDigestType",
        "CRC32C",
        doc="Digest of every entry, computed by the writer and checked by every reader.",
        choices=("CRC32C", "CRC32", "MAC", "DUMMY"),
    )
    password: str = setting(
        "managedLedgerPassword",
        "",
        doc="Password of new ledgers; bookies refuse writes and fencing without its master key.",
    )
    bookkeeper_timeout_s: int = setting(
        "bookkeeperClientTimeoutInSeconds", 30, doc="Timeout (s) of a BookKeeper add or read.", min_value=1
    )
    ensemble_placement_policy: str = setting(
        "ensemblePlacementPolicy",
        "RackawareEnsemblePlacementPolicy",
        doc="How the BookKeeper client picks a ledger's bookies (short class name).",
        upstream="BookKeeper client's key, unset in Pulsar's broker.conf; LoadAware is minipulsar's.",
        choices=(
            "DefaultEnsemblePlacementPolicy",
            "RackawareEnsemblePlacementPolicy",
            "LoadAwareEnsemblePlacementPolicy",
        ),
    )
    """Pulsar's default is rack-aware (``bookkeeperClientRackawarePolicyEnabled=true``), which is
    random while every bookie is in one rack; LoadAwareEnsemblePlacementPolicy follows
    BookKeeper's proposal BP-65."""
    bookie_load_poll_interval_s: int = setting(
        "bookieLoadPollIntervalSeconds",
        5,
        doc="How often (s) the load-aware placement polls each bookie's load report (BOOKIE_INFO).",
        upstream="minipulsar's own key.",
        min_value=1,
    )
    speculative_read_timeout_ms: int = setting(
        "bookkeeperClientSpeculativeReadTimeoutInMillis",
        0,
        doc="After this long (ms) without an answer, a read also asks the next replica; 0: off.",
        min_value=0,
    )
    health_check_enabled: bool = setting(
        "bookkeeperClientHealthCheckEnabled",
        True,
        doc="Quarantine bookies with too many errors: no new ledgers are placed on them meanwhile.",
    )
    health_check_interval_s: int = setting(
        "bookkeeperClientHealthCheckIntervalSeconds", 60, doc="Length (s) of a health-check interval.", min_value=1
    )
    health_check_error_threshold: int = setting(
        "bookkeeperClientHealthCheckErrorThresholdPerInterval",
        5,
        doc="Errors in one interval that quarantine a bookie.",
        min_value=1,
    )
    quarantine_time_s: int = setting(
        "bookkeeperClientHealthCheckQuarantineTimeInSeconds", 1800, doc="How long (s) a quarantine lasts.", min_value=0
    )
    quarantine_ratio: float = setting(
        "bookkeeperClientQuarantineRatio",
        1.0,
        doc="Probability that a faulty bookie is quarantined (so brokers do not all drop it at once).",
        min_value=0.0,
        max_value=1.0,
    )
    """BookKeeper PR 2327."""
    max_pending_add_bytes_per_ledger: int = setting(
        "bookkeeperClientMaxPendingAddBytesPerLedger",
        16 * 1024 * 1024,
        doc="Add bytes of one ledger not yet answered by every replica; beyond it, adds wait.",
        upstream="minipulsar's own key.",
        min_value=1024,
    )
    max_pending_add_bytes: int = setting(
        "bookkeeperClientMaxPendingAddBytes",
        128 * 1024 * 1024,
        doc="The same bound for the whole BookKeeper client (every ledger of the broker).",
        upstream="minipulsar's own key.",
        min_value=1024,
    )
    dispatcher_max_read_batch_size: int = setting(
        "dispatcherMaxReadBatchSize", 100, doc="Most entries read from the bookies at once for dispatch.", min_value=1
    )
    dispatcher_max_read_size_bytes: int = setting(
        "dispatcherMaxReadSizeBytes",
        5 * 1024 * 1024,
        doc="Most bytes read from the bookies at once for dispatch.",
        min_value=1,
    )
    dispatcher_max_round_robin_batch_size: int = setting(
        "dispatcherMaxRoundRobinBatchSize",
        20,
        doc="Most entries sent to one consumer of a shared subscription in a turn.",
        min_value=1,
    )
    precise_dispatcher_flow_control: bool = setting(
        "preciseDispatcherFlowControl",
        False,
        doc="Count permits by the messages in each entry instead of by an average batch size.",
    )
    acknowledgment_at_batch_index_level_enabled: bool = setting(
        "acknowledgmentAtBatchIndexLevelEnabled",
        False,
        doc="Keep official clients' acks of single messages of a batch; a redelivery skips them.",
    )
    max_unacked_messages_per_consumer: int = setting(
        "maxUnackedMessagesPerConsumer",
        50_000,
        doc="Unacknowledged messages after which a shared-subscription consumer gets no more; 0: no limit.",
        min_value=0,
    )
    max_unacked_messages_per_subscription: int = setting(
        "maxUnackedMessagesPerSubscription",
        200_000,
        doc="Unacknowledged messages after which a shared subscription gets no more; 0: no limit.",
        min_value=0,
    )
    key_shared_replica_points: int = setting(
        "subscriptionKeySharedConsistentHashingReplicaPoints",
        100,
        doc="Points per consumer on a Key_Shared subscription's consistent-hashing ring.",
        min_value=1,
    )
    active_consumer_failover_delay_ms: int = setting(
        "activeConsumerFailoverDelayTimeMillis",
        1000,
        doc="Delay (ms) before dispatching to a failover subscription's new active consumer.",
        min_value=0,
    )
    subscription_redelivery_tracker_enabled: bool = setting(
        "subscriptionRedeliveryTrackerEnabled", True, doc="Tell consumers how often each message was redelivered."
    )
    managed_ledger_max_entries_per_ledger: int = setting(
        "managedLedgerMaxEntriesPerLedger",
        50_000,
        doc="Entries after which a topic rolls over to a new ledger (past the minimum rollover time).",
        min_value=1,
    )
    managed_ledger_max_size_per_ledger_mb: int = setting(
        "managedLedgerMaxSizePerLedgerMbytes",
        2048,
        doc="Size (MB) after which a topic rolls over to a new ledger (past the minimum rollover time).",
        min_value=1,
    )
    managed_ledger_min_rollover_minutes: float = setting(
        "managedLedgerMinLedgerRolloverTimeMinutes",
        10.0,
        doc="Shortest life (minutes) of a topic's ledger before a size or entry rollover.",
        min_value=0,
    )
    managed_ledger_max_rollover_minutes: float = setting(
        "managedLedgerMaxLedgerRolloverTimeMinutes",
        240.0,
        doc="Longest life (minutes) of a topic's ledger before it rolls over.",
        min_value=0,
    )
    retention_time_minutes: int = setting(
        "defaultRetentionTimeInMinutes",
        0,
        doc="How long (minutes) consumed messages are kept; 0: none, -1: forever.",
        min_value=-1,
    )
    """0: a ledger is deleted once every durable cursor consumed it."""
    retention_size_mb: int = setting(
        "defaultRetentionSizeInMB",
        0,
        doc="How much (MB) of consumed messages is kept per topic; 0: none, -1: no limit.",
        min_value=-1,
    )
    retention_check_interval_s: int = setting(
        "retentionCheckIntervalInSeconds",
        120,
        doc="How often (s) consumed ledgers are checked for trimming.",
        min_value=1,
    )
    max_unacked_ranges_to_persist: int = setting(
        "managedLedgerMaxUnackedRangesToPersist",
        10_000,
        doc="Acknowledged ranges past the mark-delete position a cursor persists; acks beyond are redelivered.",
        min_value=1,
    )
    mark_delete_rate_limit: float = setting(
        "managedLedgerDefaultMarkDeleteRateLimit",
        1.0,
        doc="Cursor position writes per second per cursor.",
        min_value=0,
    )
    """Acks still wait for durability (see cursor.py)."""
    cursor_max_entries_per_ledger: int = setting(
        "managedLedgerCursorMaxEntriesPerLedger",
        50_000,
        doc="Positions a cursor appends to its cursor ledger before it rolls over to a new one.",
        min_value=1,
    )
    cursor_rollover_time_s: int = setting(
        "managedLedgerCursorRolloverTimeInSeconds",
        14_400,
        doc="Age (s) of a cursor ledger after which the cursor's next position write rolls over to a new one.",
        min_value=0,
    )
    max_unacked_ranges_to_persist_in_metadata_store: int = setting(
        "managedLedgerMaxUnackedRangesToPersistInMetadataStore",
        1_000,
        doc="At a clean close, a cursor with more acknowledged ranges keeps its position in its cursor ledger.",
        min_value=0,
    )
    """At most that many: the position goes into the metadata key and the cursor ledger is deleted
    (broker/managed_ledger/cursor_ledger.py)."""
    cursor_backlogged_threshold: int = setting(
        "managedLedgerCursorBackloggedThreshold",
        1000,
        doc="Entries behind after which a cursor counts as backlogged (inactive for the cache).",
        min_value=1,
    )
    cache_eviction_watermark: float = setting(
        "managedLedgerCacheEvictionWatermark",
        0.9,
        doc="Fraction of managedLedgerCacheSizeMB an eviction brings the entry cache down to.",
        min_value=0.0,
        max_value=1.0,
    )
    cache_eviction_interval_ms: int = setting(
        "managedLedgerCacheEvictionIntervalMs", 10, doc="How often (ms) the entry cache is trimmed.", min_value=1
    )
    cache_eviction_time_threshold_ms: int = setting(
        "managedLedgerCacheEvictionTimeThresholdMillis",
        1000,
        doc="Entries cached longer than this (ms) are evicted.",
        min_value=0,
    )
    cache_eviction_by_mark_deleted_position: bool = setting(
        "cacheEvictionByMarkDeletedPosition",
        False,
        doc="Evict cached entries up to the slowest mark-delete position, not the slowest read position.",
    )
    non_durable_cursors_inactive: bool = setting(
        "minipulsarNonDurableCursorsInactive",
        False,
        doc="Readers' non-durable cursors never count as active for the entry cache (Pulsar before 2.5.2).",
        upstream="minipulsar's own key: the tuning lab's way to show the behaviour Pulsar PR 6769 fixed.",
    )
    """Off (the default) is today's Pulsar: a Reader near the tail keeps written entries cached. On,
    a topic read only by Readers caches nothing and every read goes to the bookies."""
    max_reads_in_flight_size_mb: int = setting(
        "managedLedgerMaxReadsInFlightSizeInMB",
        0,
        doc="Bytes (MB) of catch-up reads in flight from the bookies; 0: no bound.",
        min_value=0,
    )
    max_message_publish_buffer_size_mb: int = setting(
        "maxMessagePublishBufferSizeInMB",
        64,
        doc="Broker-wide MB of publishes not yet persisted; past it, producers' connections pause; -1: off.",
        upstream="Pulsar's default: half the direct memory, at least 64.",
        min_value=-1,
    )
    deduplication_enabled: bool = setting(
        "brokerDeduplicationEnabled",
        False,
        doc="Drop messages already stored (by producer name and sequence id), unless a namespace says otherwise.",
    )
    deduplication_entries_interval: int = setting(
        "brokerDeduplicationEntriesInterval",
        1000,
        doc="Entries between snapshots of a topic's deduplication state.",
        min_value=1,
    )
    deduplication_snapshot_interval_s: int = setting(
        "brokerDeduplicationSnapshotIntervalSeconds",
        120,
        doc="Seconds between snapshots of a changed deduplication state (0 = none by time).",
        min_value=0,
    )
    deduplication_max_producers: int = setting(
        "brokerDeduplicationMaxNumberOfProducers",
        10_000,
        doc="Producers whose deduplication state a topic keeps.",
        min_value=1,
    )
    default_num_partitions: int = setting(
        "defaultNumPartitions",
        1,
        doc="Partitions of a topic created automatically as partitioned.",
        min_value=1,
    )
    allow_auto_topic_creation_type: str = setting(
        "allowAutoTopicCreationType",
        "non-partitioned",
        doc="Kind of topic created automatically on first use.",
        choices=("non-partitioned", "partitioned"),
    )
    # -- namespaces, bundles, ownership, lookup (broker/namespace/ reads these) ----------------------
    default_number_of_namespace_bundles: int = setting(
        "defaultNumberOfNamespaceBundles",
        4,
        doc="Bundles of a namespace created without an explicit count.",
        min_value=1,
        max_value=1024,
    )
    default_namespace_bundle_split_algorithm: str = setting(
        "defaultNamespaceBundleSplitAlgorithm",
        "range_equally_divide",
        doc="How a bundle is split when no algorithm is named.",
        choices=("range_equally_divide", "topic_count_equally_divide"),
    )
    supported_namespace_bundle_split_algorithms: tuple[str, ...] = setting(
        "supportedNamespaceBundleSplitAlgorithms",
        ("range_equally_divide", "topic_count_equally_divide"),
        doc="Split algorithms an admin request may name.",
        upstream="Pulsar also lists specified_positions_divide and flow_or_qps_equally_divide.",
    )
    namespace_bundle_unloading_timeout_ms: int = setting(
        "namespaceBundleUnloadingTimeoutMs",
        60_000,
        doc="Longest (ms) the unloading of a bundle may take.",
        min_value=1,
    )
    max_concurrent_lookup_request: int = setting(
        "maxConcurrentLookupRequest", 50_000, doc="Topic lookups the broker serves at once.", min_value=1
    )
    max_concurrent_topic_load_request: int = setting(
        "maxConcurrentTopicLoadRequest", 5_000, doc="Topics the broker loads at once.", min_value=1
    )
    stats_update_frequency_s: float = setting(
        "statsUpdateFrequencyInSecs",
        60.0,
        doc="How often (s) topic rates (msgRateIn …) are computed from their counters; fractions allowed.",
        min_value=0.01,
    )
    managed_ledger_cache_size_mb: int = setting(
        "managedLedgerCacheSizeMB",
        64,
        doc="Entry cache (MB) shared by every topic of the broker.",
        upstream="Pulsar's default: a fifth of the direct memory, at least 64.",
        min_value=0,
    )
    """64 MB suits a laptop-sized standalone."""
    max_pending_publish_requests_per_connection: int = setting(
        "maxPendingPublishRequestsPerConnection",
        1000,
        doc="Publishes of one connection not yet answered; past it, reading from the connection stops.",
        min_value=1,
    )
    # -- load balancer (broker/loadbalance/settings.py reads these) ---------------------------------
    load_balancer_enabled: bool = setting(
        "loadBalancerEnabled", True, doc="Report load and, on the leader broker, place bundles by it."
    )
    load_balancer_shedding_enabled: bool = setting(
        "loadBalancerSheddingEnabled", True, doc="Unload bundles from overloaded brokers."
    )
    load_balancer_load_shedding_strategy: str = setting(
        "loadBalancerLoadSheddingStrategy",
        "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
        doc="Which bundles to unload: Pulsar's class name or its short name.",
        choices=tuple(
            f"{prefix}{name}"
            for name in ("OverloadShedder", "ThresholdShedder", "UniformLoadShedder", "AvgShedder")
            for prefix in ("", "org.apache.pulsar.broker.loadbalance.impl.")
        ),
    )
    """ThresholdShedder is Pulsar's default since 2.10."""
    load_balancer_load_placement_strategy: str = setting(
        "loadBalancerLoadPlacementStrategy",
        "org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate",
        doc="Which broker gets an unowned bundle: Pulsar's class name or its short name.",
        choices=tuple(
            f"{prefix}{name}"
            for name in ("LeastLongTermMessageRate", "LeastResourceUsageWithWeight", "AvgShedder")
            for prefix in ("", "org.apache.pulsar.broker.loadbalance.impl.")
        ),
    )
    load_balancer_report_update_threshold_pct: float = setting(
        "loadBalancerReportUpdateThresholdPercentage",
        10.0,
        doc="Change (%) in a broker's load that makes it rewrite its load report.",
        min_value=0,
    )
    load_balancer_report_update_min_interval_ms: int = setting(
        "loadBalancerReportUpdateMinIntervalMillis",
        5000,
        doc="How often (ms) a broker checks whether its load report must be rewritten.",
        min_value=10,
    )
    """Pulsar checks at a fixed 5 s."""
    load_balancer_report_update_max_interval_minutes: float = setting(
        "loadBalancerReportUpdateMaxIntervalMinutes",
        15.0,
        doc="Longest (minutes) a load report goes unwritten.",
        min_value=0,
    )
    load_balancer_host_usage_check_interval_minutes: float = setting(
        "loadBalancerHostUsageCheckIntervalMinutes",
        1.0,
        doc="How often (minutes) the host's CPU, memory and network usage is sampled.",
        min_value=0.0001,
    )
    load_balancer_shedding_interval_minutes: float = setting(
        "loadBalancerSheddingIntervalMinutes",
        1.0,
        doc="How often (minutes) the leader looks for bundles to unload.",
        min_value=0.0001,
    )
    load_balancer_shedding_grace_period_minutes: float = setting(
        "loadBalancerSheddingGracePeriodMinutes",
        30.0,
        doc="A bundle just unloaded is not unloaded again for this long (minutes).",
        min_value=0,
    )
    load_balancer_broker_overloaded_threshold_pct: float = setting(
        "loadBalancerBrokerOverloadedThresholdPercentage",
        85.0,
        doc="Usage (%) above which a broker is overloaded.",
        min_value=0,
    )
    load_balancer_broker_threshold_shedder_pct: float = setting(
        "loadBalancerBrokerThresholdShedderPercentage",
        10.0,
        doc="ThresholdShedder: usage (points) above the cluster's average that makes a broker shed.",
        min_value=0,
    )
    load_balancer_history_resource_percentage: float = setting(
        "loadBalancerHistoryResourcePercentage",
        0.9,
        doc="ThresholdShedder: weight of the past in a broker's averaged usage.",
        min_value=0.0,
        max_value=1.0,
    )
    load_balancer_cpu_resource_weight: float = setting(
        "loadBalancerCPUResourceWeight", 1.0, doc="Weight of CPU usage in a broker's load.", min_value=0
    )
    load_balancer_memory_resource_weight: float = setting(
        "loadBalancerMemoryResourceWeight",
        1.0,
        doc="Weight of heap memory usage in a broker's load.",
        upstream="Pulsar's default: 0 (since 4.0).",
        min_value=0,
    )
    load_balancer_direct_memory_resource_weight: float = setting(
        "loadBalancerDirectMemoryResourceWeight",
        1.0,
        doc="Weight of direct memory usage in a broker's load.",
        upstream="Pulsar's default: 0 (since 3.2).",
        min_value=0,
    )
    load_balancer_bandwidth_in_resource_weight: float = setting(
        "loadBalancerBandwidthInResourceWeight",
        1.0,
        doc="Weight of inbound network usage in a broker's load.",
        aliases=(Alias("loadBalancerBandwithInResourceWeight"),),
        min_value=0,
    )
    """Pulsar before 4.0 spelled it ``…Bandwith…``, and still reads that."""
    load_balancer_bandwidth_out_resource_weight: float = setting(
        "loadBalancerBandwidthOutResourceWeight",
        1.0,
        doc="Weight of outbound network usage in a broker's load.",
        aliases=(Alias("loadBalancerBandwithOutResourceWeight"),),
        min_value=0,
    )
    load_balancer_bundle_unload_min_throughput_threshold_mb: float = setting(
        "loadBalancerBundleUnloadMinThroughputThreshold",
        10.0,
        doc="ThresholdShedder: a broker sheds only bundles worth at least this much traffic (MB/s).",
        min_value=0,
    )
    lower_boundary_shedding_enabled: bool = setting(
        "lowerBoundarySheddingEnabled",
        False,
        doc="ThresholdShedder: also shed from the busiest broker when one is far below the average.",
    )
    load_balancer_average_resource_usage_difference_threshold_pct: float = setting(
        "loadBalancerAverageResourceUsageDifferenceThresholdPercentage",
        10.0,
        doc="LeastResourceUsageWithWeight: brokers within this (points) of the average are candidates.",
        min_value=0,
    )
    load_balancer_msg_rate_difference_shedder_threshold: float = setting(
        "loadBalancerMsgRateDifferenceShedderThreshold",
        50.0,
        doc="UniformLoadShedder: message-rate gap (%) between the busiest and idlest broker that sheds.",
    )
    load_balancer_msg_throughput_multiplier_difference_shedder_threshold: float = setting(
        "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold",
        4.0,
        doc="UniformLoadShedder: throughput ratio between the busiest and idlest broker that sheds.",
    )
    max_unload_percentage: float = setting(
        "maxUnloadPercentage",
        0.2,
        doc="UniformLoadShedder: share of the gap moved in one round.",
        min_value=0.0,
        max_value=1.0,
    )
    min_unload_message: float = setting(
        "minUnloadMessage", 1000.0, doc="UniformLoadShedder: least message rate worth moving.", min_value=0
    )
    min_unload_message_throughput: float = setting(
        "minUnloadMessageThroughput",
        1024.0 * 1024,
        doc="UniformLoadShedder: least throughput (bytes/s) worth moving.",
        min_value=0,
    )
    max_unload_bundle_num_per_shedding: int = setting(
        "maxUnloadBundleNumPerShedding",
        -1,
        doc="UniformLoadShedder: most bundles unloaded in one round; -1: no limit.",
        min_value=-1,
    )
    load_balancer_avg_shedder_low_threshold: float = setting(
        "loadBalancerAvgShedderLowThreshold",
        15.0,
        doc="AvgShedder: score gap (points) that sheds after loadBalancerAvgShedderHitCountLowThreshold hits.",
        min_value=0,
    )
    load_balancer_avg_shedder_high_threshold: float = setting(
        "loadBalancerAvgShedderHighThreshold",
        40.0,
        doc="AvgShedder: score gap (points) that sheds after loadBalancerAvgShedderHitCountHighThreshold hits.",
        min_value=0,
    )
    load_balancer_avg_shedder_hit_count_low_threshold: int = setting(
        "loadBalancerAvgShedderHitCountLowThreshold",
        8,
        doc="AvgShedder: consecutive rounds over the low threshold that shed.",
        min_value=1,
    )
    load_balancer_avg_shedder_hit_count_high_threshold: int = setting(
        "loadBalancerAvgShedderHitCountHighThreshold",
        2,
        doc="AvgShedder: consecutive rounds over the high threshold that shed.",
        min_value=1,
    )
    load_balancer_distribute_bundles_evenly_enabled: bool = setting(
        "loadBalancerDistributeBundlesEvenlyEnabled",
        True,
        doc="Spread a namespace's bundles evenly over the brokers before weighing their load.",
    )
    load_balancer_broker_max_topics: int = setting(
        "loadBalancerBrokerMaxTopics", 50_000, doc="Topics above which a broker gets no more bundles.", min_value=1
    )
    load_balancer_resource_quota_update_interval_minutes: float = setting(
        "loadBalancerResourceQuotaUpdateIntervalMinutes",
        15.0,
        doc="How often (minutes) the leader writes the bundles' load history to the metadata store.",
        min_value=0.0001,
    )
    load_balancer_auto_bundle_split_enabled: bool = setting(
        "loadBalancerAutoBundleSplitEnabled",
        False,
        doc="Split bundles past the loadBalancerNamespaceBundleMax* limits.",
        upstream="Pulsar's default: true.",
    )
    """Off here as the BIGO report recommends: a split disconnects clients."""
    load_balancer_auto_unload_split_bundles_enabled: bool = setting(
        "loadBalancerAutoUnloadSplitBundlesEnabled", True, doc="Unload the halves of a bundle just split."
    )
    load_balancer_namespace_bundle_max_topics: int = setting(
        "loadBalancerNamespaceBundleMaxTopics", 1000, doc="Topics above which a bundle is split.", min_value=1
    )
    load_balancer_namespace_bundle_max_sessions: int = setting(
        "loadBalancerNamespaceBundleMaxSessions",
        1000,
        doc="Producers and consumers above which a bundle is split; -1: no limit.",
        min_value=-1,
    )
    load_balancer_namespace_bundle_max_msg_rate: float = setting(
        "loadBalancerNamespaceBundleMaxMsgRate",
        30_000.0,
        doc="Message rate (in + out, per second) above which a bundle is split.",
        min_value=0,
    )
    load_balancer_namespace_bundle_max_bandwidth_mbytes: float = setting(
        "loadBalancerNamespaceBundleMaxBandwidthMbytes",
        100.0,
        doc="Throughput (in + out, MB/s) above which a bundle is split.",
        min_value=0,
    )
    load_balancer_namespace_maximum_bundles: int = setting(
        "loadBalancerNamespaceMaximumBundles", 128, doc="Most bundles a namespace is split into.", min_value=1
    )
    load_balancer_override_broker_nic_speed_gbps: float | None = setting(
        "loadBalancerOverrideBrokerNicSpeedGbps",
        None,
        doc="NIC capacity (Gbit/s) for the network usage; empty: the NICs' link speed, else 1.",
        min_value=0.000001,
    )
    expose_bundles_metrics_in_prometheus: bool = setting(
        "exposeBundlesMetricsInPrometheus", False, doc="Export each bundle's load on /metrics."
    )

    random_seed: int | None = setting(
        "minipulsarRandomSeed",
        None,
        doc="LAB ONLY: seed the BookKeeper client's placement and quarantine draws; empty: unseeded.",
        upstream="minipulsar's own key: the tuning lab's runs repeat their brokers' random choices.",
    )
    """The draws still follow the order of events, so a seeded run repeats a choice only when its
    events come in the same order; what the seed removes is the luck of independent draws."""

    diagnostics_file: str | None = setting(
        "minipulsarDiagnosticsFile",
        None,
        doc="BENCH ONLY: append stall events (GC, event-loop lag, flushes, rolls) to this JSONL file.",
        upstream="minipulsar's own key.",
    )
    """minipulsar/diagnostics.py; empty (the default): not recorded. Several processes may share a file."""

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
