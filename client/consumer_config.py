"""ConsumerConfig and ConsumerBatchReceivePolicy: what ``subscribe`` takes, with Pulsar's defaults.

Arguments of the official client that concern features minipulsar does not have
(``schema``, ``is_read_compacted``, crypto, chunking, dead-letter, …) are accepted so that
ported programs run, and ignored; ``properties`` are kept locally only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from minipulsar.client.ack_grouping import DEFAULT_GROUP_TIME_MS
from minipulsar.client.enums import ConsumerType, InitialPosition


@dataclass(frozen=True, slots=True)
class ConsumerBatchReceivePolicy:
    """When ``batch_receive`` returns (Pulsar's ``BatchReceivePolicy.DEFAULT_POLICY``): once
    ``max_num_message`` messages (<= 0: no count limit; capped at the receiver queue size) or
    ``max_num_bytes`` of data (<= 0: no byte limit) are there, or ``timeout_ms`` after the call
    with whatever is there (possibly nothing). One message larger than ``max_num_bytes`` is
    still returned, alone (apache/pulsar#12262)."""

    max_num_message: int = -1
    max_num_bytes: int = 10 * 1024 * 1024
    timeout_ms: int = 100

    def __post_init__(self) -> None:
        if self.max_num_message <= 0 and self.max_num_bytes <= 0:
            raise ValueError("a batch receive policy needs max_num_message > 0 or max_num_bytes > 0")
        if self.timeout_ms < 0:
            raise ValueError(f"timeout_ms must be >= 0, got {self.timeout_ms}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerConfig:
    consumer_type: ConsumerType = ConsumerType.Exclusive
    receiver_queue_size: int = 1000
    consumer_name: str | None = None
    """None: 5 random characters, as Pulsar."""
    initial_position: InitialPosition = InitialPosition.Latest
    unacked_messages_timeout_ms: int | None = None
    negative_ack_redelivery_delay_ms: int = 60_000
    priority_level: int = 0
    acknowledgment_group_time_ms: float = DEFAULT_GROUP_TIME_MS
    ack_receipt_enabled: bool = True
    """True (minipulsar's default): ``acknowledge`` returns once the broker made the
    acknowledgement durable (Java's ``isAckReceiptEnabled``); False (Pulsar's default): once it
    is queued to be sent. See :mod:`client.ack_grouping`."""
    batch_receive_policy: ConsumerBatchReceivePolicy | None = None
    durable: bool = True
    """False: a non-durable subscription (what a Reader uses)."""
    start_message_id: list[int] | None = None
    """``[ledger_id, entry_id]`` where a non-durable subscription starts (inclusive)."""
    properties: dict[str, str] | None = None
    ignored: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Official-client arguments accepted for compatibility but without effect here."""

    def __post_init__(self) -> None:
        if self.receiver_queue_size < 0:
            raise ValueError(f"receiver_queue_size must be >= 0, got {self.receiver_queue_size}")
        if self.negative_ack_redelivery_delay_ms < 0:
            raise ValueError("negative_ack_redelivery_delay_ms must be >= 0")
        if self.unacked_messages_timeout_ms is not None and self.unacked_messages_timeout_ms < 0:
            raise ValueError("unacked_messages_timeout_ms must be >= 0")
        if self.acknowledgment_group_time_ms < 0:
            raise ValueError("acknowledgment_group_time_ms must be >= 0")
        if not isinstance(self.consumer_type, ConsumerType):
            object.__setattr__(self, "consumer_type", _consumer_type(self.consumer_type))
        if not isinstance(self.initial_position, InitialPosition):
            object.__setattr__(self, "initial_position", InitialPosition(self.initial_position))

    @classmethod
    def from_settings(cls, **settings: Any) -> ConsumerConfig:
        """From ``subscribe``'s keyword arguments: unknown official-client ones go to ``ignored``."""
        known = {f.name for f in dataclasses.fields(cls)} - {"ignored"}
        ignored = {k: v for k, v in settings.items() if k not in known}
        unknown = sorted(set(ignored) - IGNORED_ARGUMENTS)
        if unknown:
            raise TypeError(f"subscribe() got unexpected keyword arguments: {', '.join(unknown)}")
        return cls(**{k: v for k, v in settings.items() if k in known}, ignored=ignored)

    @property
    def queue_size(self) -> int:
        """The receiver queue as used for permits (a zero queue prefetches one message)."""
        return max(1, self.receiver_queue_size)


IGNORED_ARGUMENTS = frozenset(
    {
        "schema",
        "broker_consumer_stats_cache_time_ms",
        "is_read_compacted",
        "crypto_key_reader",
        "replicate_subscription_state_enabled",
        "max_pending_chunked_message",
        "auto_ack_oldest_chunked_message_on_queue_full",
        "start_message_id_inclusive",
        "key_shared_policy",
        "batch_index_ack_enabled",
        "regex_subscription_mode",
        "dead_letter_policy",
        "crypto_failure_action",
    }
)


def _consumer_type(value: Any) -> ConsumerType:
    for member in ConsumerType:
        if value in (member.value, member.name):
            return member
    raise ValueError(f"unknown consumer type {value!r}")
