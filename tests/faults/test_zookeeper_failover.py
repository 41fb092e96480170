"""Goal: a cluster on a 3-node ZooKeeper ensemble rides out the death of the ZooKeeper leader
while a producer and a consumer run: no acknowledged message is lost, none is delivered
again after its acknowledgement, and the bookie and broker registrations (ephemeral znodes)
survive, since the ensemble keeps the sessions.

Method: two bookies and one broker on the ensemble (no metastore); a producer sends 1,500
messages in windows of 50 while a consumer receives and acknowledges each; after the first
500 sends, the ZooKeeper leader is SIGKILLed. Then every acknowledged send must have reached
the consumer, and none after the consumer's acknowledgement of it succeeded. (An
acknowledgement the broker could not persist during the election fails; that message may
come again, and the test says how many failed.)"""

from __future__ import annotations

import asyncio

from minipulsar import Client, InitialPosition
from minipulsar.errors import MiniPulsarError
from minipulsar.metadata import open_metadata_store
from tests.support.cluster import ProcessCluster
from tests.support.fixtures import cluster_fixture
from tests.support.process import wait_for

cluster = cluster_fixture(bookies=2, zookeeper_nodes=3)
TOPIC = "persistent://public/default/zk-failover"
MESSAGES, WINDOW, KILL_AFTER = 1500, 50, 500


async def bookie_and_broker_registrations(url: str) -> tuple[list[str], list[str]]:
    store = await open_metadata_store(url)
    try:
        bookies = [name for name in await store.children("/ledgers/available") if name != "readonly"]
        return sorted(bookies), await store.children("/loadbalance/brokers")
    finally:
        await store.close()


async def test_killing_the_zookeeper_leader_loses_nothing_and_keeps_registrations(cluster: ProcessCluster) -> None:
    assert cluster.zookeeper is not None
    ensemble, url = cluster.zookeeper, cluster.zookeeper.url
    before = await bookie_and_broker_registrations(url)
    assert before == (sorted(b.address for b in cluster.bookies), [cluster.broker_id()])
    received: set[bytes] = set()
    acked: set[bytes] = set()
    failed_acks: list[str] = []
    delivered_after_ack: list[bytes] = []
    sent: list[bytes] = []
    async with Client(cluster.service_url) as client:
        consumer = await client.subscribe(TOPIC, "sub", initial_position=InitialPosition.Earliest)
        producer = await client.create_producer(TOPIC)

        async def consume() -> None:
            while True:
                message = await consumer.receive()
                data = message.data()
                if data in acked:
                    delivered_after_ack.append(data)
                received.add(data)
                try:
                    await consumer.acknowledge(message)
                except MiniPulsarError as error:  # the broker could not persist it: it may come again
                    failed_acks.append(repr(error))
                else:
                    acked.add(data)

        consuming = asyncio.ensure_future(consume())
        try:
            for first in range(0, MESSAGES, WINDOW):
                payloads = [f"m-{i}".encode() for i in range(first, first + WINDOW)]
                outcomes = await asyncio.gather(*(producer.send(p) for p in payloads), return_exceptions=True)
                sent += [p for p, out in zip(payloads, outcomes, strict=True) if not isinstance(out, BaseException)]
                if first + WINDOW == KILL_AFTER:
                    leader = ensemble.leader()
                    assert leader is not None
                    await asyncio.to_thread(ensemble.kill, leader)
            await wait_for(
                lambda: set(sent) <= received or consuming.done(), 30, message=f"{len(set(sent) - received)} lost"
            )
            assert not consuming.done(), consuming.exception()
        finally:
            consuming.cancel()
            await asyncio.gather(consuming, return_exceptions=True)
    assert len(sent) >= MESSAGES - WINDOW, f"only {len(sent)} of {MESSAGES} sends were acknowledged"
    assert delivered_after_ack == []
    print(f"acknowledgements that failed during the failover: {len(failed_acks)} {failed_acks[:1]}")
    assert await bookie_and_broker_registrations(url) == before
