"""Client: the entry point of the Python client, mirroring ``pulsar.asyncio.Client``."""

from __future__ import annotations

from minipulsar.topic_name import TopicName

from client.connection import ConnectionPool
from client.consumer import Consumer
from client.enums import ConsumerType, InitialPosition
from client.exceptions import AlreadyClosed, PulsarException
from client.lookup import LookupService
from client.producer import Producer


class Client:
    """An asyncio Pulsar-style client.

    Example::

        async with Client("pulsar://localhost:6650") as client:
            producer = await client.create_producer("my-topic")
            await producer.send(b"hello")
    """

    def __init__(self, service_url: str, *, operation_timeout_seconds: float = 30,
                 connection_timeout_ms: int = 10_000, keep_alive_interval_seconds: float = 30) -> None:
        self._service_url = service_url
        self._operation_timeout_s = operation_timeout_seconds
        self._pool = ConnectionPool(connection_timeout_s=connection_timeout_ms / 1000,
                                    operation_timeout_s=operation_timeout_seconds,
                                    keepalive_interval_s=keep_alive_interval_seconds)
        self._lookup = LookupService(self._pool, service_url)
        self._producers: list[Producer] = []
        self._consumers: list[Consumer] = []
        self._closed = False

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    async def create_producer(self, topic: str, producer_name: str | None = None, *,
                              initial_sequence_id: int | None = None, send_timeout_millis: int = 30_000,
                              max_pending_messages: int = 1000, block_if_queue_full: bool = False) -> Producer:
        """A producer on ``topic`` (``persistent://tenant/ns/name``, ``non-persistent://…`` or a
        bare name). A partitioned topic is refused for now: produce to its partitions
        (``name-partition-i``) until the partitioned producer is built.

        Raises:
            PulsarException: ``topic`` is partitioned.
        """
        topic = self._check_topic(topic)
        partitions = await self._lookup.partition_count(topic)
        if partitions:
            raise PulsarException(f"{topic} is a partitioned topic ({partitions} partitions): partitioned topics "
                                  f"need the partitioned producer (not built yet); produce to "
                                  f"{TopicName.parse(topic).partition(0)} … instead")
        connection = await self._pool.get(*await self._lookup.find_broker(topic))
        producer = Producer(connection, topic, producer_name=producer_name,
                            send_timeout_millis=send_timeout_millis, max_pending_messages=max_pending_messages,
                            block_if_queue_full=block_if_queue_full, initial_sequence_id=initial_sequence_id)
        await producer._register(self._operation_timeout_s)
        self._producers.append(producer)
        return producer

    async def subscribe(self, topic: str, subscription_name: str, *,
                        consumer_type: ConsumerType = ConsumerType.Exclusive, receiver_queue_size: int = 1000,
                        consumer_name: str | None = None,
                        initial_position: InitialPosition = InitialPosition.Latest,
                        unacked_messages_timeout_ms: int | None = None,
                        negative_ack_redelivery_delay_ms: int = 60_000,
                        priority_level: int = 0) -> Consumer:
        """A consumer on ``subscription_name``; the subscription is created if missing.

        ``priority_level``: lower is preferred — the Failover active consumer, the Shared
        round-robin level. ``unacked_messages_timeout_ms`` (None/0: off) and
        ``negative_ack_redelivery_delay_ms``: see :mod:`client.consumer`.
        """
        topic = self._check_topic(topic)
        connection = await self._pool.get(*await self._lookup.find_broker(topic))
        consumer = Consumer(connection, topic, subscription_name, consumer_type=consumer_type.value,
                            receiver_queue_size=receiver_queue_size, consumer_name=consumer_name,
                            initial_position=initial_position.value, priority_level=priority_level,
                            negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
                            unacked_messages_timeout_ms=unacked_messages_timeout_ms)
        await consumer._subscribe(self._operation_timeout_s)
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
        for producer in self._producers:
            try:
                await producer.close()
            except Exception:  # closing must go on for the others
                pass
        for consumer in self._consumers:
            try:
                await consumer.close()
            except Exception:
                pass
        await self._pool.close()

    def _check_topic(self, topic: str) -> str:
        if self._closed:
            raise AlreadyClosed("the client is closed")
        return str(TopicName.parse(topic))
