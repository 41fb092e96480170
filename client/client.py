"""Client: the entry point of the Python client, mirroring ``pulsar.asyncio.Client``."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from minipulsar.client.client_surface import ClientSurface
from minipulsar.client.connection import ConnectionPool
from minipulsar.client.consumer import Consumer
from minipulsar.client.consumer_config import ConsumerBatchReceivePolicy, ConsumerConfig
from minipulsar.client.enums import BatchingType, CompressionType, ConsumerType, InitialPosition
from minipulsar.client.exceptions import AlreadyClosed
from minipulsar.client.lookup import CONCURRENT_LOOKUP_REQUESTS, MAX_LOOKUP_REDIRECTS, LookupService
from minipulsar.client.memory_limit import DEFAULT_MEMORY_LIMIT_BYTES, MemoryLimitController
from minipulsar.client.multi_topics_consumer import MultiTopicsConsumer
from minipulsar.client.partitioned_producer import PartitionedProducer
from minipulsar.client.pattern_consumer import DEFAULT_PATTERN_AUTO_DISCOVERY_PERIOD_S
from minipulsar.client.producer import Producer
from minipulsar.client.producer_config import ProducerConfig
from minipulsar.client.routing import HashingScheme, PartitionsRoutingMode
from minipulsar.client.service_url import ServiceUrl
from minipulsar.errors import MiniPulsarError
from minipulsar.topic_name import TopicName

log = logging.getLogger(__name__)


class Client(ClientSurface):
    """An asyncio Pulsar-style client.

    Example::

        async with Client("pulsar://localhost:6650") as client:
            producer = await client.create_producer("my-topic")
            await producer.send(b"hello")
    """

    def __init__(
        self,
        service_url: str,
        authentication: Any = None,
        operation_timeout_seconds: float = 30,
        io_threads: int = 1,
        message_listener_threads: int = 1,
        concurrent_lookup_requests: int = CONCURRENT_LOOKUP_REQUESTS,
        log_conf_file_path: str | None = None,
        stats_interval_in_seconds: int = 600,
        use_tls: bool = False,
        tls_trust_certs_file_path: Any = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = False,
        logger: Any = None,
        connection_timeout_ms: int = 10_000,
        listener_name: str | None = None,
        tls_private_key_file_path: str | None = None,
        tls_certificate_file_path: str | None = None,
        *,
        lookup_timeout_ms: int | None = None,
        max_lookup_redirects: int = MAX_LOOKUP_REDIRECTS,
        memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
        keep_alive_interval_seconds: float = 30,
    ) -> None:
        """The official client's arguments, in its order (``io_threads``,
        ``message_listener_threads``, ``log_conf_file_path``, ``stats_interval_in_seconds``,
        ``logger`` and ``listener_name`` are accepted and have no effect here; authentication and
        TLS settings are refused), plus the
        Java client's ``lookup_timeout_ms`` (default: the operation timeout; PIP-91),
        ``max_lookup_redirects`` (20), ``memory_limit_bytes`` (64 MiB of pending messages across
        producers, 0: unbounded) and ``keep_alive_interval_seconds`` (30).

        ``service_url`` is ``pulsar://host:port`` or several hosts, ``pulsar://h1:6650,h2:6650``:
        lookups go to one and move on to the next when it cannot be reached.

        Raises:
            ValueError: a malformed service URL or argument, authentication or TLS.
        """
        if (
            authentication is not None
            or use_tls
            or tls_trust_certs_file_path
            or tls_private_key_file_path
            or tls_certificate_file_path
        ):
            raise ValueError("minipulsar supports neither authentication nor TLS")
        self._service_url = ServiceUrl(service_url)
        self._operation_timeout_s = operation_timeout_seconds
        self._pool = ConnectionPool(
            connection_timeout_s=connection_timeout_ms / 1000,
            operation_timeout_s=operation_timeout_seconds,
            keepalive_interval_s=keep_alive_interval_seconds,
        )
        lookup_timeout_s = operation_timeout_seconds if lookup_timeout_ms is None else lookup_timeout_ms / 1000
        self._lookup = LookupService(
            self._pool,
            self._service_url,
            lookup_timeout_s=lookup_timeout_s,
            max_lookup_redirects=max_lookup_redirects,
            concurrent_lookup_requests=concurrent_lookup_requests,
        )
        self._memory = MemoryLimitController(memory_limit_bytes)
        self._producers: list[Producer] = []
        self._consumers: list[Consumer] = []
        self._closed = False

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    async def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        *,
        initial_sequence_id: int | None = None,
        send_timeout_millis: int = 30_000,
        max_pending_messages: int = 1000,
        block_if_queue_full: bool = True,
        max_pending_messages_across_partitions: int = 50_000,
        message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
        hashing_scheme: HashingScheme = HashingScheme.JavaStringHash,
        message_router: Callable[[Any, int], int] | None = None,
        lazy_start_partitioned_producers: bool = False,
        schema: Any = None,
        compression_type: CompressionType = CompressionType.NONE,
        batching_enabled: bool = True,
        batching_max_messages: int = 1000,
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: float = 10,
        chunking_enabled: bool = False,
        properties: dict[str, str] | None = None,
        batching_type: BatchingType = BatchingType.Default,
        encryption_key: Any = None,
        crypto_key_reader: Any = None,
        access_mode: Any = None,
    ) -> Producer | PartitionedProducer:
        """A producer on ``topic`` (``persistent://tenant/ns/name``, ``non-persistent://…`` or a
        bare name). On a partitioned topic: a :class:`PartitionedProducer` routing by
        ``message_routing_mode`` / ``message_router`` (see :mod:`client.routing`).
        """
        topic = self._check_topic(topic)
        _unsupported(schema=schema, encryption_key=encryption_key, crypto_key_reader=crypto_key_reader)
        settings = {
            "initial_sequence_id": initial_sequence_id,
            "send_timeout_millis": send_timeout_millis,
            "max_pending_messages": max_pending_messages,
            "block_if_queue_full": block_if_queue_full,
            "compression_type": compression_type,
            "batching_enabled": batching_enabled,
            "batching_max_messages": batching_max_messages,
            "batching_max_allowed_size_in_bytes": batching_max_allowed_size_in_bytes,
            "batching_max_publish_delay_ms": batching_max_publish_delay_ms,
            "chunking_enabled": chunking_enabled,
            "properties": properties,
            "batching_type": batching_type,
            "access_mode": access_mode,
        }
        ProducerConfig.from_settings(producer_name, **settings)  # bad arguments fail before any lookup
        partitions = await self._lookup.partition_count(topic)
        if partitions:
            return await self._create_partitioned_producer(
                topic,
                partitions,
                producer_name,
                settings,
                message_routing_mode=message_routing_mode,
                hashing_scheme=hashing_scheme,
                message_router=message_router,
                lazy=lazy_start_partitioned_producers,
                max_pending_messages_across_partitions=max_pending_messages_across_partitions,
            )
        return await self._create_single_producer(topic, producer_name, **settings)

    async def _create_single_producer(self, topic: str, producer_name: str | None = None, **settings: Any) -> Producer:
        """A producer on one non-partitioned topic (or one partition); ``settings`` are
        create_producer's keyword arguments (:class:`ProducerConfig` fields)."""
        self._check_open()
        config = ProducerConfig.from_settings(producer_name, **settings)
        producer = Producer(
            self._check_topic(topic),
            config,
            pool=self._pool,
            lookup=self._lookup,
            memory=self._memory,
            operation_timeout_s=self._operation_timeout_s,
        )
        await producer._start()
        self._producers.append(producer)
        return producer

    async def subscribe(
        self,
        topic: str | list[str] | re.Pattern,
        subscription_name: str,
        *,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        receiver_queue_size: int = 1000,
        max_total_receiver_queue_size_across_partitions: int = 50_000,
        consumer_name: str | None = None,
        initial_position: InitialPosition = InitialPosition.Latest,
        unacked_messages_timeout_ms: int | None = None,
        negative_ack_redelivery_delay_ms: int = 60_000,
        priority_level: int = 0,
        is_pattern_topic: bool = False,
        pattern_auto_discovery_period: float = DEFAULT_PATTERN_AUTO_DISCOVERY_PERIOD_S,
        acknowledgment_group_time_ms: float = 100,
        ack_receipt_enabled: bool = True,
        batch_receive_policy: ConsumerBatchReceivePolicy | None = None,
        properties: dict[str, str] | None = None,
        **ignored: Any,
    ) -> Consumer | MultiTopicsConsumer:
        """A consumer on ``subscription_name``; the subscription is created if missing.

        ``topic``: one topic; a list of topics, a compiled regex or (``is_pattern_topic``) a
        regex string, or a partitioned topic give a :class:`MultiTopicsConsumer` over all of
        them (see :mod:`client.multi_topics_consumer`, :mod:`client.pattern_consumer`).
        ``priority_level``: lower is preferred — the Failover active consumer, the Shared
        round-robin level. ``unacked_messages_timeout_ms`` (None/0: off) and
        ``negative_ack_redelivery_delay_ms``: see :mod:`client.consumer`.
        """
        settings = dict(
            consumer_type=consumer_type,
            receiver_queue_size=receiver_queue_size,
            consumer_name=consumer_name,
            initial_position=initial_position,
            unacked_messages_timeout_ms=unacked_messages_timeout_ms,
            negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
            priority_level=priority_level,
            acknowledgment_group_time_ms=acknowledgment_group_time_ms,
            ack_receipt_enabled=ack_receipt_enabled,
            batch_receive_policy=batch_receive_policy,
            properties=properties,
            **ignored,
        )
        ConsumerConfig.from_settings(**settings)  # bad arguments fail before any lookup
        queue_size_total = max_total_receiver_queue_size_across_partitions
        if isinstance(topic, re.Pattern) or is_pattern_topic:
            if not isinstance(topic, (str, re.Pattern)):
                raise ValueError("a pattern subscription takes one regex (a str or re.Pattern), not a list")
            return await self._subscribe_pattern(
                topic, subscription_name, settings, queue_size_total, pattern_auto_discovery_period
            )
        if isinstance(topic, (list, tuple)):
            return await self._subscribe_many(list(topic), subscription_name, settings, queue_size_total)
        topic = self._check_topic(topic)
        if await self._lookup.partition_count(topic):
            return await self._subscribe_many([topic], subscription_name, settings, queue_size_total)
        return await self._subscribe_single(topic, subscription_name, **settings)

    async def _subscribe_single(self, topic: str, subscription_name: str, **settings: Any) -> Consumer:
        """A consumer on one non-partitioned topic (or one partition); ``settings`` are
        subscribe's keyword arguments (:class:`ConsumerConfig` fields, including ``durable`` and
        ``start_message_id`` for a Reader's non-durable subscription)."""
        self._check_open()
        config = ConsumerConfig.from_settings(**settings)
        consumer = Consumer(
            self._check_topic(topic),
            subscription_name,
            config,
            pool=self._pool,
            lookup=self._lookup,
            operation_timeout_s=self._operation_timeout_s,
        )
        await consumer._start()
        self._consumers.append(consumer)
        return consumer

    async def get_topic_partitions(self, topic: str) -> list[str]:
        topic = self._check_topic(topic)
        count = await self._lookup.partition_count(topic)
        name = TopicName.parse(topic)
        return [str(name.partition(i)) for i in range(count)] if count else [topic]

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._close_surface()
        closeables: list[Producer | Consumer] = [*self._producers, *self._consumers]
        for closeable in closeables:
            try:
                await closeable.close()
            except MiniPulsarError as error:  # its broker is gone: nothing left there to close
                log.debug("closing %s: %s", closeable, error)
        await self._pool.close()

    def _check_topic(self, topic: str) -> str:
        if self._closed:
            raise AlreadyClosed("the client is closed")
        return str(TopicName.parse(topic))


def _unsupported(**arguments: Any) -> None:
    given = sorted(name for name, value in arguments.items() if value is not None)
    if given:
        raise ValueError(f"minipulsar does not support {', '.join(given)}")
