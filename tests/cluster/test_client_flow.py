"""Consumer flow control on a real cluster: permits count
messages of batched entries; a slow consumer holds no more than its queue plus one batch, and
resumes as it acknowledges."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from minipulsar import Client, ConsumerType, InitialPosition, Timeout
from tests.support.cluster import make_cluster
from tests.support.process import wait_for
from tests.support.web import consumer_stats

TOPIC = "slow"
QUEUE = 10
BATCH = 25
MESSAGES = 400
UNACKED_MAX = 60
"""maxUnackedMessagesPerConsumer: the broker stops a Shared consumer with this many unacknowledged."""
SETTINGS = {"preciseDispatcherFlowControl": True, "maxUnackedMessagesPerConsumer": UNACKED_MAX}


async def test_a_slow_consumer_holds_at_most_its_queue_plus_one_batch_and_resumes_as_it_acknowledges(
    tmp_path: Path,
) -> None:
    """Goal: with receiver_queue_size=10 and 25-message batches the consumer never holds more
    than 10 + 25 messages; a consumer that stops acknowledging is stopped by the broker's
    unacknowledged limit, and acknowledging lets everything through, in order.
    Method: 400 messages in batches of 25 (16 entries) are stored; a Shared consumer subscribes
    from the earliest. (1) Before the application takes anything the broker pushed one entry
    and has no permits left. (2) Receiving without acknowledging stops near 60 unacknowledged
    (a receive times out). (3) Acknowledging them, then receiving and acknowledging one by one,
    gets the other messages in order. The queue is measured at every receive."""
    async with make_cluster(tmp_path, broker_settings=SETTINGS) as cluster:
        async with Client(cluster.service_url) as client:
            producer = await client.create_producer(
                TOPIC, batching_max_messages=BATCH, batching_max_publish_delay_ms=1000
            )
            ids = await asyncio.gather(*(producer.send(f"{i}".encode()) for i in range(MESSAGES)))
            assert len({(m.ledger_id(), m.entry_id()) for m in ids}) == MESSAGES // BATCH

            consumer = await client.subscribe(
                TOPIC,
                "sub",
                consumer_type=ConsumerType.Shared,
                receiver_queue_size=QUEUE,
                initial_position=InitialPosition.Earliest,
            )
            await wait_for(lambda: len(consumer._queue) > 0, message="nothing was pushed")
            await wait_for(
                lambda: consumer_stats(cluster, TOPIC, "sub")[0]["availablePermits"] <= 0, message="permits left"
            )
            await consumer.get_last_message_id()  # whatever the broker pushed has arrived
            assert len(consumer._queue) == BATCH, "one entry for 10 permits"

            held_max = 0
            unacked = []
            with pytest.raises(Timeout):
                while True:
                    unacked.append(await consumer.receive(timeout_millis=500))
                    held_max = max(held_max, len(consumer._queue) + 1)
            assert UNACKED_MAX <= len(unacked) <= UNACKED_MAX + BATCH, "stopped by the unacknowledged limit"

            for message in unacked:
                await consumer.acknowledge(message)
            received = [int(m.data()) for m in unacked]
            while len(received) < MESSAGES:
                message = await consumer.receive(timeout_millis=10_000)
                held_max = max(held_max, len(consumer._queue) + 1)
                received.append(int(message.data()))
                await consumer.acknowledge(message)
            assert received == list(range(MESSAGES))
            assert held_max <= QUEUE + BATCH
