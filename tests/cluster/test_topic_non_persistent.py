"""Non-persistent topics on a real cluster: messages go straight
to connected consumers that have permits, the rest are dropped and counted, receipts carry no
durable position, and nothing is kept for a subscriber that comes later."""

from __future__ import annotations

import asyncio
from pathlib import Path

from minipulsar import Client, MessageId
from tests.support.cluster import make_cluster
from tests.support.process import wait_for
from tests.support.web import metrics_text, sample_value, topic_stats

TOPIC = "non-persistent://public/default/live"


async def test_delivery_within_permits_and_drops_beyond_them(tmp_path: Path) -> None:
    async with make_cluster(tmp_path, broker_settings={"statsUpdateFrequencyInSecs": 0.2}) as cluster:
        async with Client(cluster.service_url) as client:
            producer = await client.create_producer(TOPIC)
            assert await producer.send(b"before anyone listens") == MessageId(-1, -1, -1, -1)
            consumer = await client.subscribe(TOPIC, "sub", receiver_queue_size=5)
            for i in range(20):  # the consumer does not receive meanwhile: 5 permits, 15 drops
                assert await producer.send(f"m-{i}".encode()) == MessageId(-1, -1, -1, -1)

            def subscription() -> dict:
                return topic_stats(cluster, "live", domain="non-persistent")["subscriptions"]["sub"]

            await wait_for(
                lambda: subscription()["msgDropRate"] > 0, timeout_s=10, message="dropped messages were not counted"
            )
            stats = subscription()
            assert stats["msgOutCounter"] == 5
            assert stats["consumers"][0]["availablePermits"] == 0
            text = await asyncio.to_thread(metrics_text, cluster.broker)
            drop_rate = sample_value(text, "pulsar_subscription_msg_drop_rate", {"subscription": "sub", "topic": TOPIC})
            assert drop_rate is not None and drop_rate > 0, "a positive drop rate per subscription"

            received = [(await consumer.receive(timeout_millis=10_000)).data() for _ in range(5)]
            assert received == [f"m-{i}".encode() for i in range(5)], "the first ones, in order"
            await producer.send(b"after the queue drained")  # permits were returned: delivered
            assert (await consumer.receive(timeout_millis=10_000)).data() == b"after the queue drained"

            assert await consumer.get_last_message_id() == MessageId(-1, -1, 20, -1), "21 had a subscriber to go to"
            topic = topic_stats(cluster, "live", domain="non-persistent")
            assert topic["msgInCounter"] == 22 and topic["storageSize"] == 0
            internal = topic_stats(cluster, "live", "internalStats", domain="non-persistent")
            assert internal["numberOfEntries"] == 0 and internal["ledgers"] == [] and internal["cursors"] == {}
