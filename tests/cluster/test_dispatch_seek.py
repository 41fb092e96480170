"""SEEK by message id and by publish time, and non-durable subscriptions, on a real cluster."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from minipulsar import Client, MessageId
from minipulsar.protocol import commands as cmd
from tests.support.cluster import make_cluster
from tests.support.dispatch import raw_connection
from tests.support.process import wait_for
from tests.support.web import topic_stats


async def test_seek_by_message_id_and_by_publish_time(tmp_path: Path) -> None:
    """Goal: seek moves the subscription — to a message id (that message comes next), to the
    first message published at or after a time, or to MessageId.earliest — even over messages
    already acknowledged, and drops what the receiver queue held from before.
    Method: 5 messages, then (once the clock moved on) 5 more; everything is received and
    acknowledged; each seek is followed by the messages expected from there, in order."""
    async with make_cluster(tmp_path) as cluster:
        async with Client(cluster.service_url) as client:
            consumer = await client.subscribe("seek", "sub")
            producer = await client.create_producer("seek")
            ids = [await producer.send(f"m-{i}".encode()) for i in range(5)]
            boundary_ms = int(time.time() * 1000) + 1
            await wait_for(lambda: time.time() * 1000 >= boundary_ms, interval_s=0.001)
            ids += [await producer.send(f"m-{i}".encode()) for i in range(5, 10)]
            for _ in range(10):
                await consumer.acknowledge(await consumer.receive(timeout_millis=10_000))

            async def next_data(count: int) -> list[bytes]:
                return [(await consumer.receive(timeout_millis=10_000)).data() for _ in range(count)]

            await consumer.seek(ids[3])
            assert await next_data(7) == [f"m-{i}".encode() for i in range(3, 10)]
            await consumer.seek(boundary_ms)
            assert await next_data(5) == [f"m-{i}".encode() for i in range(5, 10)]
            await consumer.seek(MessageId.earliest)
            assert (await next_data(1)) == [b"m-0"]
            await wait_for(lambda: len(consumer._queue) == 9, message="the rest after earliest did not come")
            await consumer.seek(ids[8])  # the queue (m-1 … m-9) is dropped
            assert await next_data(2) == [b"m-8", b"m-9"]
            stats = topic_stats(cluster, "seek")["subscriptions"]["sub"]
            assert stats["msgBacklog"] == 2


async def test_non_durable_subscription_starts_at_its_message_id_and_ends_with_its_consumer(tmp_path: Path) -> None:
    """Goal: SUBSCRIBE durable=False with start_message_id reads from that entry (inclusive),
    and the subscription disappears with its consumer (a Reader's lifecycle).
    Method: 6 messages; a raw non-durable subscription from the 4th receives the last 3; once
    its consumer closes the topic's stats no longer list it."""
    async with make_cluster(tmp_path) as cluster:
        async with Client(cluster.service_url) as client:
            producer = await client.create_producer("reader")
            ids = [await producer.send(f"m-{i}".encode()) for i in range(6)]
        connection = await raw_connection(cluster)
        try:
            await connection.request(
                cmd.Subscribe,
                topic="persistent://public/default/reader",
                subscription="reader-1",
                consumer_id=1,
                durable=False,
                start_message_id=[ids[3].ledger_id(), ids[3].entry_id()],
            )
            connection.send(cmd.Flow(consumer_id=1, permits=100))
            await wait_for(lambda: len(connection.messages) == 3, message="the reader got no messages")
            assert [m.entry_id for m in connection.messages] == [i.entry_id() for i in ids[3:]]
            assert "reader-1" in topic_stats(cluster, "reader")["subscriptions"]
            await connection.request(cmd.CloseConsumer, consumer_id=1)
            await wait_for(
                lambda: "reader-1" not in topic_stats(cluster, "reader")["subscriptions"],
                message="the non-durable subscription outlived its consumer",
            )
        finally:
            connection.close()
            await asyncio.wait_for(connection.wait_closed(), 10)
