"""Goal: the producer's bookkeeping, as pure logic: the client-wide memory limit (one oversized
message may pass alone, waiters are told on release), the batch containers (count and byte
limits, a big message alone, key-based groups by first arrival) and the producer config
(pulsar.asyncio's defaults, validation)."""

from __future__ import annotations

import pytest

from minipulsar.client.batch_container import BatchContainer, Extra, KeyBasedBatchContainer
from minipulsar.client.enums import BatchingType, CompressionType
from minipulsar.client.memory_limit import MemoryLimitController
from minipulsar.client.producer_config import ProducerConfig


def add_message(batch: BatchContainer, size: int = 10, key: str | None = None, ordering_key: str | None = None) -> bool:
    """A message of ``size`` bytes (with those keys) into ``batch``; True: the batch is full."""
    extra = None if key is None and ordering_key is None else Extra(key, None, 0, ordering_key, None)
    return batch.add(bytes(size), size, lambda error, message_id: None, extra)


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
    assert not add_message(batch, 10) and not add_message(batch, 10)
    assert add_message(batch, 10), "3 messages: full"
    assert [len(g.datas) for g in batch.drain()] == [3] and len(batch) == 0
    add_message(batch, 60)
    assert not batch.has_room(50), "60 + 50 bytes would pass 100"
    batch.drain()
    assert batch.has_room(1000), "an empty batch takes anything"
    assert add_message(batch, 1000)


def test_key_based_batches_group_by_ordering_key_else_partition_key_in_first_arrival_order() -> None:
    batch = KeyBasedBatchContainer(max_messages=100, max_bytes=10_000)
    for size, key, ordering_key in [(1, "b", None), (2, "a", None), (3, "b", "o"), (4, None, None), (5, "a", None)]:
        add_message(batch, size, key, ordering_key)
    groups = batch.drain()
    assert [[len(d) for d in g.datas] for g in groups] == [[1], [2, 5], [3], [4]]
    assert [g.size_bytes for g in groups] == [1, 7, 3, 4]


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
