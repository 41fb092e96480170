"""Closing the topics of a bundle that is being unloaded, and telling their clients.

Per topic, in this order, so that no acknowledged message is lost and none is delivered again
after its acknowledgement:

1. detach its producers from their connections: SENDs that arrive later are dropped (the client
   resends everything unreceipted once it reconnects), and the receipts of SENDs already being
   persisted still go out — we wait for the last one (adds complete in order);
2. detach its consumers (their unacknowledged messages go back to the subscription);
3. close the topic: subscriptions flush their cursors' mark-delete positions, the managed ledger
   closes its current ledger, so the next owner opens it without recovery work;

and only after ownership was released, :meth:`DetachedClients.notify` sends CLOSE_PRODUCER /
CLOSE_CONSUMER (with the new owner's URL when known) so each client looks the topic up again.

Invariants:

- no CLOSE_PRODUCER / CLOSE_CONSUMER goes out before the topic closed;
- a topic closes only after its in-flight sends completed or ``drain_timeout_s`` passed;
- one topic failing to close does not stop the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from minipulsar.broker.topics.base import Consumer
from minipulsar.broker.topics.consumer import ConsumerConnection
from minipulsar.broker.topics.counters import ProducerConnection, TopicCounters
from minipulsar.errors import MiniPulsarError
from minipulsar.topic_name import TopicName

log = logging.getLogger(__name__)


class HasConsumers(Protocol):
    @property
    def consumers(self) -> Sequence[Consumer]: ...


class UnloadedTopic(Protocol):
    """What an unload reads of a topic (a :class:`~broker.topics.base.Topic`)."""

    @property
    def name(self) -> TopicName: ...

    @property
    def counters(self) -> TopicCounters:
        """Its producers."""
        ...

    @property
    def subscriptions(self) -> Mapping[str, HasConsumers]: ...

    def fence(self, error: MiniPulsarError) -> None:
        """Write nothing more to the metadata store (the ownership is lost)."""
        ...

    async def close(self) -> None: ...


T = TypeVar("T", bound=UnloadedTopic)


@dataclass(slots=True)
class DetachedClients:
    """Producers and consumers taken off unloaded topics, to be told once the bundle is released."""

    producers: list[tuple[ProducerConnection, int]] = field(default_factory=list)
    consumers: list[tuple[ConsumerConnection, int]] = field(default_factory=list)

    def extend(self, other: DetachedClients) -> None:
        self.producers += other.producers
        self.consumers += other.consumers

    def notify(self, assigned_broker_url: str | None = None) -> None:
        for producer_connection, producer_id in self.producers:
            producer_connection.send_close_producer(producer_id, assigned_broker_url)
        for consumer_connection, consumer_id in self.consumers:
            consumer_connection.send_close_consumer(consumer_id, assigned_broker_url)


def detach_clients(topic: UnloadedTopic) -> tuple[DetachedClients, list[asyncio.Future[None]]]:
    """Step 1 and 2 for ``topic``; returns the detached clients and, per producer with adds
    still in flight, a future done once they are."""
    detached = DetachedClients()
    in_flight: list[asyncio.Future[None]] = []
    for producer in list(topic.counters.producers.values()):
        if not producer.connection.detach_producer(producer.producer_id):
            continue
        detached.producers.append((producer.connection, producer.producer_id))
        drained = producer.drained()
        if drained is not None and not drained.done():
            in_flight.append(drained)
    for subscription in list(topic.subscriptions.values()):
        for consumer in list(subscription.consumers):
            connection = consumer.connection
            if connection.detach_consumer(consumer.consumer_id):
                detached.consumers.append((connection, consumer.consumer_id))
    return detached, in_flight


async def close_topic(topic: UnloadedTopic, drain_timeout_s: float) -> DetachedClients:
    """Steps 1–3 for one topic. Never raises for a topic that fails to close (it is logged)."""
    detached, in_flight = detach_clients(topic)
    if in_flight:
        _, pending = await asyncio.wait(in_flight, timeout=drain_timeout_s)
        if pending:
            log.warning(
                "%s: %d sends still persisting after %.1fs; closing anyway (clients resend them)",
                topic.name,
                len(pending),
                drain_timeout_s,
            )
    try:
        await topic.close()
    except MiniPulsarError as error:
        log.warning("%s: closing failed: %s", topic.name, error)
    return detached


async def close_topics(
    loading: Sequence[asyncio.Future[T]], drain_timeout_s: float, fence: MiniPulsarError | None = None
) -> DetachedClients:
    """Close every topic of ``loading`` (futures from the broker's topic map, already removed from
    it); topics still loading are awaited first. Runs the topics concurrently. With ``fence``
    (the ownership is lost) each topic is fenced first: it closes without a metadata write."""
    if loading:
        await asyncio.wait(loading)
    topics = [f.result() for f in loading if not f.cancelled() and f.exception() is None]
    if fence is not None:
        for topic in topics:
            topic.fence(fence)
    results = await asyncio.gather(*(close_topic(t, drain_timeout_s) for t in topics), return_exceptions=True)
    detached = DetachedClients()
    for topic, result in zip(topics, results):
        if isinstance(result, BaseException):
            log.error("%s: unloading failed", topic.name, exc_info=result)
        else:
            detached.extend(result)
    return detached
