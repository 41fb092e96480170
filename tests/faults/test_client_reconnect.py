"""Reconnection on a real cluster: producers and a
consumer ride through a broker restart — or a bundle unload — in the middle of a
50,000-message batched send, and with broker deduplication every message is consumed exactly
once, in order per producer."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from minipulsar import Client, InitialPosition, MessageId, Timeout
from minipulsar.cli.admin import AdminClient
from tests.support.cluster import ProcessCluster, make_cluster
from tests.support.process import wait_for

TOPIC = "reconnect"
PRODUCERS = 2
PER_PRODUCER = 25_000
DISRUPT_AFTER = 8_000
"""Receipts before the disruption starts: early enough that most of the send is still ahead."""
DEDUP = {"brokerDeduplicationEnabled": True}


class Sent:
    """Receipts and errors of one producer's send_async callbacks."""

    def __init__(self) -> None:
        self.acked = 0
        self.errors: list[BaseException] = []

    def __call__(self, error, message_id) -> None:
        if error is None:
            self.acked += 1
        else:
            self.errors.append(error)


async def send_through(cluster: ProcessCluster, service_url: str, disrupt: Callable[[], Awaitable[None]]) -> None:
    """2 named producers queue 25,000 messages each with send_async (blocking when 1000 are
    pending); a consumer subscribed before does not read yet, so its receiver queue is full
    when ``disrupt()`` runs, after 8,000 receipts; flush; every callback succeeded; then the
    consumer receives exactly each producer's 0..24,999 in order, and nothing more."""
    async with Client(service_url, operation_timeout_seconds=60) as client:
        consumer = await client.subscribe(TOPIC, "check", initial_position=InitialPosition.Earliest)
        producers = [
            await client.create_producer(TOPIC, producer_name=f"p{i}", block_if_queue_full=True)
            for i in range(PRODUCERS)
        ]
        sent = [Sent() for _ in producers]
        for n in range(PER_PRODUCER):
            for index, producer in enumerate(producers):
                producer.send_async(b"p%d-%d" % (index, n), sent[index])

        def receipts() -> int:
            return sum(s.acked for s in sent)

        await wait_for(
            lambda: receipts() >= DISRUPT_AFTER, timeout_s=30, interval_s=0.002, message="the first receipts never came"
        )
        assert consumer._queue, "the consumer holds messages that the broker will send again"
        await disrupt()
        assert receipts() < PRODUCERS * PER_PRODUCER / 2, "the disruption came in the middle of the send"
        await asyncio.wait_for(asyncio.gather(*(p.flush() for p in producers)), 60)

        assert [s.errors for s in sent] == [[] for _ in producers]
        assert receipts() == PRODUCERS * PER_PRODUCER
        assert all(p._handler.reconnections >= 1 for p in producers)
        # the consumer reconnects on its own schedule (back-off): it may still be on its way
        await wait_for(
            lambda: consumer._handler.reconnections >= 1, timeout_s=30, message="the consumer never reconnected"
        )

        received: list[list[int]] = [[] for _ in producers]
        for _ in range(PRODUCERS * PER_PRODUCER):
            message = await consumer.receive(timeout_millis=20_000)
            index, n = message.data().split(b"-")
            received[int(index[1:])].append(int(n))
            await consumer.acknowledge(message)
        for index in range(PRODUCERS):
            assert received[index] == list(range(PER_PRODUCER)), f"producer p{index}: loss, duplicate or reorder"
        with pytest.raises(Timeout):
            await consumer.receive(timeout_millis=300)


@pytest.mark.parametrize("kill", [False, True], ids=["stop", "kill"])
async def test_a_batched_send_survives_a_broker_restart_exactly_once(tmp_path: Path, kill: bool) -> None:
    """Goal: across a broker restart (SIGTERM or SIGKILL) in the middle of a batched send,
    producers resend what has no receipt and, the broker deduplicating by (producer name,
    sequence id), nothing is lost or stored twice; a consumer subscribed throughout drops the
    messages its receiver queue held (the broker sends them again) instead of delivering twice.
    Method: :func:`send_through`, the disruption restarting the broker on its port."""
    async with make_cluster(tmp_path, broker_settings=DEDUP) as cluster:
        await send_through(cluster, cluster.service_url, lambda: cluster.restart_broker(kill=kill, same_ports=True))


async def test_a_batched_send_survives_a_bundle_unload_exactly_once(tmp_path: Path) -> None:
    """Goal: the same when the topic's bundle is unloaded: the broker closes producers and
    consumer (CLOSE_PRODUCER/CLOSE_CONSUMER), they look the topic up again and re-attach
    wherever it went. Method: :func:`send_through` on two brokers, the disruption unloading the
    namespace through the admin REST."""
    async with make_cluster(tmp_path, broker_settings=DEDUP, brokers=2) as cluster:
        admin = AdminClient(f"http://{cluster.broker.host}:{cluster.broker.http_port}", 30)

        async def unload() -> None:
            await asyncio.to_thread(admin.request, "PUT", "/admin/v2/namespaces/public/default/unload")

        await send_through(cluster, "pulsar://" + ",".join(b.address for b in cluster.brokers), unload)


async def test_a_reader_resumes_after_the_last_message_it_returned_across_a_restart(tmp_path: Path) -> None:
    """Goal: a Reader (a non-durable subscription: the new broker knows nothing of it) continues
    after a broker restart from the message after the last one it returned — inside a batch
    too — without a gap or a repeat. Method: 100 messages in batches of 8; read 30 (message 29
    is in the middle of a batch); restart the broker on its port; read the other 70."""
    async with make_cluster(tmp_path) as cluster:
        async with Client(cluster.service_url, operation_timeout_seconds=60) as client:
            producer = await client.create_producer(
                "read-on", batching_max_messages=8, batching_max_publish_delay_ms=1000
            )
            await asyncio.gather(*(producer.send(b"%d" % i) for i in range(100)))
            reader = await client.create_reader("read-on", MessageId.earliest)
            first = [int((await reader.read_next(10_000)).data()) for _ in range(30)]
            await cluster.restart_broker(same_ports=True)
            rest = [int((await reader.read_next(20_000)).data()) for _ in range(70)]
            assert first + rest == list(range(100))
            assert reader._consumer._handler.reconnections == 1


async def test_a_reader_that_seeked_resumes_at_the_seek_target_across_a_restart(tmp_path: Path) -> None:
    """Goal: a Reader that seeked and read nothing since resumes at the seek target after a
    broker restart, not at its original start. Method: 20 unbatched messages; seek to message
    9's id (exclusive: 10 comes next), restart, read; then seek by the publish time of message
    15, restart, read."""
    async with make_cluster(tmp_path) as cluster:
        async with Client(cluster.service_url, operation_timeout_seconds=60) as client:
            producer = await client.create_producer("seek-on", batching_enabled=False)
            ids = [await producer.send(b"%d" % i) for i in range(20)]
            reader = await client.create_reader("seek-on", MessageId.earliest)
            assert int((await reader.read_next(10_000)).data()) == 0
            await reader.seek(ids[9])
            await cluster.restart_broker(same_ports=True)
            assert int((await reader.read_next(20_000)).data()) == 10

            consumer = await client.subscribe("seek-on", "times", initial_position=InitialPosition.Earliest)
            times = [(await consumer.receive(10_000)).publish_timestamp() for _ in range(20)]
            await reader.seek(times[15])
            await cluster.restart_broker(same_ports=True)
            first_at_that_time = min(i for i, t in enumerate(times) if t >= times[15])
            assert int((await reader.read_next(20_000)).data()) == first_at_that_time
            assert reader._consumer._handler.reconnections == 2
