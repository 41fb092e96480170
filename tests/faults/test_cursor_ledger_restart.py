"""Cursor positions in cursor ledgers on a real cluster: a broker SIGKILLed after its consumer's
acks left the position only in the subscription's cursor ledger on the bookies (the metadata key
names that ledger and still holds the subscription's starting position); the restarted broker
recovers the position from the ledger's last entry, so no acknowledged message comes back."""

from __future__ import annotations

import json
from pathlib import Path

from minipulsar import Client, InitialPosition
from minipulsar.metadata import open_metadata_store
from tests.support.cluster import ProcessCluster, make_cluster

TOPIC = "persistent://public/default/cursor-ledger"
KEY = "/managed-ledgers/public/default/persistent/cursor-ledger/sub"


async def cursor_key(cluster: ProcessCluster) -> tuple[int, dict]:
    store = await open_metadata_store(cluster.metadata_url)
    try:
        stored = await store.get(KEY)
        assert stored is not None
        return stored.version, json.loads(stored.value)
    finally:
        await store.close()


async def ledger_exists(cluster: ProcessCluster, ledger_id: int) -> bool:
    store = await open_metadata_store(cluster.metadata_url)
    try:
        return await store.get(f"/ledgers/L{ledger_id}") is not None
    finally:
        await store.close()


async def test_a_killed_broker_s_successor_recovers_the_acks_from_the_cursor_ledger(tmp_path: Path) -> None:
    async with make_cluster(tmp_path, bookies=1) as cluster:
        async with Client(cluster.service_url) as client:
            consumer = await client.subscribe(TOPIC, "sub", initial_position=InitialPosition.Earliest)
            producer = await client.create_producer(TOPIC, batching_enabled=False)
            for i in range(100):
                await producer.send(b"m-%d" % i)
            for i in range(60):
                message = await consumer.receive(timeout_millis=10_000)
                assert message.data() == b"m-%d" % i
                await consumer.acknowledge(message)  # returns once the broker stored it
                if i == 0:  # the first ack created the cursor ledger and named it in the key
                    version, key = await cursor_key(cluster)
            assert await cursor_key(cluster) == (version, key), "59 durable acks, no metadata write"
            assert key["cursorsLedgerId"] >= 0 and key["markDeleteEntryId"] == 0

        await cluster.restart_broker(kill=True)

        async with Client(cluster.service_url) as client:
            consumer = await client.subscribe(TOPIC, "sub", initial_position=InitialPosition.Earliest)
            received = [await consumer.receive(timeout_millis=10_000) for _ in range(40)]
            assert [m.data() for m in received] == [b"m-%d" % i for i in range(60, 100)], "acked: never again"
            await consumer.acknowledge(received[0])
            _, switched = await cursor_key(cluster)
            assert switched["cursorsLedgerId"] not in (-1, key["cursorsLedgerId"]), "the new owner's own ledger"
            assert switched["markDeleteEntryId"] == 60, "the key holds the position as of the switch"
            assert not await ledger_exists(cluster, key["cursorsLedgerId"]), "the recovered ledger is deleted"


async def test_acks_the_bookies_refuse_go_to_the_metadata_key_and_survive_a_broker_kill(tmp_path: Path) -> None:
    """Goal: with a bookie of the cursor ledger's ensemble dead and none to replace it, an ack
    still gets its receipt — its position is written into the key (cursorsLedgerId -1, Pulsar's
    fallback) — and a restarted broker resumes after it."""
    async with make_cluster(tmp_path, bookies=2) as cluster:  # ensemble = write = ack quorum = 2
        async with Client(cluster.service_url) as client:
            consumer = await client.subscribe(TOPIC, "sub", initial_position=InitialPosition.Earliest)
            producer = await client.create_producer(TOPIC, batching_enabled=False)
            for i in range(20):
                await producer.send(b"m-%d" % i)
            received = [await consumer.receive(timeout_millis=10_000) for _ in range(20)]
            for message in received[:10]:
                await consumer.acknowledge(message)
            await cluster.kill_bookie(1)
            for message in received[10:15]:
                await consumer.acknowledge(message)  # a receipt: durable somewhere
            _, key = await cursor_key(cluster)
            assert key["cursorsLedgerId"] == -1 and key["markDeleteEntryId"] == received[14].message_id().entry_id()

        await cluster.kill_broker(0)
        await cluster.start_bookie(1)
        await cluster.start_broker(0)

        async with Client(cluster.service_url) as client:
            consumer = await client.subscribe(TOPIC, "sub", initial_position=InitialPosition.Earliest)
            rest = [(await consumer.receive(timeout_millis=10_000)).data() for _ in range(5)]
            assert rest == [b"m-%d" % i for i in range(15, 20)]
