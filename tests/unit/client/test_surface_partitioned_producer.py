"""PartitionedProducer over fake partition producers: routing, ids, naming, lazy start, close."""

from __future__ import annotations

import asyncio
import random

import pytest

from minipulsar.client.exceptions import AlreadyClosed
from minipulsar.client.partitioned_producer import PartitionedProducer
from minipulsar.client.routing import CustomRouter, RoundRobinRouter, SinglePartitionRouter, java_string_hash
from tests.support.client_fakes import FakeProducer

TOPIC = "persistent://public/default/orders"


class Factory:
    def __init__(self, fail_on: str | None = None) -> None:
        self.created: dict[str, FakeProducer] = {}
        self.fail_on = fail_on

    async def __call__(self, topic: str, name: str | None) -> FakeProducer:
        if topic == self.fail_on:
            raise AlreadyClosed(f"cannot create {topic}")
        producer = FakeProducer(topic, name)
        self.created[topic] = producer
        return producer

    def partition(self, index: int) -> FakeProducer:
        return self.created[f"{TOPIC}-partition-{index}"]


async def test_keyed_messages_go_to_their_hash_partition_and_ids_carry_it() -> None:
    factory = Factory()
    producer = await PartitionedProducer.create(
        TOPIC, 4, RoundRobinRouter(batching_enabled=False, batching_max_publish_delay_ms=10), factory
    )
    for key in ("alice", "bob", "carol"):
        message_id = await producer.send(key.encode(), partition_key=key, properties={"k": key})
        expected = java_string_hash(key) % 4
        assert message_id.partition() == expected
        assert factory.partition(expected).sent[-1] == (key.encode(), {"partition_key": key, "properties": {"k": key}})
    assert producer.num_partitions() == 4 and producer.topic() == TOPIC


async def test_unkeyed_round_robin_spreads_messages_over_all_partitions() -> None:
    factory = Factory()
    producer = await PartitionedProducer.create(
        TOPIC,
        3,
        RoundRobinRouter(batching_enabled=False, batching_max_publish_delay_ms=10, rng=random.Random(0)),
        factory,
    )
    partitions = [(await producer.send(b"x")).partition() for _ in range(9)]
    assert sorted(partitions) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert all(len(factory.partition(i).sent) == 3 for i in range(3))


async def test_the_first_partitions_generated_name_is_every_partitions_name() -> None:
    """Partition 0 is created first; without producer_name the others reuse the name the broker
    gave it, so deduplication sees one producer per partition."""
    factory = Factory()
    producer = await PartitionedProducer.create(TOPIC, 3, SinglePartitionRouter(3), factory)
    names = {p.producer_name() for p in factory.created.values()}
    assert names == {"generated-0"} and producer.producer_name() == "generated-0"
    named = await PartitionedProducer.create(TOPIC, 2, SinglePartitionRouter(2), Factory(), producer_name="mine")
    assert named.producer_name() == "mine"


async def test_lazy_start_creates_a_partitions_producer_on_its_first_message() -> None:
    factory = Factory()
    producer = await PartitionedProducer.create(TOPIC, 4, CustomRouter(lambda m, n: 3), factory, lazy=True)
    assert list(factory.created) == [f"{TOPIC}-partition-0"]
    results = await asyncio.gather(*(producer.send(b"x") for _ in range(5)))
    assert {r.partition() for r in results} == {3}
    assert sorted(factory.created) == [f"{TOPIC}-partition-0", f"{TOPIC}-partition-3"]
    assert len(factory.partition(3).sent) == 5


async def test_send_async_calls_back_with_the_partitioned_id() -> None:
    producer = await PartitionedProducer.create(TOPIC, 2, CustomRouter(lambda m, n: 1), Factory(), lazy=True)
    done: asyncio.Future = asyncio.get_running_loop().create_future()
    producer.send_async(b"x", lambda error, message_id: done.set_result((error, message_id)))
    error, message_id = await done
    assert error is None and message_id.partition() == 1


async def test_a_failed_partition_closes_the_others_and_raises() -> None:
    factory = Factory(fail_on=f"{TOPIC}-partition-2")
    with pytest.raises(AlreadyClosed, match="cannot create"):
        await PartitionedProducer.create(TOPIC, 3, SinglePartitionRouter(3), factory)
    assert factory.created and all(p.closed for p in factory.created.values())


async def test_close_closes_every_partition_and_later_sends_fail() -> None:
    factory = Factory()
    producer = await PartitionedProducer.create(TOPIC, 2, SinglePartitionRouter(2), factory)
    await producer.close()
    assert all(p.closed for p in factory.created.values()) and not producer.is_connected()
    with pytest.raises(AlreadyClosed):
        await producer.send(b"late")
