"""Deduplication on a real cluster: with
``brokerDeduplicationEnabled`` a resend of an already stored (producer name, sequence id) is
acknowledged without a second write — also after the broker was killed and restarted, when
the state comes back from the last snapshot plus the entries written after it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from minipulsar import Client, InitialPosition, MessageId
from minipulsar.metadata import open_metadata_store
from tests.support.cluster import make_cluster
from tests.support.process import wait_for
from tests.support.web import topic_stats

DUPLICATE = MessageId(-1, -1, -1, -1)
SETTINGS = {"brokerDeduplicationEnabled": True, "brokerDeduplicationEntriesInterval": 10}


async def consume(service_url: str, topic: str, count: int) -> list[bytes]:
    async with Client(service_url) as client:
        consumer = await client.subscribe(topic, "check", initial_position=InitialPosition.Earliest)
        return [(await consumer.receive(timeout_millis=10_000)).data() for _ in range(count)]


async def test_resent_sequence_ids_are_stored_once_across_a_broker_crash(tmp_path: Path) -> None:
    async with make_cluster(tmp_path, bookies=1, broker_settings=SETTINGS) as cluster:
        async with Client(cluster.service_url) as client:
            producer = await client.create_producer("dedup", producer_name="p1")
            assert producer.last_sequence_id() == -1
            for i in range(25):  # snapshots after 10 and 20 entries; 21..24 only in the ledger
                await producer.send(f"m-{i}".encode())
            assert producer.last_sequence_id() == 24
            assert await producer.send(b"m-3 again", sequence_id=3) == DUPLICATE, "a resend is not written"

        await cluster.restart_broker(kill=True)

        async with Client(cluster.service_url) as client:
            producer = await client.create_producer("dedup", producer_name="p1")
            assert producer.last_sequence_id() == 24, "the broker remembers where p1 stands"
            for i in range(25):
                assert await producer.send(f"m-{i}".encode(), sequence_id=i) == DUPLICATE
            for i in range(25, 30):  # new ids continue after the reported one
                assert await producer.send(f"m-{i}".encode()) != DUPLICATE
            assert producer.last_sequence_id() == 29
            other = await client.create_producer("dedup", producer_name="p2")
            assert await other.send(b"p2-0", sequence_id=0) != DUPLICATE, "ids are per producer name"

        stored = await asyncio.to_thread(topic_stats, cluster, "dedup", "internalStats")
        assert stored["numberOfEntries"] == 31, "25 + 5 new from p1, 1 from p2: no resend was written"
        assert "pulsar.dedup" in stored["cursors"], "the snapshot is the pulsar.dedup cursor's"
        stats = await asyncio.to_thread(topic_stats, cluster, "dedup")
        assert "pulsar.dedup" not in stats["subscriptions"], "and that cursor is no subscription"
        store = await open_metadata_store(cluster.metadata_url)
        try:
            assert await store.children("/deduplication") == [], "no snapshot in the metadata store"
        finally:
            await store.close()
        assert await consume(cluster.service_url, "dedup", 31) == [f"m-{i}".encode() for i in range(30)] + [b"p2-0"]


async def test_an_idle_topic_s_snapshot_catches_up_by_time(tmp_path: Path) -> None:
    """Goal: with fewer than brokerDeduplicationEntriesInterval entries since the last snapshot,
    brokerDeduplicationSnapshotIntervalSeconds still moves the pulsar.dedup cursor to the tail,
    so it holds back trimming for a bounded time only."""
    settings = {"brokerDeduplicationEnabled": True, "brokerDeduplicationSnapshotIntervalSeconds": 1}
    async with make_cluster(tmp_path, bookies=1, broker_settings=settings) as cluster:
        async with Client(cluster.service_url) as client:
            producer = await client.create_producer("idle-dedup", producer_name="p1", batching_enabled=False)
            for i in range(5):
                last = await producer.send(f"m-{i}".encode())

        def snapshot_at_tail() -> bool:
            stored = topic_stats(cluster, "idle-dedup", "internalStats")
            return stored["cursors"]["pulsar.dedup"]["markDeletePosition"] == f"{last.ledger_id()}:{last.entry_id()}"

        await wait_for(lambda: asyncio.to_thread(snapshot_at_tail), timeout_s=15, message="no timed snapshot")
