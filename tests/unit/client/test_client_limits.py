"""Goal: the producer's bookkeeping, as pure logic: the client-wide memory limit (one oversized
message may pass alone, waiters are told on release), the batch containers (count and byte
limits, a big message alone, key-based groups by first arrival) and the producer config
(pulsar.asyncio's defaults, validation)."""

from __future__ import annotations

import pytest

from minipulsar.client.batch_container import BatchContainer, KeyBasedBatchContainer, PendingMessage
from minipulsar.client.enums import BatchingType, CompressionType
from minipulsar.client.memory_limit import MemoryLimitController
from minipulsar.client.producer_config import ProducerConfig


def pending_message(size: int = 10, key: str | None = None, ordering_key: str | None = None) -> PendingMessage:
    return PendingMessage(bytes(size), None, key, ordering_key, 0, None, size)


def test_memory_is_reserved_up_to_the_limit_and_one_big_message_passes_alone() -> None:
    memory = MemoryLimitController(100)
    assert memory.try_reserve(60) and not memory.try_reserve(50)
    memory.release(60)
    assert memory.try_reserve(500), "nothing else reserved: an oversized message may go"
    assert not memory.try_reserve(1)
    memory.release(500)
    assert memory.used_bytes == 0


def test_memory_waiters_are_told_once_on_release_in_order() -> None:
    memory = MemoryLimitController(10)
    memory.try_reserve(10)
    told = []
    memory.wait("a", lambda: told.append("a"))
    memory.wait("b", lambda: told.append("b"))
    memory.wait("a", lambda: told.append("a again"))  # already waiting: once
    memory.release(5)
    memory.release(5)
    assert told == ["a", "b"]


def test_a_zero_limit_disables_the_memory_bound() -> None:
    memory = MemoryLimitController(0)
    assert all(memory.try_reserve(10**9) for _ in range(3)) and not memory.is_full


def test_a_batch_is_full_at_its_count_or_byte_limit_and_a_big_message_travels_alone() -> None:
    batch = BatchContainer(max_messages=3, max_bytes=100)
    assert not batch.add(pending_message(10)) and not batch.add(pending_message(10))
    assert batch.add(pending_message(10)), "3 messages: full"
    assert [len(g) for g in batch.drain()] == [3] and len(batch) == 0
    batch.add(pending_message(60))
    assert not batch.has_room(pending_message(50)), "60 + 50 bytes would pass 100"
    batch.drain()
    assert batch.has_room(pending_message(1000)), "an empty batch takes anything"
    assert batch.add(pending_message(1000))


def test_key_based_batches_group_by_ordering_key_else_partition_key_in_first_arrival_order() -> None:
    batch = KeyBasedBatchContainer(max_messages=100, max_bytes=10_000)
    items = [
        pending_message(key="b"),
        pending_message(key="a"),
        pending_message(key="b", ordering_key="o"),
        pending_message(),
        pending_message(key="a"),
    ]
    for item in items:
        batch.add(item)
    assert batch.drain() == [[items[0]], [items[1], items[4]], [items[2]], [items[3]]]


def test_producer_defaults_are_pulsar_asyncios() -> None:
    config = ProducerConfig()
    assert (config.send_timeout_millis, config.max_pending_messages, config.block_if_queue_full) == (30_000, 1000, True)
    assert (
        config.batching_enabled,
        config.batching_max_messages,
        config.batching_max_allowed_size_in_bytes,
        config.batching_max_publish_delay_ms,
    ) == (True, 1000, 131072, 10)
    assert (config.compression_type, config.batching_type) == (CompressionType.NONE, BatchingType.Default)


@pytest.mark.parametrize(
    "settings, error",
    [
        ({"batching_enabled": True, "chunking_enabled": True}, "can't be enabled together"),
        ({"compression_type": CompressionType.SNAPPY}, "SNAPPY"),
        ({"send_timeout_millis": -1}, "send_timeout_millis"),
        ({"max_pending_messages": -5}, "max_pending_messages"),
    ],
)
def test_bad_producer_settings_are_refused(settings: dict, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        ProducerConfig.from_settings(**settings)


def test_unknown_producer_settings_are_named() -> None:
    with pytest.raises(TypeError, match="batch_size"):
        ProducerConfig.from_settings(batch_size=10)
    assert ProducerConfig.from_settings(compression_type="zstd").codec == "ZSTD"
