"""PartitionedProducer: one producer per partition of a partitioned topic, behind a router.

A partitioned topic ``t`` with N partitions is N ordinary topics ``t-partition-0`` …; this
class holds one :class:`client.producer.Producer` per partition (created through the client,
so each has its own connection to the partition's owner, batching, pending queue and
reconnection) and asks its :mod:`client.routing` router where each message goes. The ids it
returns carry the partition index, as Pulsar's.

Producers are created when the partitioned producer is (partition 0 first: without a
``producer_name`` the broker names it and the other partitions reuse that name, so that
deduplication sees one producer per partition), or on a partition's first message with
``lazy_start_partitioned_producers``. Ordering holds per partition: messages of one key (or
of one round-robin window) keep their order; across partitions there is none.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from minipulsar.client.exceptions import AlreadyClosed
from minipulsar.client.message_id import MessageId
from minipulsar.client.routing import MessageRouter, OutgoingMessage
from minipulsar.topic_name import TopicName

if TYPE_CHECKING:
    from minipulsar.client.producer import Producer

PartitionProducerFactory = Callable[[str, "str | None"], Awaitable["Producer"]]
"""``(partition topic, producer_name) -> Producer``: how the client creates one partition's producer."""


class PartitionedProducer:
    def __init__(
        self,
        topic: str,
        num_partitions: int,
        router: MessageRouter,
        factory: PartitionProducerFactory,
        *,
        producer_name: str | None = None,
    ) -> None:
        self._topic = topic
        self._name = producer_name
        self._router = router
        self._factory = factory
        self._partition_topics = [str(TopicName.parse(topic).partition(i)) for i in range(num_partitions)]
        self._producers: dict[int, Producer] = {}
        self._starting: dict[int, asyncio.Future[Producer]] = {}
        self._closed = False

    @classmethod
    async def create(
        cls,
        topic: str,
        num_partitions: int,
        router: MessageRouter,
        factory: PartitionProducerFactory,
        *,
        producer_name: str | None = None,
        lazy: bool = False,
    ) -> PartitionedProducer:
        """Start the partitions' producers (only partition 0 when ``lazy``: it names the others);
        on any failure close those already started and raise."""
        producer = cls(topic, num_partitions, router, factory, producer_name=producer_name)
        try:
            await producer._partition(0)
            if not lazy:
                await asyncio.gather(*(producer._partition(i) for i in range(1, num_partitions)))
        except BaseException:
            await producer.close()
            raise
        return producer

    # -- the pulsar API -------------------------------------------------------------------------

    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._name or ""

    def num_partitions(self) -> int:
        return len(self._partition_topics)

    def last_sequence_id(self) -> int:
        """The highest sequence id acknowledged on any partition (Pulsar: the max); -1: none."""
        return max((p.last_sequence_id() for p in self._producers.values()), default=-1)

    def is_connected(self) -> bool:
        return not self._closed and all(p.is_connected() for p in self._producers.values())

    async def send(
        self,
        content: bytes | None,
        properties: dict | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        event_timestamp: int | None = None,
        sequence_id: int | None = None,
        **options: Any,
    ) -> MessageId:
        """Route the message, send it on that partition's producer and return its id (with the
        partition index set). Same errors as :meth:`client.producer.Producer.send`."""
        partition, kwargs = self._route(
            content, properties, partition_key, ordering_key, event_timestamp, sequence_id, options
        )
        producer = await self._partition(partition)
        message_id = await producer.send(content, **kwargs)
        return _on_partition(message_id, partition)

    def send_async(
        self,
        content: bytes | None,
        callback: Callable[[Any, MessageId | None], None],
        properties: dict | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        event_timestamp: int | None = None,
        sequence_id: int | None = None,
        **options: Any,
    ) -> None:
        """Send without awaiting; ``callback(error, message_id)`` runs once it completes."""
        partition, kwargs = self._route(
            content, properties, partition_key, ordering_key, event_timestamp, sequence_id, options
        )

        def done(error: Any, message_id: MessageId | None) -> None:
            callback(error, None if message_id is None else _on_partition(message_id, partition))

        producer = self._producers.get(partition)
        if producer is not None:
            producer.send_async(content, done, **kwargs)
            return

        def started(task: asyncio.Task) -> None:
            if task.cancelled():
                done(AlreadyClosed(f"the producer of {self._topic} is closed"), None)
            elif task.exception() is not None:
                done(task.exception(), None)
            else:
                task.result().send_async(content, done, **kwargs)

        asyncio.get_running_loop().create_task(self._partition(partition)).add_done_callback(started)

    async def flush(self) -> None:
        await asyncio.gather(*(p.flush() for p in list(self._producers.values())))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for pending in self._starting.values():
            pending.cancel()
        results = await asyncio.gather(*(p.close() for p in self._producers.values()), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException) and not isinstance(r, AlreadyClosed)]
        if errors:
            raise errors[0]

    # -- internals ------------------------------------------------------------------------------

    def _route(
        self, content, properties, partition_key, ordering_key, event_timestamp, sequence_id, options: dict
    ) -> tuple[int, dict]:
        if self._closed:
            raise AlreadyClosed(f"the producer of {self._topic} is closed")
        outgoing = OutgoingMessage(content, properties, partition_key, ordering_key, event_timestamp)
        partition = self._router.choose_partition(outgoing, len(self._partition_topics))
        kwargs = {
            name: value
            for name, value in (
                ("properties", properties),
                ("partition_key", partition_key),
                ("ordering_key", ordering_key),
                ("event_timestamp", event_timestamp),
                ("sequence_id", sequence_id),
            )
            if value is not None
        }
        kwargs.update(options)
        return partition, kwargs

    async def _partition(self, index: int) -> Producer:
        """The producer of partition ``index``, created on first use (once, however many ask)."""
        producer = self._producers.get(index)
        if producer is not None:
            return producer
        if self._closed:
            raise AlreadyClosed(f"the producer of {self._topic} is closed")
        pending = self._starting.get(index)
        if pending is None:
            pending = asyncio.ensure_future(self._factory(self._partition_topics[index], self._name))
            self._starting[index] = pending
        try:
            producer = await asyncio.shield(pending)
        finally:
            self._starting.pop(index, None)
        if self._closed:
            await producer.close()
            raise AlreadyClosed(f"the producer of {self._topic} is closed")
        self._producers[index] = producer
        if self._name is None:
            self._name = producer.producer_name()
        return producer


def _on_partition(message_id: MessageId, partition: int) -> MessageId:
    return MessageId(partition, message_id.ledger_id(), message_id.entry_id(), message_id.batch_index())
