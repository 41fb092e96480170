"""Which partition a message goes to: Pulsar's message routers and key hashes.

- A message with a key (``partition_key``) always goes to ``hash(key) % partitions``, whatever
  the mode — so that one key's messages stay in order on one partition. The hash is Pulsar's
  ``JavaStringHash`` (Java ``String.hashCode()`` over UTF-16 code units, & 0x7fffffff: the
  Java client's default ``hashingScheme``) or ``Murmur3_32Hash`` (murmur3 x86_32, seed 0, of
  the UTF-8 bytes, & 0x7fffffff). The C++-based Python client hashes with ``BoostHash``,
  which is not portable; we keep the Java client's choice.
- ``RoundRobinDistribution`` (default): without batching, the next partition for every
  message. With batching it is batch-friendly, as Pulsar's ``RoundRobinPartitionMessageRouter``:
  every message of a ``partition_switch_ms`` window goes to the same partition, so batches
  fill up; ``partition_switch_ms = max(1, batching_max_publish_delay_ms ×
  batchingPartitionSwitchFrequencyByPublishDelay (10))``. Both start at a random partition so
  that many producers do not pile onto partition 0.
- ``UseSinglePartition``: one partition picked at random when the producer is created.
- ``CustomPartition``: ``message_router(message, num_partitions) -> int`` decides (giving a
  ``message_router`` selects this mode, as in the official client); keyed messages too.
"""

from __future__ import annotations

import enum
import random
import time
from collections.abc import Callable
from typing import Any

import mmh3

BATCHING_PARTITION_SWITCH_FREQUENCY_BY_PUBLISH_DELAY = 10  # Pulsar: batchingPartitionSwitchFrequencyByPublishDelay


class PartitionsRoutingMode(enum.Enum):
    """The official client's names (``pulsar.PartitionsRoutingMode``)."""

    UseSinglePartition = "UseSinglePartition"
    RoundRobinDistribution = "RoundRobinDistribution"
    CustomPartition = "CustomPartition"


class HashingScheme(enum.Enum):
    """Pulsar's ``HashingScheme`` for keyed messages (``hashing_scheme`` of create_producer)."""

    JavaStringHash = "JavaStringHash"
    Murmur3_32Hash = "Murmur3_32Hash"


def java_string_hash(key: str) -> int:
    """Java ``key.hashCode() & Integer.MAX_VALUE``."""
    h = 0
    data = key.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFF_FFFF
    return h & 0x7FFF_FFFF


def murmur3_32_hash(key: str) -> int:
    """Pulsar's ``Murmur3_32Hash``: murmur3 x86_32 (seed 0) of the UTF-8 bytes, & 0x7fffffff."""
    return mmh3.hash(key.encode(), 0, signed=False) & 0x7FFF_FFFF


HASHES: dict[HashingScheme, Callable[[str], int]] = {
    HashingScheme.JavaStringHash: java_string_hash,
    HashingScheme.Murmur3_32Hash: murmur3_32_hash,
}


class OutgoingMessage:
    """What a custom ``message_router`` is shown: the accessors of ``pulsar.Message`` that
    exist before sending."""

    __slots__ = ("_content", "_event_timestamp", "_ordering_key", "_partition_key", "_properties")

    def __init__(
        self,
        content: bytes | None,
        properties: dict | None,
        partition_key: str | None,
        ordering_key: str | None,
        event_timestamp: int | None,
    ) -> None:
        self._content, self._properties = content, properties or {}
        self._partition_key, self._ordering_key = partition_key, ordering_key
        self._event_timestamp = event_timestamp or 0

    def data(self) -> bytes:
        return self._content or b""

    def value(self) -> bytes:
        return self.data()

    def properties(self) -> dict:
        return self._properties

    def partition_key(self) -> str | None:
        return self._partition_key

    def ordering_key(self) -> str | None:
        return self._ordering_key

    def event_timestamp(self) -> int:
        return self._event_timestamp


class MessageRouter:
    """Chooses a partition in ``[0, num_partitions)`` for each message."""

    def __init__(self, hashing_scheme: HashingScheme = HashingScheme.JavaStringHash) -> None:
        self._hash = HASHES[hashing_scheme]

    def choose_partition(self, message: OutgoingMessage, num_partitions: int) -> int:
        key = message.partition_key()
        if key:
            return self._hash(key) % num_partitions
        return self._choose_unkeyed(message, num_partitions)

    def _choose_unkeyed(self, message: OutgoingMessage, num_partitions: int) -> int:
        raise NotImplementedError


class RoundRobinRouter(MessageRouter):
    def __init__(
        self,
        hashing_scheme: HashingScheme = HashingScheme.JavaStringHash,
        *,
        batching_enabled: bool,
        batching_max_publish_delay_ms: float,
        clock_ms: Callable[[], float] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(hashing_scheme)
        self._batching = batching_enabled
        self.partition_switch_ms = max(
            1, int(batching_max_publish_delay_ms * BATCHING_PARTITION_SWITCH_FREQUENCY_BY_PUBLISH_DELAY)
        )
        self._clock_ms = clock_ms or (lambda: time.time() * 1000)
        self._next = (rng or random).randrange(1 << 16)

    def _choose_unkeyed(self, message: OutgoingMessage, num_partitions: int) -> int:
        if self._batching:
            return (int(self._clock_ms()) // self.partition_switch_ms + self._next) % num_partitions
        partition = self._next % num_partitions
        self._next += 1
        return partition


class SinglePartitionRouter(MessageRouter):
    def __init__(
        self,
        num_partitions: int,
        hashing_scheme: HashingScheme = HashingScheme.JavaStringHash,
        *,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(hashing_scheme)
        self.partition = (rng or random).randrange(num_partitions)

    def _choose_unkeyed(self, message: OutgoingMessage, num_partitions: int) -> int:
        return self.partition % num_partitions


class CustomRouter(MessageRouter):
    def __init__(self, router: Callable[[Any, int], int]) -> None:
        super().__init__()
        self._router = router

    def choose_partition(self, message: OutgoingMessage, num_partitions: int) -> int:
        partition = self._router(message, num_partitions)
        if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < num_partitions:
            raise ValueError(f"message_router returned {partition!r}, not a partition in [0, {num_partitions})")
        return partition


def make_router(
    mode: PartitionsRoutingMode,
    num_partitions: int,
    *,
    message_router: Callable[[Any, int], int] | None = None,
    hashing_scheme: HashingScheme = HashingScheme.JavaStringHash,
    batching_enabled: bool = True,
    batching_max_publish_delay_ms: float = 10,
) -> MessageRouter:
    """The router ``create_producer``'s arguments ask for.

    Raises:
        ValueError: ``CustomPartition`` without a ``message_router``.
    """
    if message_router is not None:
        return CustomRouter(message_router)
    if mode is PartitionsRoutingMode.CustomPartition:
        raise ValueError("message_routing_mode=CustomPartition needs a message_router")
    if mode is PartitionsRoutingMode.UseSinglePartition:
        return SinglePartitionRouter(num_partitions, hashing_scheme)
    return RoundRobinRouter(
        hashing_scheme, batching_enabled=batching_enabled, batching_max_publish_delay_ms=batching_max_publish_delay_ms
    )
