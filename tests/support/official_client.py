"""Helpers of the tests that drive Pulsar's official client (``pulsar-client``) against a
real cluster: topic names of their own, bounded receives, a producer's burst."""

from __future__ import annotations

import asyncio
import itertools

import pulsar
import pulsar.asyncio

RECEIVE_MS = 10_000
"""How long one receive may wait before the test fails."""

_topics = itertools.count()


def official_topic(stem: str) -> str:
    """A topic no other test uses: ``persistent://public/default/official-<stem>-<n>``."""
    return f"persistent://public/default/official-{stem}-{next(_topics)}"


def receive_each(consumer: pulsar.Consumer, count: int) -> list[pulsar.Message]:
    """``count`` messages, each within :data:`RECEIVE_MS` (``pulsar.Timeout`` fails the test)."""
    return [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(count)]


async def receive_each_async(consumer: pulsar.asyncio.Consumer, count: int) -> list[pulsar.Message]:
    """:func:`receive_each` for a ``pulsar.asyncio`` consumer."""
    return [await asyncio.wait_for(consumer.receive(), RECEIVE_MS / 1000) for _ in range(count)]


def produce_burst(client: pulsar.Client, topic: str, count: int, **producer_settings: object) -> list[bytes]:
    """``count`` messages ``m-0 …`` sent asynchronously by a new producer, flushed, then the
    producer closed; returns the payloads in order."""
    producer = client.create_producer(topic, **producer_settings)
    payloads = [f"m-{i}".encode() for i in range(count)]
    for payload in payloads:
        producer.send_async(payload, None)
    producer.flush()
    producer.close()
    return payloads


CHUNKED_SIZE = 12 * 1024 * 1024
"""A message above the broker's 5 MiB maxMessageSize: three chunks."""


def chunked_round_trip(service_url: str, topic: str) -> tuple[bytes, bytes]:
    """A message of :data:`CHUNKED_SIZE` bytes and a small one after it, sent by a chunking
    producer (synchronous client: the chunks go out one by one) and received by a new
    consumer; returns the two payloads received."""
    client = pulsar.Client(service_url, operation_timeout_seconds=30)
    try:
        consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False, chunking_enabled=True)
        producer.send(bytes(range(256)) * (CHUNKED_SIZE // 256))
        producer.send(b"after the chunks")
        first, second = receive_each(consumer, 2)
        return first.data(), second.data()
    finally:
        client.close()
