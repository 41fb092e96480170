"""Message routing: Pulsar's key hashes and its round-robin, single and custom routers."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from minipulsar.client.routing import (
    CustomRouter,
    HashingScheme,
    OutgoingMessage,
    PartitionsRoutingMode,
    RoundRobinRouter,
    SinglePartitionRouter,
    java_string_hash,
    make_router,
    murmur3_32_hash,
)


def message(key: str | None = None) -> OutgoingMessage:
    return OutgoingMessage(b"x", None, key, None, None)


def test_java_string_hash_is_javas_string_hashcode_made_non_negative() -> None:
    """Java: "hello".hashCode() == 99162322; UTF-16 code units (a surrogate pair counts twice);
    overflow wraps at 32 bits and the sign bit is cleared."""
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("é") == 0xE9
    assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00
    assert java_string_hash("polygenelubricants") == -(2**31) & 0x7FFFFFFF  # Java: Integer.MIN_VALUE


def test_murmur3_hash_is_murmur3_x86_32_seed_0_of_utf8() -> None:
    assert murmur3_32_hash("hello") == 0x248BFA47
    assert murmur3_32_hash("") == 0


@pytest.mark.parametrize("scheme", list(HashingScheme))
def test_a_key_always_goes_to_its_hash_modulo_partitions_in_every_mode(scheme: HashingScheme) -> None:
    hash_of = java_string_hash if scheme is HashingScheme.JavaStringHash else murmur3_32_hash
    routers = [
        RoundRobinRouter(scheme, batching_enabled=True, batching_max_publish_delay_ms=10),
        RoundRobinRouter(scheme, batching_enabled=False, batching_max_publish_delay_ms=10),
        SinglePartitionRouter(7, scheme),
    ]
    for router in routers:
        for key in ("a", "user-42", "ключ"):
            assert router.choose_partition(message(key), 7) == hash_of(key) % 7


def test_round_robin_without_batching_visits_partitions_in_turn() -> None:
    router = RoundRobinRouter(batching_enabled=False, batching_max_publish_delay_ms=10, rng=random.Random(1))
    chosen = [router.choose_partition(message(), 4) for _ in range(8)]
    assert chosen[4:] == chosen[:4] and sorted(chosen[:4]) == [0, 1, 2, 3]
    assert all((b - a) % 4 == 1 for a, b in itertools.pairwise(chosen))


def test_round_robin_with_batching_keeps_a_partition_for_ten_publish_delays() -> None:
    """Batch-friendly: partition_switch_ms = 10 × batching_max_publish_delay_ms; every message
    of one window goes to one partition, the next window to the next partition."""
    now = [1_000_000.0]
    router = RoundRobinRouter(
        batching_enabled=True, batching_max_publish_delay_ms=5, clock_ms=lambda: now[0], rng=random.Random(2)
    )
    assert router.partition_switch_ms == 50
    windows = []
    for window in range(6):
        now[0] = 1_000_000 + window * 50
        picks = set()
        for offset_ms in (0, 10, 49):
            now[0] = 1_000_000 + window * 50 + offset_ms
            picks.add(router.choose_partition(message(), 3))
        assert len(picks) == 1, f"window {window} used {picks}"
        windows.append(picks.pop())
    assert all((b - a) % 3 == 1 for a, b in itertools.pairwise(windows))


def test_single_partition_sends_every_unkeyed_message_to_one_random_partition() -> None:
    picks = Counter(SinglePartitionRouter(5, rng=random.Random(seed)).partition for seed in range(50))
    assert len(picks) > 1, "the partition is random per producer"
    router = SinglePartitionRouter(5, rng=random.Random(3))
    assert {router.choose_partition(message(), 5) for _ in range(20)} == {router.partition}


def test_custom_router_decides_every_message_and_is_checked() -> None:
    seen = []

    def by_property(msg, num_partitions: int) -> int:
        seen.append((msg.partition_key(), msg.properties(), num_partitions))
        return int(msg.properties().get("p", 0))

    router = CustomRouter(by_property)
    assert router.choose_partition(OutgoingMessage(b"x", {"p": "2"}, "k", None, None), 3) == 2
    assert seen == [("k", {"p": "2"}, 3)]
    with pytest.raises(ValueError, match="not a partition"):
        router.choose_partition(OutgoingMessage(b"x", {"p": "3"}, None, None, None), 3)


def test_make_router_follows_create_producers_arguments() -> None:
    assert isinstance(make_router(PartitionsRoutingMode.RoundRobinDistribution, 3), RoundRobinRouter)
    assert isinstance(make_router(PartitionsRoutingMode.UseSinglePartition, 3), SinglePartitionRouter)
    assert isinstance(
        make_router(PartitionsRoutingMode.UseSinglePartition, 3, message_router=lambda m, n: 0), CustomRouter
    ), "a message_router selects CustomPartition, as in the official client"
    with pytest.raises(ValueError, match="needs a message_router"):
        make_router(PartitionsRoutingMode.CustomPartition, 3)
