"""Publish throttling on a real cluster: a bookie slowed down (SIGSTOP/SIGCONT with a duty
cycle) while two producers push as fast as their pending limits allow — one with small
messages, which runs into its connection's ``maxPendingPublishRequestsPerConnection``, one
with large messages, which fills the broker-wide ``maxMessagePublishBufferSizeInMB``.

What must hold: the broker's bytes of unpersisted publishes
stay under ``maxMessagePublishBufferSizeInMB`` (plus what was already read off each socket
when the pause came — at most one read buffer per connection, as with Netty in Pulsar); the
broker pauses the producer connections (the producers' sends wait); nothing acknowledged is
lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from minipulsar import Client, InitialPosition
from tests.support.cluster import ProcessCluster, make_cluster
from tests.support.web import metrics_text, sample_value

LIMIT_MB = 1
SMALL_BYTES, LARGE_BYTES = 100, 64 * 1024
MAX_PENDING_PER_CONNECTION = 50
"""50 small messages are far below the byte limit; 50 large ones far above it."""
READ_BUFFER_BYTES = 256 * 1024
"""The most one socket read hands the broker (its receive buffer's pipeline capacity)."""
PRODUCE_FOR_S = 3.0
STOPPED_S, RUNNING_S = 0.2, 0.1


def exported(text: str, name: str) -> float:
    """The value of ``name`` in /metrics ``text``; fails when it is not exported."""
    value = sample_value(text, name)
    assert value is not None, f"{name} is not exported"
    return value


async def slow_bookie(cluster: ProcessCluster, stop: asyncio.Event) -> None:
    """Stop the bookie's process 2/3 of the time until ``stop`` is set; always leave it running."""
    bookie = cluster.bookies[0]
    try:
        while not stop.is_set():
            bookie.pause()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), STOPPED_S)
            bookie.resume()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), RUNNING_S)
    finally:
        bookie.resume()


async def produce(service_url: str, index: int, size: int, until: float, acked: dict[bytes, object]) -> None:
    """Keep up to 400 sends of ``size`` bytes in flight (more than the broker accepts) until ``until``."""
    in_flight = asyncio.Semaphore(400)
    pending: set[asyncio.Task] = set()
    async with Client(service_url) as client:
        # One SEND per message (the asyncio client batches by default): the per-connection
        # limit counts SENDs.
        producer = await client.create_producer(
            "throttled", block_if_queue_full=True, max_pending_messages=1000, batching_enabled=False
        )

        async def send(body: bytes) -> None:
            try:
                acked[body[:16]] = await producer.send(body)
            finally:
                in_flight.release()

        sequence = 0
        while time.monotonic() < until:
            await in_flight.acquire()
            body = f"{index}-{sequence:012d}".encode().ljust(16) + bytes(size - 16)
            sequence += 1
            task = asyncio.ensure_future(send(body))
            pending.add(task)
            task.add_done_callback(pending.discard)
        await asyncio.gather(*pending)


async def test_a_slow_bookie_throttles_producers_without_losing_messages(tmp_path: Path) -> None:
    settings = {
        "maxMessagePublishBufferSizeInMB": LIMIT_MB,
        "maxPendingPublishRequestsPerConnection": MAX_PENDING_PER_CONNECTION,
    }
    async with make_cluster(tmp_path, bookies=1, broker_settings=settings) as cluster:
        acked: dict[bytes, object] = {}
        observed_global, observed_throttled = 0.0, 0.0
        stop = asyncio.Event()
        slowing = asyncio.ensure_future(slow_bookie(cluster, stop))
        until = time.monotonic() + PRODUCE_FOR_S
        producers = asyncio.ensure_future(
            asyncio.gather(
                produce(cluster.service_url, 0, SMALL_BYTES, until, acked),
                produce(cluster.service_url, 1, LARGE_BYTES, until, acked),
            )
        )
        try:
            while not producers.done():
                text = await asyncio.to_thread(metrics_text, cluster.broker)
                observed_global = max(
                    observed_global, exported(text, "pulsar_broker_throttled_connections_global_limit")
                )
                observed_throttled = max(observed_throttled, exported(text, "pulsar_broker_throttled_connections"))
                await asyncio.wait({producers}, timeout=0.05)
        finally:
            stop.set()
            await slowing
        await producers

        text = await asyncio.to_thread(metrics_text, cluster.broker)
        limit = LIMIT_MB * 1024 * 1024
        peak = exported(text, "pulsar_broker_publish_buffer_max_usage")
        assert exported(text, "pulsar_broker_publish_buffer_limit") == limit
        assert exported(text, "pulsar_broker_publish_buffer_pauses_total") >= 1, "the buffer never filled"
        assert exported(text, "pulsar_broker_connection_pauses_total") >= 1, "the per-connection limit never held"
        assert observed_global == 2 and observed_throttled >= 2, "both producer connections were paused at once"
        assert limit <= peak <= limit + 2 * (READ_BUFFER_BYTES + LARGE_BYTES), f"peak {peak} bytes"
        assert exported(text, "pulsar_broker_publish_buffer_usage") == 0, "everything was persisted in the end"
        assert exported(text, "pulsar_broker_throttled_connections") == 0

        async with Client(cluster.service_url) as client:
            consumer = await client.subscribe("throttled", "check", initial_position=InitialPosition.Earliest)
            received = set()
            for _ in range(len(acked)):
                message = await consumer.receive(timeout_millis=10_000)
                received.add(message.data()[:16])
            assert received == set(acked), "every acknowledged message is stored, once"
            assert len(acked) > 300, f"only {len(acked)} messages went through"
