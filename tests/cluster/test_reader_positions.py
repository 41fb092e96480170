"""Readers on a real cluster: start positions (earliest, latest, a message id
inside or outside a batch, exclusive or inclusive), has_message_available, seek by id and by
time, and that a reader's subscription is non-durable.

Method: one cluster for the module (metastore, bookie, broker processes); each test its own
topic. Batches are made by sending concurrently with batching on.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from minipulsar import Client, MessageId, Timeout
from tests.support.cluster import ProcessCluster
from tests.support.fixtures import client_fixture, cluster_fixture
from tests.support.process import wait_for
from tests.support.web import topic_stats

pytestmark = pytest.mark.asyncio(loop_scope="module")


cluster = cluster_fixture(per_module=True)


client = client_fixture(loop_scope="module")


async def publish(client: Client, topic: str, texts: list[str], *, batched: bool) -> list[MessageId]:
    producer = await client.create_producer(topic, batching_enabled=batched)
    if batched:
        ids = await asyncio.gather(*(producer.send(t.encode()) for t in texts))
    else:
        ids = [await producer.send(t.encode()) for t in texts]
    await producer.close()
    return list(ids)


async def drain_reader(reader, expected: int) -> list[str]:
    """The next ``expected`` messages (each waited for generously), then proof that no other
    follows soon (a short wait that must time out)."""
    out = [(await reader.read_next(10_000)).data().decode() for _ in range(expected)]
    try:
        extra = await reader.read_next(200)
    except Timeout:
        return out
    return out + [extra.data().decode()]


async def test_reader_start_positions_follow_pulsars_rules(client: Client) -> None:
    topic = "persistent://public/default/reader-starts"
    plain = await publish(client, topic, [f"p{i}" for i in range(3)], batched=False)
    batch = await publish(client, topic, [f"b{i}" for i in range(6)], batched=True)
    assert all(i.batch_index() < 0 for i in plain)
    assert len({(i.ledger_id(), i.entry_id()) for i in batch}) < 6, "the concurrent sends were batched"
    everything = [f"p{i}" for i in range(3)] + [f"b{i}" for i in range(6)]

    assert await drain_reader(await client.create_reader(topic, MessageId.earliest), 9) == everything
    assert await drain_reader(await client.create_reader(topic, plain[1]), 7) == everything[2:]
    assert (
        await drain_reader(await client.create_reader(topic, plain[1], start_message_id_inclusive=True), 8)
        == everything[1:]
    )
    assert await drain_reader(await client.create_reader(topic, batch[2]), 3) == everything[6:], "inside a batch"
    inclusive = await client.create_reader(topic, batch[2], start_message_id_inclusive=True)
    assert await drain_reader(inclusive, 4) == everything[5:]
    restored = MessageId.deserialize(batch[3].serialize())
    assert await drain_reader(await client.create_reader(topic, restored), 2) == everything[7:]

    latest = await client.create_reader(topic, MessageId.latest)
    assert not await latest.has_message_available()
    await publish(client, topic, ["new"], batched=False)
    assert await latest.has_message_available()
    assert await drain_reader(latest, 1) == ["new"]


async def test_has_message_available_tracks_what_was_read(client: Client) -> None:
    topic = "persistent://public/default/reader-available"
    reader = await client.create_reader(topic, MessageId.earliest)
    assert not await reader.has_message_available(), "an empty topic"
    await publish(client, topic, ["a", "b", "c"], batched=True)
    seen = []
    while await reader.has_message_available():
        seen.append((await reader.read_next(5000)).data().decode())
    assert seen == ["a", "b", "c"]
    last = await publish(client, topic, ["d"], batched=False)
    assert await reader.has_message_available()
    assert (await reader.read_next(5000)).message_id() == last[0]
    assert not await reader.has_message_available()


async def test_seek_by_message_id_and_by_publish_time(client: Client) -> None:
    topic = "persistent://public/default/reader-seek"
    first = await publish(client, topic, ["old-0", "old-1"], batched=False)
    boundary_ms = int(time.time() * 1000) + 1
    await wait_for(lambda: time.time() * 1000 > boundary_ms + 1, timeout_s=5)  # later publish times
    await publish(client, topic, ["new-0", "new-1"], batched=False)
    reader = await client.create_reader(topic, MessageId.latest)
    await reader.seek(first[0])
    assert await drain_reader(reader, 3) == ["old-1", "new-0", "new-1"], "exclusive: after the id"
    await reader.seek(boundary_ms)
    assert await drain_reader(reader, 2) == ["new-0", "new-1"]
    await reader.seek(MessageId.earliest)
    assert (await reader.read_next(5000)).data() == b"old-0"


async def test_a_readers_subscription_is_non_durable_and_ends_with_it(client: Client, cluster: ProcessCluster) -> None:
    topic = "reader-non-durable"
    await publish(client, topic, ["x"], batched=False)
    reader = await client.create_reader(topic, MessageId.earliest, reader_name="my-reader")
    stats = await asyncio.to_thread(topic_stats, cluster, topic)
    ((name, subscription),) = stats["subscriptions"].items()
    assert name.startswith("reader-") and subscription["isDurable"] is False
    assert [c["consumerName"] for c in subscription["consumers"]] == ["my-reader"]
    await reader.close()
    await wait_for(
        lambda: asyncio.to_thread(lambda: not topic_stats(cluster, topic)["subscriptions"]),
        timeout_s=10,
        message="the reader's subscription outlived it",
    )
