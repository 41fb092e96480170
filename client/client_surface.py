"""The Client's partitioned, multi-topic and reader entry points (a mixin of :class:`client.client.Client`).

They build on the client's single-topic paths — ``_create_single_producer(topic,
producer_name, **settings)`` and ``_subscribe_single(topic, subscription_name, **settings)``
— and wrap what those return:

- a partitioned topic's producer is a :class:`PartitionedProducer` over one producer per
  partition, each with ``min(max_pending_messages, max_pending_messages_across_partitions / N)``
  pending messages (Pulsar's rule);
- a list of topics, a regex, or a partitioned topic is consumed by a
  :class:`MultiTopicsConsumer` over one consumer per concrete topic (partitions expanded);
- a Reader is a non-durable, Exclusive subscription named ``reader-<10 hex>`` (Pulsar's naming).
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from minipulsar.client.backoff import Backoff
from minipulsar.client.enums import ConsumerType, InitialPosition
from minipulsar.client.exceptions import AlreadyClosed, PulsarException
from minipulsar.client.message_id import MessageId, is_earliest, is_latest
from minipulsar.client.multi_topics_consumer import MultiTopicsConsumer
from minipulsar.client.partitioned_producer import PartitionedProducer
from minipulsar.client.pattern_consumer import PatternConsumer, TopicsPattern
from minipulsar.client.reader import Reader
from minipulsar.client.retry import retry_until
from minipulsar.client.routing import HashingScheme, PartitionsRoutingMode, make_router
from minipulsar.errors import ConnectionClosedError, RequestTimeoutError
from minipulsar.protocol import commands as cmd
from minipulsar.topic_name import TopicName

if TYPE_CHECKING:
    from minipulsar.client.connection import ConnectionPool
    from minipulsar.client.consumer import Consumer
    from minipulsar.client.lookup import LookupService
    from minipulsar.client.producer import Producer


class ClientSurface:
    """Mixed into Client; ``self`` is the Client, which provides the members declared here."""

    _lookup: LookupService
    _pool: ConnectionPool
    _closed: bool
    _operation_timeout_s: float

    def _check_topic(self, topic: str) -> str:
        raise NotImplementedError

    async def _create_single_producer(self, topic: str, producer_name: str | None = None, **settings: Any) -> Producer:
        raise NotImplementedError

    async def _subscribe_single(self, topic: str, subscription_name: str, **settings: Any) -> Consumer:
        raise NotImplementedError

    # -- producers ------------------------------------------------------------------------------

    async def _create_partitioned_producer(
        self,
        topic: str,
        partitions: int,
        producer_name: str | None,
        settings: dict[str, Any],
        *,
        message_routing_mode: PartitionsRoutingMode,
        hashing_scheme: HashingScheme,
        message_router: Callable[[Any, int], int] | None,
        lazy: bool,
        max_pending_messages_across_partitions: int,
    ) -> PartitionedProducer:
        settings = dict(settings)
        if "max_pending_messages" in settings:  # Pulsar: min(per producer, across partitions / N)
            settings["max_pending_messages"] = max(
                1, min(settings["max_pending_messages"], max_pending_messages_across_partitions // partitions)
            )
        router = make_router(
            message_routing_mode,
            partitions,
            message_router=message_router,
            hashing_scheme=hashing_scheme,
            batching_enabled=settings.get("batching_enabled", True),
            batching_max_publish_delay_ms=settings.get("batching_max_publish_delay_ms", 10),
        )

        async def create(partition_topic: str, name: str | None) -> Any:
            return await self._create_single_producer(partition_topic, name, **settings)

        return await PartitionedProducer.create(
            topic, partitions, router, create, producer_name=producer_name, lazy=lazy
        )

    # -- consumers ------------------------------------------------------------------------------

    async def _subscribe_many(
        self,
        topics: list[str],
        subscription_name: str,
        settings: dict[str, Any],
        max_total_receiver_queue_size_across_partitions: int,
    ) -> MultiTopicsConsumer:
        if not topics:
            raise ValueError("subscribe needs at least one topic")
        settings = _one_consumer_name(settings)
        names = [self._check_topic(t) for t in topics]
        concrete = []
        for name, count in zip(names, await asyncio.gather(*(self._lookup.partition_count(n) for n in names))):
            concrete += [str(TopicName.parse(name).partition(i)) for i in range(count)] if count else [name]
        consumer = MultiTopicsConsumer(
            names[0] if len(names) == 1 else ",".join(names),
            subscription_name,
            self._child_factory(subscription_name, settings),
            **self._multi_options(settings, max_total_receiver_queue_size_across_partitions),
        )
        await consumer.add_topics(concrete)
        self._surface_closables().add(consumer)
        return consumer

    async def _subscribe_pattern(
        self,
        pattern: str | re.Pattern[str],
        subscription_name: str,
        settings: dict[str, Any],
        max_total_receiver_queue_size_across_partitions: int,
        pattern_auto_discovery_period: float,
    ) -> PatternConsumer:
        self._check_open()
        settings = _one_consumer_name(settings)
        consumer = PatternConsumer(
            TopicsPattern.parse(pattern),
            subscription_name,
            self._child_factory(subscription_name, settings),
            self._topics_of_namespace,
            pattern_auto_discovery_period=pattern_auto_discovery_period,
            **self._multi_options(settings, max_total_receiver_queue_size_across_partitions),
        )
        try:
            await consumer.start()
        except BaseException:
            await consumer.close()
            raise
        self._surface_closables().add(consumer)
        return consumer

    def _child_factory(self, subscription_name: str, settings: dict[str, Any]):
        async def subscribe(topic: str, receiver_queue_size: int) -> Any:
            return await self._subscribe_single(
                topic, subscription_name, **{**settings, "receiver_queue_size": receiver_queue_size}
            )

        return subscribe

    @staticmethod
    def _multi_options(settings: dict[str, Any], total_queue_size: int) -> dict[str, Any]:
        return {
            "receiver_queue_size": settings.get("receiver_queue_size", 1000),
            "max_total_receiver_queue_size_across_partitions": total_queue_size,
            "consumer_name": settings.get("consumer_name"),
            "batch_receive_policy": settings.get("batch_receive_policy"),
        }

    async def _topics_of_namespace(self, namespace: str, mode: str) -> list[str]:
        """GET_TOPICS_OF_NAMESPACE through the service URL; retried as lookups are (within the
        lookup timeout, a host that cannot be reached makes the service URL move on)."""
        self._check_open()
        lookup = self._lookup
        if hasattr(lookup, "topics_of_namespace"):  # the lookup service's own, when it has one
            return await lookup.topics_of_namespace(namespace, mode)

        async def attempt(remaining_s: float) -> list[str]:
            address = lookup.service_address
            try:
                connection = await self._pool.get(*address)
                response = await connection.request(
                    cmd.GetTopicsOfNamespace, timeout_s=remaining_s, namespace=namespace, mode=mode
                )
                assert isinstance(response, cmd.GetTopicsOfNamespaceResponse)
            except (ConnectionClosedError, RequestTimeoutError):
                lookup.service_url.failed(address)
                raise
            return list(response.topics)

        return await retry_until(
            time.monotonic() + lookup.lookup_timeout_s, attempt, Backoff(), f"topics of namespace {namespace}"
        )

    # -- readers --------------------------------------------------------------------------------

    async def create_reader(
        self,
        topic: str,
        start_message_id: MessageId,
        schema: Any = None,
        reader_listener: Any = None,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        subscription_role_prefix: str | None = None,
        is_read_compacted: bool = False,
        crypto_key_reader: Any = None,
        start_message_id_inclusive: bool = False,
        crypto_failure_action: Any = None,
    ) -> Reader:
        """A Reader of ``topic`` from ``start_message_id``: ``MessageId.earliest``, ``MessageId.latest``
        or a message id (the reader starts after it, or at it with ``start_message_id_inclusive``).

        The official client's arguments, in its order; ``is_read_compacted`` and
        ``crypto_failure_action`` are accepted without effect (no compaction, no encryption here).

        Raises:
            TypeError: ``start_message_id`` is not a MessageId.
            ValueError: ``schema``, ``reader_listener`` or ``crypto_key_reader`` (not supported).
            PulsarException: ``topic`` is partitioned (read its partitions: ``get_topic_partitions``).
        """
        unsupported = [
            name
            for name, value in (
                ("schema", schema),
                ("reader_listener", reader_listener),
                ("crypto_key_reader", crypto_key_reader),
            )
            if value is not None
        ]
        if unsupported:
            raise ValueError(f"minipulsar does not support {', '.join(unsupported)}")
        if not isinstance(start_message_id, MessageId):
            raise TypeError(f"start_message_id must be a MessageId, not {type(start_message_id).__name__}")
        topic = self._check_topic(topic)
        partitions = await self._lookup.partition_count(topic)
        if partitions:
            raise PulsarException(
                f"{topic} is a partitioned topic ({partitions} partitions): create a reader per "
                f"partition (client.get_topic_partitions)"
            )
        if is_earliest(start_message_id) or is_latest(start_message_id):
            position = None
            initial = InitialPosition.Earliest if is_earliest(start_message_id) else InitialPosition.Latest
        else:
            position = [start_message_id.ledger_id(), max(0, start_message_id.entry_id())]
            initial = InitialPosition.Earliest
        prefix = f"{subscription_role_prefix}-" if subscription_role_prefix else ""
        consumer = await self._subscribe_non_durable(
            topic,
            f"{prefix}reader-{secrets.token_hex(5)}",
            start_message_id=position,
            consumer_type=ConsumerType.Exclusive,
            receiver_queue_size=receiver_queue_size,
            consumer_name=reader_name,
            initial_position=initial,
        )
        return await Reader.create(
            consumer,
            start_message_id,
            inclusive=start_message_id_inclusive,
            operation_timeout_s=self._operation_timeout_s,
        )

    async def _subscribe_non_durable(
        self, topic: str, subscription_name: str, *, start_message_id: list[int] | None, **settings: Any
    ) -> Any:
        return await self._subscribe_single(
            topic, subscription_name, durable=False, start_message_id=start_message_id, **settings
        )

    # -- lifecycle ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed("the client is closed")

    def _surface_closables(self) -> weakref.WeakSet[Any]:
        """The multi-topic consumers made so far (weakly: a dropped one is gone)."""
        return self.__dict__.setdefault("_surface_objects", weakref.WeakSet())

    async def _close_surface(self) -> None:
        """Close the multi-topic consumers first: their pumps and pattern rediscovery stop."""
        objects = list(self._surface_closables())
        self._surface_closables().clear()
        await asyncio.gather(*(o.close() for o in objects), return_exceptions=True)


def _one_consumer_name(settings: dict[str, Any]) -> dict[str, Any]:
    """The children of a multi-topic consumer share its name (5 random characters, as Pulsar's)."""
    return {**settings, "consumer_name": settings.get("consumer_name") or secrets.token_hex(3)[:5]}
