"""Each subscription type's delivery rules, on a real cluster."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from minipulsar import Client, ConsumerType, InitialPosition, Timeout
from minipulsar.errors import ConsumerBusyError
from tests.support.fixtures import cluster_fixture
from tests.support.process import wait_for
from tests.support.web import consumer_stats

cluster = cluster_fixture(broker_settings={"activeConsumerFailoverDelayTimeMillis": 200})


async def test_exclusive_subscription_refuses_a_second_consumer(cluster) -> None:
    """Goal: an Exclusive subscription has one consumer; a second gets ConsumerBusy, and may
    attach once the first left — receiving what the first did not acknowledge."""
    async with Client(cluster.service_url) as client:
        first = await client.subscribe("excl", "sub")
        with pytest.raises(ConsumerBusyError):
            await client.subscribe("excl", "sub")
        producer = await client.create_producer("excl")
        for i in range(4):
            await producer.send(f"m-{i}".encode())
        await first.acknowledge(await first.receive(timeout_millis=10_000))
        await first.close()
        second = await client.subscribe("excl", "sub")
        assert [(await second.receive(timeout_millis=10_000)).data() for _ in range(3)] == [b"m-1", b"m-2", b"m-3"]


async def test_failover_activates_by_priority_then_name_and_fails_over_without_loss(cluster) -> None:
    """Goal: Failover sends everything to one consumer — the first by (priority_level, name) —
    and when it leaves the next one gets every message it had not acknowledged.
    Method: consumers "b" (0), "a" (1), "c" (0): b is active. b acks 10 of 30 and closes; c
    (next by priority then name) becomes active and receives messages 10..29 in order; a gets
    nothing; ACTIVE_CONSUMER_CHANGE told each consumer its state."""
    async with Client(cluster.service_url) as client:
        b = await client.subscribe("fo", "sub", consumer_type=ConsumerType.Failover, consumer_name="b")
        a = await client.subscribe(
            "fo", "sub", consumer_type=ConsumerType.Failover, consumer_name="a", priority_level=1
        )
        c = await client.subscribe("fo", "sub", consumer_type=ConsumerType.Failover, consumer_name="c")
        producer = await client.create_producer("fo")
        for i in range(30):
            await producer.send(f"m-{i}".encode())
        await wait_for(lambda: len(b._queue) == 30, message="the active consumer did not get everything")
        assert (b._is_active, a._is_active, c._is_active) == (True, False, False)
        assert len(a._queue) == len(c._queue) == 0
        for i in range(10):
            message = await b.receive()
            assert message.data() == f"m-{i}".encode()
            await b.acknowledge(message)
        await b.close()
        got = [(await c.receive(timeout_millis=10_000)) for _ in range(20)]
        assert [m.data() for m in got] == [f"m-{i}".encode() for i in range(10, 30)]
        assert all(m.redelivery_count() == 1 for m in got)
        assert c._is_active is True and a._is_active is False and len(a._queue) == 0


async def test_shared_spreads_messages_within_permits_by_priority(cluster) -> None:
    """Goal: Shared hands messages round-robin to consumers with permits at the best priority
    level and never beyond a consumer's permits.
    Method: two priority-0 consumers with queues of 5 and one priority-1 consumer with 100;
    60 messages: the first two get 5 each (permits), the lower priority one the other 50."""
    async with Client(cluster.service_url) as client:
        high = [
            await client.subscribe(
                "shared", "sub", consumer_type=ConsumerType.Shared, receiver_queue_size=5, consumer_name=f"high-{i}"
            )
            for i in range(2)
        ]
        low = await client.subscribe(
            "shared",
            "sub",
            consumer_type=ConsumerType.Shared,
            receiver_queue_size=100,
            consumer_name="low",
            priority_level=1,
        )
        producer = await client.create_producer("shared")
        for i in range(60):
            await producer.send(f"m-{i}".encode())
        consumers = [*high, low]
        await wait_for(lambda: sum(len(c._queue) for c in consumers) == 60, message="not everything dispatched")
        assert [len(c._queue) for c in consumers] == [5, 5, 50]
        assert [s["availablePermits"] for s in consumer_stats(cluster, "shared", "sub")] == [0, 0, 50]
        received = sorted([m.data() for c in consumers for m in c._queue], key=lambda d: int(d[2:]))
        assert received == [f"m-{i}".encode() for i in range(60)]


async def test_key_shared_keeps_each_key_on_one_consumer_in_order_as_consumers_join_and_leave(cluster) -> None:
    """Goal: Key_Shared delivers a key's messages to one consumer at a time and in order, also
    when a consumer joins (it waits until older messages are acknowledged) and leaves (its
    unacknowledged messages go, in order, to the consumer that takes its keys).
    Method: 10 keys, 10 messages each per round. c1 gets round 1 and processes half; c2 joins;
    round 2 is sent; both process concurrently (record, then ack) until 200 are done: each key
    of round 2 went to one consumer, some to c2. Round 3 is sent; c1 processes a few and
    leaves with messages still queued; c2 processes the rest. Every key's recorded sequence is
    exactly 0..29: no gap, no repeat, no reordering."""
    processed: dict[str, list[int]] = defaultdict(list)
    round_two_owners: dict[str, set[str]] = defaultdict(set)

    def done() -> int:
        return sum(len(seqs) for seqs in processed.values())

    async def handle(consumer, message) -> None:
        key, seq = message.partition_key(), int(message.data())
        processed[key].append(seq)
        if 10 <= seq < 20:
            round_two_owners[key].add(consumer.consumer_name())
        await consumer.acknowledge(message)

    async def drain(consumer, until: int) -> None:
        while done() < until:
            try:
                message = await consumer.receive(timeout_millis=100)
            except Timeout:
                continue
            await handle(consumer, message)

    async with Client(cluster.service_url) as client:
        c1 = await client.subscribe("ks", "sub", consumer_type=ConsumerType.KeyShared, consumer_name="c1")
        producer = await client.create_producer("ks")

        async def send_round(round_index: int) -> None:
            for i in range(100):
                await producer.send(str(round_index * 10 + i // 10).encode(), partition_key=f"key-{i % 10}")

        await send_round(0)
        for _ in range(50):
            await handle(c1, await c1.receive(timeout_millis=10_000))
        c2 = await client.subscribe("ks", "sub", consumer_type=ConsumerType.KeyShared, consumer_name="c2")
        await send_round(1)
        await asyncio.wait_for(asyncio.gather(drain(c1, 200), drain(c2, 200)), 30)
        assert all(len(names) == 1 for names in round_two_owners.values()), dict(round_two_owners)
        assert {"c1", "c2"} == {n for names in round_two_owners.values() for n in names}, "no key moved to c2"

        await send_round(2)
        await wait_for(lambda: len(c1._queue) >= 10, message="c1 got nothing of round 3")
        for _ in range(5):
            await handle(c1, await c1.receive())
        await c1.close()
        await asyncio.wait_for(drain(c2, 300), 30)
    assert done() == 300
    for key, seqs in processed.items():
        assert seqs == list(range(30)), (key, seqs)


async def test_subscription_starts_at_the_initial_position(cluster) -> None:
    """Goal: a new subscription starts at Latest by default, or at Earliest when asked."""
    async with Client(cluster.service_url) as client:
        producer = await client.create_producer("initial")
        await producer.send(b"old")
        latest = await client.subscribe("initial", "latest")
        earliest = await client.subscribe("initial", "earliest", initial_position=InitialPosition.Earliest)
        await producer.send(b"new")
        assert (await latest.receive(timeout_millis=10_000)).data() == b"new"
        assert (await earliest.receive(timeout_millis=10_000)).data() == b"old"
