"""Flow control with batched entries, on a real cluster: permits count messages, and only
``preciseDispatcherFlowControl=true`` keeps a consumer of 100-message entries near its
receiver queue."""

from __future__ import annotations

from pathlib import Path

from minipulsar import Client, InitialPosition
from tests.support.cluster import make_cluster
from tests.support.dispatch import BatchProducer
from tests.support.process import wait_for
from tests.support.web import consumer_stats

ENTRIES = 30
PER_ENTRY = 100
QUEUE = 100


async def _fill(cluster, topic: str) -> None:
    producer = await BatchProducer.create(cluster, f"persistent://public/default/{topic}")
    try:
        for i in range(ENTRIES):
            await producer.send_batch(PER_ENTRY, data=f"e{i}".encode())
    finally:
        await producer.close()


async def test_precise_flow_control_keeps_a_consumer_within_one_entry_of_its_queue(tmp_path: Path) -> None:
    """Goal: with preciseDispatcherFlowControl=true a consumer with receiver_queue_size=100 on
    100-message entries never holds more than its queue plus one entry.
    Method: 30 entries of 100 messages are stored first; the consumer subscribes from the
    earliest; before the application takes anything the broker has pushed exactly one entry
    (100 messages) and stopped (no permits left); then, receiving everything, the queue never
    holds more than 100 + 100 messages."""
    async with make_cluster(tmp_path, broker_settings={"preciseDispatcherFlowControl": True}) as cluster:
        await _fill(cluster, "precise")
        async with Client(cluster.service_url) as client:
            consumer = await client.subscribe(
                "precise", "sub", receiver_queue_size=QUEUE, initial_position=InitialPosition.Earliest
            )
            await wait_for(lambda: len(consumer._queue) >= PER_ENTRY, message="the first entry never came")
            await wait_for(
                lambda: consumer_stats(cluster, "precise", "sub")[0]["availablePermits"] <= 0,
                message="the broker still has permits for the consumer",
            )
            await consumer.get_last_message_id()  # a round trip: whatever was pushed has arrived
            assert len(consumer._queue) == PER_ENTRY
            most = 0
            for _ in range(ENTRIES * PER_ENTRY):
                message = await consumer.receive(timeout_millis=10_000)
                most = max(most, len(consumer._queue) + 1)
            assert message.data() == f"e{ENTRIES - 1}".encode()
            assert most <= QUEUE + PER_ENTRY


async def test_without_precise_flow_control_permits_are_spent_per_entry(tmp_path: Path) -> None:
    """Goal: show the contrast — Pulsar's default reads min(permits, batch) *entries*, so the
    same consumer is sent every one of the 30 entries, 3000 messages for 100 permits.
    Method: as above with the default config; the queue fills to 3000 before any receive."""
    async with make_cluster(tmp_path) as cluster:
        await _fill(cluster, "imprecise")
        async with Client(cluster.service_url) as client:
            consumer = await client.subscribe(
                "imprecise", "sub", receiver_queue_size=QUEUE, initial_position=InitialPosition.Earliest
            )
            await wait_for(
                lambda: len(consumer._queue) == ENTRIES * PER_ENTRY, message="the broker did not push every entry"
            )
            stats = consumer_stats(cluster, "imprecise", "sub")[0]
            assert stats["availablePermits"] == QUEUE - ENTRIES * PER_ENTRY
