"""Redelivery on a real cluster: negative acks, ack timeouts, consumers leaving with unacked
messages, and acknowledgements that survive a broker restart."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from minipulsar import Client, ConsumerType
from minipulsar.client.exceptions import CumulativeAcknowledgementNotAllowedError
from tests.support.cluster import make_cluster


async def _send(client: Client, topic: str, count: int) -> list:
    producer = await client.create_producer(topic)
    return [await producer.send(f"m-{i}".encode()) for i in range(count)]


async def test_negative_ack_redelivers_after_the_delay_with_a_growing_count(cluster) -> None:
    """Goal: a negatively acknowledged message comes back after negative_ack_redelivery_delay_ms
    with redelivery_count 1, then 2; on Shared only that message comes back.
    Method: 5 messages, ack 4, nack m-2 twice, measuring the delay."""
    async with Client(cluster.service_url) as client:
        consumer = await client.subscribe(
            "nack", "sub", consumer_type=ConsumerType.Shared, negative_ack_redelivery_delay_ms=300
        )
        await _send(client, "nack", 5)
        for _ in range(5):
            message = await consumer.receive(timeout_millis=10_000)
            if message.data() == b"m-2":
                nacked = message
            else:
                await consumer.acknowledge(message)
        assert nacked.redelivery_count() == 0
        for expected_count in (1, 2):
            started = time.monotonic()
            consumer.negative_acknowledge(nacked)
            nacked = await consumer.receive(timeout_millis=10_000)
            assert time.monotonic() - started >= 0.3
            assert (nacked.data(), nacked.redelivery_count()) == (b"m-2", expected_count)
        await consumer.acknowledge(nacked)
        with pytest.raises(CumulativeAcknowledgementNotAllowedError):
            await consumer.acknowledge_cumulative(nacked)


async def test_negative_ack_on_exclusive_redelivers_everything_unacknowledged(cluster) -> None:
    """Goal: on Exclusive the broker can only rewind, so a nack redelivers every unacknowledged
    message (as Pulsar): after acking m-0 and nacking m-1, m-1 and m-2 come again."""
    async with Client(cluster.service_url) as client:
        consumer = await client.subscribe("nack-excl", "sub", negative_ack_redelivery_delay_ms=100)
        await _send(client, "nack-excl", 3)
        received = [await consumer.receive(timeout_millis=10_000) for _ in range(3)]
        await consumer.acknowledge(received[0])
        consumer.negative_acknowledge(received[1])
        again = [await consumer.receive(timeout_millis=10_000) for _ in range(2)]
        assert [(m.data(), m.redelivery_count()) for m in again] == [(b"m-1", 1), (b"m-2", 1)]


async def test_ack_timeout_redelivers_a_message_not_acknowledged_in_time(cluster) -> None:
    """Goal: with unacked_messages_timeout_ms a received message that is not acknowledged in
    time is delivered again (count 1); an acknowledged one is not."""
    async with Client(cluster.service_url) as client:
        consumer = await client.subscribe(
            "ack-timeout", "sub", consumer_type=ConsumerType.Shared, unacked_messages_timeout_ms=300
        )
        await _send(client, "ack-timeout", 2)
        first, second = [await consumer.receive(timeout_millis=10_000) for _ in range(2)]
        await consumer.acknowledge(first)
        again = await consumer.receive(timeout_millis=10_000)
        assert (again.data(), again.redelivery_count()) == (second.data(), 1)
        await consumer.acknowledge(again)


async def test_unacknowledged_messages_of_a_leaving_consumer_go_to_the_others(cluster) -> None:
    """Goal: on Shared, messages a consumer received but did not acknowledge are sent to the
    remaining consumer when it disconnects (its whole client goes away), counted as redelivered."""
    async with Client(cluster.service_url) as stays:
        staying = await stays.subscribe("leave", "sub", consumer_type=ConsumerType.Shared, receiver_queue_size=1)
        leaving_client = Client(cluster.service_url)
        leaving = await leaving_client.subscribe(
            "leave", "sub", consumer_type=ConsumerType.Shared, receiver_queue_size=100
        )
        await _send(stays, "leave", 20)
        first = await staying.receive(timeout_millis=10_000)
        await staying.acknowledge(first)
        taken = [await leaving.receive(timeout_millis=10_000) for _ in range(5)]
        for message in taken[:2]:
            await leaving.acknowledge(message)
        await leaving_client.close()
        rest = []
        while len(rest) < 17:
            message = await staying.receive(timeout_millis=10_000)
            rest.append(message)
            await staying.acknowledge(message)
        seen = {first.data(), *(m.data() for m in taken[:2]), *(m.data() for m in rest)}
        assert seen == {f"m-{i}".encode() for i in range(20)}
        assert {m.data() for m in taken[2:]} <= {m.data() for m in rest if m.redelivery_count() == 1}


@pytest.mark.parametrize("kill", [False, True], ids=["stop", "kill"])
async def test_acknowledgements_survive_a_broker_restart(tmp_path: Path, kill: bool) -> None:
    """Goal: individual acks (with holes) and cumulative acks hold across a broker restart:
    nothing acknowledged comes again, nothing unacknowledged is lost.
    Method: 20 messages; subscription "ind" acks 0-4, 10, 12, 14 one by one; "cum" acks up to 9
    cumulatively; the broker restarts (stopped, or killed); an "end" message is sent and each
    subscription receives exactly its unacknowledged messages, then "end"."""
    async with make_cluster(tmp_path) as cluster:
        async with Client(cluster.service_url) as client:
            individual = await client.subscribe("restart", "ind")
            cumulative = await client.subscribe("restart", "cum", consumer_type=ConsumerType.Failover)
            await _send(client, "restart", 20)
            for i in range(20):
                message = await individual.receive(timeout_millis=10_000)
                if i < 5 or i in (10, 12, 14):
                    await individual.acknowledge(message)
                message = await cumulative.receive(timeout_millis=10_000)
                if i == 9:
                    await cumulative.acknowledge_cumulative(message)
        await cluster.restart_broker(kill=kill)
        async with Client(cluster.service_url) as client:
            individual = await client.subscribe("restart", "ind")
            cumulative = await client.subscribe("restart", "cum", consumer_type=ConsumerType.Failover)
            producer = await client.create_producer("restart")
            await producer.send(b"end")
            for consumer, expected in (
                (individual, [5, 6, 7, 8, 9, 11, 13, 15, 16, 17, 18, 19]),
                (cumulative, list(range(10, 20))),
            ):
                got = []
                while (data := (await consumer.receive(timeout_millis=10_000)).data()) != b"end":
                    got.append(int(data[2:]))
                assert got == expected
