"""Programs written against the official client's ``pulsar.asyncio`` API on a real cluster of
2 brokers and 3 bookies with deduplication on: publishing and consuming, and deduplication
across a restart of every broker (docs/design.md §3.8).

Method: one cluster for the module, on the module's event loop; brokers restart on the same
ports, so the client's service URL stays valid and it reconnects by itself.
"""

from __future__ import annotations

import asyncio

import pulsar
import pulsar.asyncio
import pytest

from tests.support.cluster import ProcessCluster
from tests.support.fixtures import cluster_fixture
from tests.support.official_client import CHUNKED_SIZE, chunked_round_trip, official_topic, receive_each_async

pytestmark = pytest.mark.asyncio(loop_scope="module")

cluster = cluster_fixture(per_module=True, bookies=3, brokers=2, broker_settings={"brokerDeduplicationEnabled": True})

new_topic = official_topic
receive = receive_each_async


async def test_a_chunked_message_is_stored_whole_with_deduplication_on(cluster: ProcessCluster) -> None:
    """Every chunk carries the message's sequence id: deduplication records it only with the
    last chunk, so the others are stored, not answered as resends of the first."""
    big, small = await asyncio.to_thread(chunked_round_trip, cluster.service_url, new_topic("chunked"))
    assert (len(big), big[:4], small) == (CHUNKED_SIZE, bytes(range(4)), b"after the chunks")


async def test_the_asyncio_api_publishes_and_consumes(cluster: ProcessCluster) -> None:
    client = pulsar.asyncio.Client(cluster.service_url, operation_timeout_seconds=15)
    try:
        topic = new_topic("exchange")
        consumer = await client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = await client.create_producer(topic)
        ids = [await producer.send(f"m-{i}".encode(), properties={"i": str(i)}) for i in range(10)]
        received = await receive(consumer, 10)
        assert [m.data() for m in received] == [f"m-{i}".encode() for i in range(10)]
        assert [str(m.message_id()) for m in received] == [str(i) for i in ids]
        for message in received:
            await consumer.acknowledge(message)
        await producer.close()
        await consumer.close()
    finally:
        await client.close()


async def test_deduplication_drops_resends_after_every_broker_restarted(cluster: ProcessCluster) -> None:
    """A producer that comes back under its name after the brokers restarted learns its last
    sequence id, and what it resends below it is acknowledged without being stored again."""
    topic = new_topic("dedup")
    client = pulsar.asyncio.Client(cluster.service_url, operation_timeout_seconds=15)
    try:
        producer = await client.create_producer(topic, producer_name="dedup-producer", batching_enabled=False)
        for i in range(5):
            await producer.send(f"m-{i}".encode(), sequence_id=i)
        await producer.close()
    finally:
        await client.close()
    for index in range(len(cluster.brokers)):
        await cluster.restart_broker(index=index, same_ports=True)
    client = pulsar.asyncio.Client(cluster.service_url, operation_timeout_seconds=30)
    try:
        producer = await client.create_producer(topic, producer_name="dedup-producer", batching_enabled=False)
        assert producer.last_sequence_id() == 4
        for i in range(3, 8):  # 3 and 4 are duplicates
            await producer.send(f"m-{i}".encode(), sequence_id=i)
        consumer = await client.subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest)
        received = await receive(consumer, 8)
        assert [m.data() for m in received] == [f"m-{i}".encode() for i in range(8)]
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(consumer.receive(), 1.0)
    finally:
        await client.close()
