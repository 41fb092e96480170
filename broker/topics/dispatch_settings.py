"""The broker settings a subscription's dispatcher runs by, taken once from BrokerConfig.

Invariant: a value, fixed for the subscription's life; each field names the config key it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

from minipulsar.config import BrokerConfig


@dataclass(frozen=True, slots=True)
class DispatchSettings:
    max_read_batch_size: int = 100
    """dispatcherMaxReadBatchSize: entries per read."""
    max_read_size_bytes: int = 5 * 1024 * 1024
    """dispatcherMaxReadSizeBytes: bytes per read (at least one entry is always read)."""
    max_round_robin_batch_size: int = 20
    """dispatcherMaxRoundRobinBatchSize: entries one Shared consumer gets per round-robin turn."""
    precise_flow_control: bool = False
    """preciseDispatcherFlowControl: turn message permits into entries by the average batch size."""
    max_unacked_per_consumer: int = 50_000
    """maxUnackedMessagesPerConsumer (Shared, Key_Shared); 0 = no limit."""
    max_unacked_per_subscription: int = 200_000
    """maxUnackedMessagesPerSubscription (Shared, Key_Shared); 0 = no limit."""
    key_shared_replica_points: int = 100
    """subscriptionKeySharedConsistentHashingReplicaPoints: ring points per Key_Shared consumer."""
    failover_delay_ms: int = 1000
    """activeConsumerFailoverDelayTimeMillis."""
    redelivery_tracker_enabled: bool = True
    """subscriptionRedeliveryTrackerEnabled: count redeliveries per entry (MESSAGE.redelivery_count)."""
    batch_index_ack_enabled: bool = False
    """acknowledgmentAtBatchIndexLevelEnabled: keep official clients' acks of part of a batch."""

    @classmethod
    def from_config(cls, config: BrokerConfig) -> DispatchSettings:
        return cls(
            max_read_batch_size=config.dispatcher_max_read_batch_size,
            max_read_size_bytes=config.dispatcher_max_read_size_bytes,
            max_round_robin_batch_size=config.dispatcher_max_round_robin_batch_size,
            precise_flow_control=config.precise_dispatcher_flow_control,
            max_unacked_per_consumer=config.max_unacked_messages_per_consumer,
            max_unacked_per_subscription=config.max_unacked_messages_per_subscription,
            key_shared_replica_points=config.key_shared_replica_points,
            failover_delay_ms=config.active_consumer_failover_delay_ms,
            redelivery_tracker_enabled=config.subscription_redelivery_tracker_enabled,
            batch_index_ack_enabled=config.acknowledgment_at_batch_index_level_enabled,
        )
