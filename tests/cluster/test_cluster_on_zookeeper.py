"""Goal: a whole cluster runs on ZooKeeper instead of the metastore — brokers on Pulsar's
``zk:`` URL, bookies on BookKeeper's ``zk+hierarchical://…/ledgers`` — and loses nothing
acknowledged across a bookie restart and a broker restart.

Method: one real ZooKeeper server (Debian's package), two bookies and one broker, no
metastore process. Produce 1,000 messages in three rounds around the restarts, then read
the topic back from the earliest. Read the bookies' registrations and the auditor election
(sequential znodes) straight from ZooKeeper, before and after the bookie's restart."""

from __future__ import annotations

import asyncio

from minipulsar import Client
from minipulsar.bookkeeper.replication.auditor_elector import who_is_auditor
from minipulsar.bookkeeper.replication.paths import ELECTION_PATH
from minipulsar.metadata import open_metadata_store
from tests.support.cluster import ProcessCluster
from tests.support.consume import consume_all
from tests.support.fixtures import cluster_fixture
from tests.support.process import wait_for

cluster = cluster_fixture(bookies=2, zookeeper_nodes=1)
TOPIC = "persistent://public/default/on-zookeeper"


async def send(service_url: str, first: int, count: int) -> None:
    async with Client(service_url) as client:
        producer = await client.create_producer(TOPIC)
        await asyncio.gather(*(producer.send(f"m-{i}".encode()) for i in range(first, first + count)))


async def registered_bookies(url: str) -> list[str]:
    store = await open_metadata_store(url)
    try:
        return [name for name in await store.children("/ledgers/available") if name != "readonly"]
    finally:
        await store.close()


async def all_registered(url: str, cluster: ProcessCluster) -> bool:
    return sorted(await registered_bookies(url)) == sorted(b.address for b in cluster.bookies)


async def one_auditor_of_two_votes(url: str, cluster: ProcessCluster) -> bool:
    """Both bookies' AutoRecovery voted (ZooKeeper's sequential znodes) and one of them audits."""
    store = await open_metadata_store(url)
    try:
        votes = await store.children(ELECTION_PATH)
        return len(votes) == 2 and await who_is_auditor(store) in {b.address for b in cluster.bookies}
    finally:
        await store.close()


async def test_produce_and_consume_across_a_bookie_and_a_broker_restart(cluster: ProcessCluster) -> None:
    assert cluster.metastore is None and cluster.zookeeper is not None
    url = cluster.zookeeper.url
    assert await all_registered(url, cluster)
    await wait_for(lambda: one_auditor_of_two_votes(url, cluster), 10, message="no auditor election")
    await send(cluster.service_url, 0, 400)
    await cluster.restart_bookie(0)
    await wait_for(lambda: all_registered(url, cluster), 10, message="the bookie did not register again")
    await wait_for(lambda: one_auditor_of_two_votes(url, cluster), 10, message="no auditor election")
    await send(cluster.service_url, 400, 300)
    await cluster.restart_broker()
    await send(cluster.service_url, 700, 300)
    got = await consume_all(cluster.service_url, TOPIC, 1000)
    assert got == [f"m-{i}".encode() for i in range(1000)]
