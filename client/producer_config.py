"""ProducerConfig: what ``create_producer`` takes, with the official ``pulsar.asyncio`` defaults.

Each default is Pulsar's (reference pulsar-surface B.2, internals §5.6); where minipulsar
differs it says so. ``message_routing_mode``, ``max_pending_messages_across_partitions``,
``hashing_scheme``, ``message_router`` and ``lazy_start_partitioned_producers`` concern
partitioned topics (:mod:`client.partitioned_producer`); a single-topic producer accepts and
ignores them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from minipulsar.client.enums import BatchingType, CompressionType
from minipulsar.protocol import compression

MAX_MESSAGE_SIZE_BYTES = 5 * 1024 * 1024
"""Pulsar's ``maxMessageSize`` (5 MiB): a larger message is refused before it is queued (the
broker's frames are 5 MiB + 64 KiB)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerConfig:
    producer_name: str | None = None
    """None: the broker names the producer (``<cluster>-<n>``)."""
    initial_sequence_id: int | None = None
    """None: continue after the ``last_sequence_id`` the broker reports for this name (or 0)."""
    send_timeout_millis: int = 30_000
    """A message without a receipt after this long fails with Timeout; 0: never."""
    compression_type: CompressionType = CompressionType.NONE
    max_pending_messages: int = 1000
    """Messages taken but not yet answered; 0: bounded only by the client's memory limit."""
    max_pending_messages_across_partitions: int = 50_000
    block_if_queue_full: bool = True
    """``pulsar.asyncio``'s default: a full queue makes the send wait (in order); False fails it
    with ProducerQueueIsFull at once (the default of the Java and the sync Python clients)."""
    batching_enabled: bool = True
    """True for the asyncio API (the official sync API defaults to False)."""
    batching_max_messages: int = 1000
    batching_max_allowed_size_in_bytes: int = 128 * 1024
    batching_max_publish_delay_ms: float = 10
    batching_type: BatchingType = BatchingType.Default
    chunking_enabled: bool = False
    message_routing_mode: Any = None
    hashing_scheme: Any = None
    message_router: Any = None
    lazy_start_partitioned_producers: bool = False
    properties: dict[str, str] | None = None
    access_mode: Any = None

    def __post_init__(self) -> None:
        if self.send_timeout_millis < 0:
            raise ValueError(f"send_timeout_millis must be >= 0, got {self.send_timeout_millis}")
        if self.max_pending_messages < 0:
            raise ValueError(f"max_pending_messages must be >= 0, got {self.max_pending_messages}")
        if self.batching_max_messages < 1 or self.batching_max_allowed_size_in_bytes < 1:
            raise ValueError("batching_max_messages and batching_max_allowed_size_in_bytes must be >= 1")
        if self.batching_max_publish_delay_ms < 0:
            raise ValueError(f"batching_max_publish_delay_ms must be >= 0, got {self.batching_max_publish_delay_ms}")
        if self.batching_enabled and self.chunking_enabled:
            raise ValueError("Batching and chunking of messages can't be enabled together.")
        if self.chunking_enabled:
            raise ValueError("chunking is not supported by minipulsar")
        if self.initial_sequence_id is not None and self.initial_sequence_id < -1:
            raise ValueError(f"initial_sequence_id must be >= -1, got {self.initial_sequence_id}")
        if not isinstance(self.compression_type, CompressionType):
            object.__setattr__(self, "compression_type", CompressionType(str(self.compression_type).upper()))
        compression.check_codec(self.compression_type.value)
        if not isinstance(self.batching_type, BatchingType):
            object.__setattr__(self, "batching_type", BatchingType(self.batching_type))

    @classmethod
    def from_settings(cls, producer_name: str | None = None, **settings: Any) -> ProducerConfig:
        """From ``create_producer``'s keyword arguments; unknown names raise TypeError."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise TypeError(f"create_producer() got unexpected keyword arguments: {', '.join(unknown)}")
        return cls(producer_name=producer_name, **settings)

    @property
    def codec(self) -> compression.CompressionCodec:
        """The batch codec (checked in ``__post_init__``: SNAPPY never gets here)."""
        return compression.check_codec(self.compression_type.value)
