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
