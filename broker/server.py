"""The broker side of client connections: producers, consumers, lookups (docs/design.md §3).

SEND is the hot path: it is handled synchronously — append to the topic's managed ledger and
answer SEND_RECEIPT from the add's completion callback (deduplication may answer a resend
without a write). Publish throttling stops reading a connection's socket —
TCP then pushes back on the producer — for either of two reasons, and reads again only when
neither holds:

- ``maxPendingPublishRequestsPerConnection`` sends in flight on this connection (resume at half);
- the broker-wide ``maxMessagePublishBufferSizeInMB`` of unpersisted publish bytes, which
  pauses every producer connection at once (:mod:`broker.publish_buffer`).

LOOKUP answers from the namespace service's decision (:mod:`broker.namespace.lookup`). When a
bundle is unloaded its producers and consumers are *detached* from their connections
(:meth:`BrokerConnection.detach_producer`): SENDs that still arrive for a detached producer are
dropped without an answer, as Pulsar drops them — the client resends its unreceipted messages
after it reconnects — and CLOSE_PRODUCER / CLOSE_CONSUMER follow once the bundle is released.

Invariants:

- a SEND is answered once — SEND_RECEIPT or SEND_ERROR — unless its producer was detached by
  an unload (the client resends it), and receipts go out in the order the adds complete;
- a connection reads while no throttle reason holds it, and each reason is counted once in
  the broker-wide throttle counters;
- a consumer id is on a connection at most once; a SUBSCRIBE that raced with an unload or a
  close leaves no consumer attached.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from minipulsar import entry_format
from minipulsar.binary_protocol.detect import Protocol as WireProtocol
from minipulsar.binary_protocol.detect import sniff
from minipulsar.binary_protocol.wire import PulsarWire
from minipulsar.broker.connection_counts import ConnectionCounts
from minipulsar.broker.managed_ledger.position import Position
from minipulsar.broker.namespace.lookup import TopicLookup
from minipulsar.broker.publish_buffer import PublishBuffer
from minipulsar.broker.publish_latency import LatencyWindow
from minipulsar.broker.throttling import ConnectionThrottling
from minipulsar.broker.topics.base import Consumer, Subscription, Topic
from minipulsar.broker.topics.batch_index_acks import bits_of
from minipulsar.broker.topics.consumer import ServerConsumer
from minipulsar.broker.topics.key_shared import KEY_SHARED_MODES
from minipulsar.broker.topics.persistent_subscription import PersistentSubscription
from minipulsar.broker.topics.persistent_topic import PersistentTopic
from minipulsar.broker.topics.registry import TopicRegistry
from minipulsar.config import BrokerConfig
from minipulsar.errors import (
    ChecksumError,
    ConsumerNotFoundError,
    ErrorCode,
    InvalidCommandError,
    MalformedCommandError,
    MiniPulsarError,
    NotOwnerError,
    ProducerBusyError,
    ServiceNotReadyError,
    code_for_error,
)
from minipulsar.net import ServerConnection, handles
from minipulsar.net.connection import Wire
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.codec import MsgpackWire
from minipulsar.topic_name import TopicName

log = logging.getLogger(__name__)

_FAILING_SEND_CODES = (ErrorCode.INVALID_COMMAND, ErrorCode.TOO_LARGE)
"""SEND_ERROR codes that fail just that send (the client gives its messages up and goes on);
after any other the client re-creates the producer and resends from the failed message."""

_producer_names = itertools.count()

PENDING_SENDS = "maxPendingPublishRequestsPerConnection"
"""The throttle reason of a connection with too many sends in flight."""

SNIFF_BYTES = 5
"""What tells the two protocols apart: a length prefix, then the first byte of the command
(:func:`minipulsar.binary_protocol.detect.sniff`)."""


class ClientWire(Wire, Protocol):
    """A client port's wire: a connection's :class:`~minipulsar.net.connection.Wire`, plus the
    two frames the hot paths encode without building a command."""

    def encode_message(
        self, consumer_id: int, ledger_id: int, entry_id: int, payload: bytes, redelivery_count: int = 0
    ) -> tuple[bytes, bytes | memoryview]: ...

    def encode_send_receipt(
        self, producer_id: int, sequence_id: int, highest_sequence_id: int, ledger_id: int, entry_id: int
    ) -> bytes: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionSettings:
    """What a client connection runs by, taken once from BrokerConfig."""

    max_frame_size: int
    """nettyMaxFrameSizeBytes."""
    keepalive_interval_s: float = 30.0
    """keepAliveIntervalSeconds."""
    max_message_size: int = 5 * 1024 * 1024
    """maxMessageSize: what CONNECTED tells an official client it may send."""
    max_pending_sends: int = 1000
    """maxPendingPublishRequestsPerConnection: reading stops there, resumes at half."""
    cluster_name: str = "standalone"
    """clusterName: the prefix of the names given to producers that bring none."""

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ConnectionSettings:
        return cls(
            max_frame_size=config.max_frame_size,
            keepalive_interval_s=config.keepalive_interval_s,
            max_message_size=config.max_message_size,
            max_pending_sends=config.max_pending_publish_requests_per_connection,
            cluster_name=config.cluster_name,
        )


class ProducerHandle:
    """A producer on this connection; also what the topic's stats list as a publisher."""

    __slots__ = (
        "_drained",
        "access_mode",
        "address",
        "bytes_in",
        "client_version",
        "connected_since",
        "connection",
        "messages_in",
        "name",
        "producer_id",
        "sends_in_flight",
        "topic",
    )

    def __init__(
        self,
        producer_id: int,
        name: str,
        topic: Topic,
        address: str,
        connection: BrokerConnection,
        access_mode: cmd.ProducerAccessMode = "Shared",
    ) -> None:
        self.producer_id, self.name, self.topic, self.address = producer_id, name, topic, address
        self.connection = connection
        self.client_version = connection.client_version
        self.access_mode = access_mode
        """Shared, or the topic's only producer (Exclusive, ExclusiveWithFencing)."""
        self.sends_in_flight = 0
        """SENDs of this producer being written (published, not answered yet)."""
        self._drained: asyncio.Future[None] | None = None
        self.connected_since = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
        self.messages_in = 0
        self.bytes_in = 0

    def drained(self) -> asyncio.Future[None] | None:
        if self.sends_in_flight == 0:
            return None
        if self._drained is None:
            self._drained = asyncio.get_running_loop().create_future()
        return self._drained

    def send_answered(self) -> None:
        self.sends_in_flight -= 1
        if self.sends_in_flight == 0 and self._drained is not None:
            if not self._drained.done():
                self._drained.set_result(None)
            self._drained = None


class ConsumerHandle:
    __slots__ = ("consumer", "subscription", "topic")

    def __init__(self, consumer: Consumer, topic: Topic, subscription: Subscription) -> None:
        self.consumer, self.topic, self.subscription = consumer, topic, subscription


class BrokerConnection(ServerConnection):
    """One client's connection.

    Args:
        settings: the connection keys of the broker's config.
        topics: the broker's topics (loaded on first use).
        lookup: the LOOKUP decision (the namespace service).
        publish_buffer: the broker-wide publish buffer every producer connection shares.
        throttling: the broker-wide counts of throttled connections.
        publish_latency: the broker-wide SEND → SEND_RECEIPT latencies (``pulsar_broker_publish_latency``).
        connection_counts: the broker-wide counts of connections by protocol.
    """

    SERVER_VERSION = "minipulsar-broker"

    def __init__(
        self,
        settings: ConnectionSettings,
        topics: TopicRegistry,
        lookup: TopicLookup,
        publish_buffer: PublishBuffer,
        throttling: ConnectionThrottling,
        publish_latency: LatencyWindow,
        connection_counts: ConnectionCounts,
    ) -> None:
        self._wire: ClientWire = MsgpackWire(settings.max_frame_size, self.receive_pipeline_bytes)
        super().__init__(keepalive_interval_s=settings.keepalive_interval_s, wire=self._wire)
        self._publish_latency = publish_latency
        self._connection_counts = connection_counts
        self._settings = settings
        self._topics = topics
        self._lookup = lookup
        self._publish_buffer = publish_buffer
        self._throttling = throttling
        self.producers: dict[int, ProducerHandle] = {}
        self.consumers: dict[int, ConsumerHandle] = {}
        self._pending_sends = 0
        self._max_pending_sends = settings.max_pending_sends
        self._throttles: set[str] = set()
        """Why reading is paused; empty: reading."""
        self._detached_producers: set[int] = set()
        """Producer ids an unload took away: their late SENDs are dropped (the client resends)."""
        self._detached_consumers: set[int] = set()
        self._waiting_producers: dict[int, asyncio.Task[Any]] = {}
        """WaitForExclusive producers still queued, by producer id: their PRODUCER handlers."""
        self._failed_producers: set[int] = set()
        """Producer ids a send of which failed: their later SENDs are refused unwritten until the
        producer is created again (the client re-creates it and resends everything from the
        failed one, in order), so nothing behind a failed message is stored before it."""
        self.protocol: WireProtocol = "minipulsar"
        """Which protocol the client speaks: ``minipulsar`` or ``pulsar`` (the official clients)."""
        self._counted = False
        """Whether :attr:`_connection_counts` holds this connection (once its protocol is known)."""
        self._for_client: Callable[[bytes], bytes] = entry_format.as_minipulsar_entry
        """An entry in the format this client's protocol reads (converted only if stored in the other)."""
        self._sniffed: memoryview | None = memoryview(bytearray(SNIFF_BYTES))
        """The first bytes, until they say which protocol this is; then None."""
        self._sniffed_bytes = 0

    @property
    def writable(self) -> bool:
        return self.writer is not None and not self.writer.paused

    # -- which protocol -------------------------------------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        sniffed = self._sniffed
        if sniffed is not None:  # read the first few bytes alone: they choose the decoder
            return sniffed[self._sniffed_bytes :]
        return super().get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        sniffed = self._sniffed
        if sniffed is None:
            super().buffer_updated(nbytes)
            return
        self._sniffed_bytes += nbytes
        if self._sniffed_bytes < SNIFF_BYTES:
            return
        prefix, self._sniffed = bytes(sniffed), None
        try:
            protocol = sniff(prefix, self._settings.max_frame_size)
        except MalformedCommandError as error:
            log.warning("%s: neither minipulsar's protocol nor Pulsar's: %s; closing", self.peer, error)
            self.send(cmd.Error(code=ErrorCode.INVALID_COMMAND.value, message=str(error)))
            self.close_after_error(error)
            return
        if protocol == "pulsar":
            self._speak_pulsar()
        self._connection_counts.opened(self.protocol)
        self._counted = True
        self.data_received(prefix)

    def _speak_pulsar(self) -> None:
        settings = self._settings
        self._wire = PulsarWire(settings.max_frame_size, settings.max_message_size, self.SERVER_VERSION)
        self.switch_wire(self._wire)
        self.protocol = "pulsar"
        self._for_client = entry_format.as_pulsar_entry

    def push_message(
        self, consumer_id: int, position: Position, payload: bytes, redelivery_count: int, ack_set: Sequence[int] = ()
    ) -> None:
        """One MESSAGE push (a consumer's dispatch), the payload converted only when it is
        stored in the other protocol's entry format; ``ack_set``: the batch's messages still
        to deliver (only official clients acknowledge part of a batch)."""
        payload = self._for_client(payload)
        if ack_set:
            assert isinstance(self._wire, PulsarWire)
            header, body = self._wire.encode_message(
                consumer_id, position.ledger_id, position.entry_id, payload, redelivery_count, ack_set
            )
        else:
            header, body = self._wire.encode_message(
                consumer_id, position.ledger_id, position.entry_id, payload, redelivery_count
            )
        self.send_encoded(header, body)

    # -- lookup ---------------------------------------------------------------------------------

    @handles(cmd.Lookup)
    async def lookup(self, command: cmd.Lookup) -> None:
        result = await self._lookup.lookup(_parse_topic(command.topic), command.authoritative)
        self.send(
            cmd.LookupResponse(
                id=command.id,
                kind=result.kind,
                broker_url=result.broker_url,
                authoritative=result.authoritative,
                message=result.message,
                error=result.error.value if result.error is not None else "",
            )
        )

    @handles(cmd.PartitionedMetadata)
    async def partitioned_metadata(self, command: cmd.PartitionedMetadata) -> None:
        partitions = await self._topics.partition_metadata(_parse_topic(command.topic))
        self.send(cmd.PartitionedMetadataResponse(id=command.id, partitions=partitions))

    @handles(cmd.GetTopicsOfNamespace)
    async def topics_of_namespace(self, command: cmd.GetTopicsOfNamespace) -> None:
        topics = await self._topics.topics_of_namespace(command.namespace, command.mode)
        self.send(cmd.GetTopicsOfNamespaceResponse(id=command.id, topics=topics))

    # -- producers ------------------------------------------------------------------------------

    @handles(cmd.Producer)
    async def create_producer(self, command: cmd.Producer) -> None:
        if command.producer_id in self.producers:
            raise ProducerBusyError(f"producer id {command.producer_id} is already in use on this connection")
        topic = await self._topics.get_topic(_parse_topic(command.topic))
        name = command.producer_name or f"{self._settings.cluster_name}-{next(_producer_names)}"
        if any(p.name == name for p in topic.counters.producers.values()):
            raise ProducerBusyError(f"producer with name {name!r} is already connected to {topic.name}")
        if command.producer_id in self.producers or not self.is_open:  # raced with itself or a close
            raise ProducerBusyError(f"producer id {command.producer_id} is already in use on this connection")
        if command.access_mode == "WaitForExclusive":
            await self._create_producer_when_exclusive(command, topic, name)
            return
        _claim_access(topic, command.access_mode)
        self._attach_producer(command, topic, name)

    async def _create_producer_when_exclusive(self, command: cmd.Producer, topic: Topic, name: str) -> None:
        """WaitForExclusive: queued behind the topic's producers (broker/topics/exclusive_queue.py),
        told "not ready" meanwhile, attached when its turn comes."""
        task = asyncio.current_task()
        assert task is not None
        self._waiting_producers[command.producer_id] = task  # CLOSE_PRODUCER gives up the wait
        try:
            await self._wait_for_exclusive_turn(command, topic, name)
        finally:
            if self._waiting_producers.get(command.producer_id) is task:
                del self._waiting_producers[command.producer_id]

    async def _wait_for_exclusive_turn(self, command: cmd.Producer, topic: Topic, name: str) -> None:
        async with topic.counters.exclusive_queue.turn() as turn:
            if not turn.done():
                log.info("%s: producer %r waits for exclusive access to %s", self.peer, name, topic.name)
                self.send(cmd.ProducerSuccess(id=command.id, producer_name=name, producer_ready=False))
                await turn
            if not self.is_open:
                return
            if self._topics.loaded_topic(topic.name) is not topic:
                raise NotOwnerError(f"{topic.name} was unloaded from this broker; look it up again")
            if command.producer_id in self.producers:
                raise ProducerBusyError(f"producer id {command.producer_id} is already in use on this connection")
            if any(p.name == name for p in topic.counters.producers.values()):
                raise ProducerBusyError(f"producer with name {name!r} is already connected to {topic.name}")
            _claim_access(topic, "Exclusive", queued=True)
            self._attach_producer(command, topic, name)

    def _attach_producer(self, command: cmd.Producer, topic: Topic, name: str) -> None:
        self._detached_producers.discard(command.producer_id)
        self._failed_producers.discard(command.producer_id)
        producer = ProducerHandle(command.producer_id, name, topic, self.peer, self, command.access_mode)
        self.producers[command.producer_id] = producer
        topic.counters.producers[(id(self), command.producer_id)] = producer
        self._publish_buffer.register(self)
        dedup = topic.deduplication
        last_sequence_id = dedup.last_sequence_id(name) if dedup is not None else -1
        self.send(cmd.ProducerSuccess(id=command.id, producer_name=name, last_sequence_id=last_sequence_id))

    @handles(cmd.Send)
    def send_message(self, command: cmd.Send) -> None:
        producer = self.producers.get(command.producer_id)
        if producer is None:
            if command.producer_id in self._detached_producers:
                return  # its topic was unloaded: the client resends after reconnecting
            self._refuse_send(command, "ProducerNotFound", "no such producer on this connection")
            return
        if command.producer_id in self._failed_producers:
            self._refuse_send(
                command,
                ErrorCode.SERVICE_NOT_READY.value,
                "an earlier send of this producer failed: re-create the producer and resend from it",
            )
            return
        if self.protocol == "pulsar" and not entry_format.checksum_ok(command.payload):
            self._refuse_send(command, ChecksumError.code.value, "the message's CRC32C does not match its bytes")
            return
        if command.num_messages < 1:
            self._refuse_send(command, "InvalidCommand", "num_messages must be >= 1")
            return
        size = len(command.payload)
        producer.messages_in += command.num_messages
        producer.bytes_in += size
        producer.sends_in_flight += 1
        self._pending_sends += 1
        if self._pending_sends >= self._max_pending_sends:
            self.throttle(PENDING_SENDS)
        self._publish_buffer.add(size)
        producer.topic.publish_then(
            command.payload,
            command.num_messages,
            producer.name,
            command.sequence_id,
            command.highest_sequence_id,
            # The read carrying this SEND was handled at _last_received: no clock read per SEND.
            partial(
                self._send_completed,
                producer,
                command.sequence_id,
                command.highest_sequence_id,
                size,
                self._last_received,
            ),
        )

    def _refuse_send(self, command: cmd.Send, code: str, message: str) -> None:
        """SEND_ERROR for a SEND refused before anything was written."""
        self.send(
            cmd.SendError(producer_id=command.producer_id, sequence_id=command.sequence_id, code=code, message=message)
        )

    def _send_completed(
        self,
        producer: ProducerHandle,
        sequence_id: int,
        highest_sequence_id: int,
        size: int,
        received_s: float,
        position: Position | None,
        error: BaseException | None,
    ) -> None:
        producer_id = producer.producer_id
        producer.send_answered()
        self._pending_sends -= 1
        self._publish_buffer.release(size)
        if self._pending_sends <= self._max_pending_sends // 2:
            self.unthrottle(PENDING_SENDS)
        if position is not None:
            receipt = self._wire.encode_send_receipt(
                producer_id, sequence_id, highest_sequence_id, position.ledger_id, position.entry_id
            )
            self.send_frame(receipt)
            self._publish_latency.record((time.monotonic() - received_s) * 1000)
        elif producer_id not in self._detached_producers:  # else: the client resends it elsewhere
            error = error or ServiceNotReadyError("the write failed without an error")
            code = code_for_error(error)
            if code not in _FAILING_SEND_CODES and producer_id in self.producers:
                self._failed_producers.add(producer_id)
            self.send(
                cmd.SendError(producer_id=producer_id, sequence_id=sequence_id, code=code.value, message=str(error))
            )

    @handles(cmd.CloseProducer)
    def close_producer(self, command: cmd.CloseProducer) -> None:
        waiting = self._waiting_producers.pop(command.producer_id, None)
        if waiting is not None:
            waiting.cancel()
        self._detached_producers.discard(command.producer_id)
        self._failed_producers.discard(command.producer_id)
        producer = self.producers.pop(command.producer_id, None)
        if producer is not None:
            producer.topic.counters.remove_producer((id(self), command.producer_id))
        if not self.producers:
            self._publish_buffer.unregister(self)
        if command.id is not None:
            self.send(cmd.Success(id=command.id))

    # -- consumers ------------------------------------------------------------------------------

    @handles(cmd.Subscribe)
    async def subscribe(self, command: cmd.Subscribe) -> None:
        if command.consumer_id in self.consumers:
            raise InvalidCommandError(f"consumer id {command.consumer_id} is already in use on this connection")
        if command.initial_position not in ("Latest", "Earliest"):
            raise InvalidCommandError(f"initial_position must be Latest or Earliest, got {command.initial_position!r}")
        if command.sub_type == "Key_Shared" and command.key_shared_mode not in KEY_SHARED_MODES:
            raise InvalidCommandError(
                f"key_shared_mode {command.key_shared_mode!r} is not supported; "
                f"use one of {', '.join(KEY_SHARED_MODES)}"
            )
        start = None
        if command.start_message_id is not None:
            start = _parse_positions([command.start_message_id])[0]
        topic = await self._topics.get_topic(_parse_topic(command.topic))
        name = command.consumer_name or f"consumer-{command.consumer_id}"
        consumer = ServerConsumer(
            command.consumer_id, name, self, command.subscription, topic.counters, priority_level=command.priority_level
        )
        subscription = await topic.subscribe(
            consumer,
            command.subscription,
            command.sub_type,
            command.initial_position == "Earliest",
            durable=command.durable,
            start_position=start,
        )
        if not self.is_open:  # the client went away while we were loading
            subscription.remove_consumer(consumer)
            return
        if self._topics.loaded_topic(topic.name) is not topic:  # unloaded while we subscribed
            subscription.remove_consumer(consumer)
            raise NotOwnerError(f"{topic.name} was unloaded from this broker; look it up again")
        if command.consumer_id in self.consumers:  # raced with itself
            subscription.remove_consumer(consumer)
            raise InvalidCommandError(f"consumer id {command.consumer_id} is already in use on this connection")
        self._detached_consumers.discard(command.consumer_id)
        self.consumers[command.consumer_id] = ConsumerHandle(consumer, topic, subscription)
        self.send(cmd.Success(id=command.id))

    @handles(cmd.Flow)
    def flow(self, command: cmd.Flow) -> None:
        if command.consumer_id in self._detached_consumers:
            return  # the consumer's topic was unloaded; the client re-subscribes elsewhere
        handle = self._consumer(command.consumer_id)
        if command.permits < 0:
            raise InvalidCommandError("permits must be >= 0")
        handle.subscription.flow(handle.consumer, command.permits)

    @handles(cmd.Ack)
    def acknowledge(self, command: cmd.Ack) -> Any:
        if command.id is None and command.consumer_id in self._detached_consumers:
            return None  # an official client's grouped acks, flushed after a seek or an unload
        handle = self._consumer(command.consumer_id)
        message_ids = command.message_ids
        if command.batch_index_acks:
            parts = _parse_batch_index_acks(command.batch_index_acks)
            whole = handle.subscription.acknowledge_batch_indexes(handle.consumer, parts)
            message_ids = [*message_ids, *([p.ledger_id, p.entry_id] for p in whole)]
            if not message_ids:  # only parts of batches: nothing to write yet
                if command.id is not None:
                    self.send(cmd.Success(id=command.id))
                return None
        positions = _parse_positions(message_ids)
        if command.ack_type not in ("individual", "cumulative"):
            raise InvalidCommandError(f"ack_type must be individual or cumulative, got {command.ack_type!r}")
        return self._acknowledge(command, handle, positions)

    async def _acknowledge(self, command: cmd.Ack, handle: ConsumerHandle, positions: list[Position]) -> None:
        await handle.subscription.acknowledge(handle.consumer, positions, command.ack_type == "cumulative")
        if command.id is not None:
            self.send(cmd.Success(id=command.id))

    @handles(cmd.RedeliverUnacked)
    def redeliver_unacknowledged(self, command: cmd.RedeliverUnacked) -> None:
        if command.consumer_id in self._detached_consumers:
            return  # everything unacknowledged is delivered again after re-subscribing anyway
        handle = self._consumer(command.consumer_id)
        positions = _parse_positions(command.message_ids) if command.message_ids else None
        handle.subscription.redeliver_unacknowledged(handle.consumer, positions)

    @handles(cmd.Seek)
    async def seek(self, command: cmd.Seek) -> None:
        """Reset the subscription; SUCCESS goes out before anything from the new position (to an
        official client, after CLOSE_CONSUMER, as Pulsar's broker does)."""
        handle = self._consumer(command.consumer_id)
        subscription = handle.subscription
        if not isinstance(subscription, PersistentSubscription):  # nothing stored to seek in
            raise InvalidCommandError(f"seek is not supported on {handle.topic.name}")
        if command.publish_time_ms is not None:
            if command.publish_time_ms < 0:
                raise InvalidCommandError("publish_time_ms must be >= 0")
            await subscription.seek(publish_time_ms=command.publish_time_ms)
        else:
            await subscription.seek(Position(command.ledger_id, command.entry_id))
        handle.consumer.permits = 0  # the client clears its queue and grants them again (FLOW)
        try:
            if self.protocol == "pulsar":
                # Pulsar's broker disconnects a subscription's consumers on a reset, before it
                # answers: its clients then take the seek's position (or, after a seek by time,
                # none) as their start when they subscribe anew, and grant permits again
                self.detach_consumer(command.consumer_id)
                self.send_close_consumer(command.consumer_id)
            self.send(cmd.Success(id=command.id))
        finally:
            subscription.resume()

    @handles(cmd.GetLastMessageId)
    async def get_last_message_id(self, command: cmd.GetLastMessageId) -> None:
        """The topic's last entry; to an official client also its last message's batch index,
        read from the entry, and the subscription's mark-delete position, as Pulsar's broker
        answers (its readers' ``hasMessageAvailable`` compares them with what they received)."""
        handle = self._consumer(command.consumer_id)
        topic = handle.topic
        last = topic.last_message_id
        answer = cmd.LastMessageId(id=command.id, ledger_id=last.ledger_id, entry_id=last.entry_id)
        if self.protocol == "pulsar" and isinstance(topic, PersistentTopic):
            if last.entry_id >= 0:
                entries = await topic.ledger.read_entries(last, 1)
                if entries and entries[0].position == last:
                    answer.batch_index = entry_format.last_batch_index(entries[0].payload)
            cursor = handle.subscription.cursor
            if cursor is not None:
                answer.mark_delete = [cursor.mark_delete.ledger_id, cursor.mark_delete.entry_id]
        self.send(answer)

    @handles(cmd.CloseConsumer)
    def close_consumer(self, command: cmd.CloseConsumer) -> None:
        self._detached_consumers.discard(command.consumer_id)
        handle = self.consumers.pop(command.consumer_id, None)
        if handle is not None:
            handle.subscription.remove_consumer(handle.consumer)
        if command.id is not None:
            self.send(cmd.Success(id=command.id))

    @handles(cmd.Unsubscribe)
    async def unsubscribe(self, command: cmd.Unsubscribe) -> None:
        handle = self._consumer(command.consumer_id)
        await handle.topic.unsubscribe(handle.subscription.name, handle.consumer)
        self.consumers.pop(command.consumer_id, None)
        self.send(cmd.Success(id=command.id))

    def _consumer(self, consumer_id: int) -> ConsumerHandle:
        handle = self.consumers.get(consumer_id)
        if handle is None:
            raise ConsumerNotFoundError(f"no consumer {consumer_id} on this connection")
        return handle

    # -- unload (broker/namespace/unload.py) ----------------------------------------------------

    def detach_producer(self, producer_id: int) -> bool:
        """Take the producer off its topic (an unload); False when it is not on this connection."""
        producer = self.producers.pop(producer_id, None)
        if producer is None:
            return False
        producer.topic.counters.remove_producer((id(self), producer_id))
        self._detached_producers.add(producer_id)
        if not self.producers:
            self._publish_buffer.unregister(self)
        return True

    def detach_consumer(self, consumer_id: int) -> bool:
        handle = self.consumers.pop(consumer_id, None)
        if handle is None:
            return False
        handle.subscription.remove_consumer(handle.consumer)
        self._detached_consumers.add(consumer_id)
        return True

    def fence_producer(self, producer_id: int) -> None:
        """Close the producer for good: an exclusive producer with fencing took its topic
        (its late SENDs are dropped unanswered, as after an unload; the client's reconnection
        is refused while the fencing producer stays)."""
        if self.detach_producer(producer_id):
            self.send_close_producer(producer_id)

    def send_close_producer(self, producer_id: int, assigned_broker_url: str | None = None) -> None:
        if self.is_open and producer_id in self._detached_producers:
            self.send(cmd.CloseProducer(producer_id=producer_id, assigned_broker_url=assigned_broker_url))

    def send_close_consumer(self, consumer_id: int, assigned_broker_url: str | None = None) -> None:
        if self.is_open and consumer_id in self._detached_consumers:
            self.send(cmd.CloseConsumer(consumer_id=consumer_id, assigned_broker_url=assigned_broker_url))

    # -- connection -----------------------------------------------------------------------------

    def throttle(self, reason: str) -> None:
        """Stop reading this socket for ``reason`` (it reads again once no reason holds)."""
        if reason in self._throttles:
            return
        if not self._throttles:
            self._throttling.throttled_connections += 1
            if self.transport is not None and not self.transport.is_closing():
                self.transport.pause_reading()
        self._throttles.add(reason)
        if reason == PENDING_SENDS:
            self._throttling.connection_pauses += 1

    def unthrottle(self, reason: str) -> None:
        if reason not in self._throttles:
            return
        self._throttles.discard(reason)
        if not self._throttles:
            self._throttling.throttled_connections -= 1
            if self.transport is not None and not self.transport.is_closing():
                self.transport.resume_reading()

    @property
    def throttled(self) -> bool:
        return bool(self._throttles)

    def resume_writing(self) -> None:
        super().resume_writing()
        for handle in self.consumers.values():
            handle.subscription.read_more()

    def closed(self, reason: MiniPulsarError) -> None:
        super().closed(reason)
        if self._counted:
            self._connection_counts.ended(self.protocol)
        for producer_id, producer in self.producers.items():
            producer.topic.counters.remove_producer((id(self), producer_id))
        self.producers.clear()
        self._publish_buffer.unregister(self)
        for held in list(self._throttles):
            self.unthrottle(held)
        for handle in self.consumers.values():
            handle.subscription.remove_consumer(handle.consumer)
        self.consumers.clear()


def _claim_access(topic: Topic, mode: cmd.ProducerAccessMode, *, queued: bool = False) -> None:
    """Admit a producer of ``mode`` to ``topic`` as Pulsar does: a Shared one while no
    exclusive producer holds it and none waits for it, an Exclusive one while it has no
    producer at all; one with fencing takes it from every producer attached (each is closed,
    and its reconnection refused while the fencing one stays). ``queued``: the producer whose
    WaitForExclusive turn it is (the queue does not stand in its own way).

    Raises:
        ProducerBusyError: the topic is held by an exclusive producer, or (Exclusive) by any,
            or producers wait for exclusive access.
    """
    attached = [p for p in topic.counters.producers.values() if isinstance(p, ProducerHandle)]
    if mode == "ExclusiveWithFencing":
        for other in attached:
            other.connection.fence_producer(other.producer_id)
        return
    holder = next((p for p in attached if p.access_mode != "Shared"), None)
    if holder is not None:
        raise ProducerBusyError(f"{topic.name} has an exclusive producer ({holder.name!r})")
    if mode == "Exclusive" and attached:
        raise ProducerBusyError(f"{topic.name} has {len(attached)} producers: Exclusive access refused")
    waiting = len(topic.counters.exclusive_queue) - int(queued)
    if waiting > 0:
        raise ProducerBusyError(f"{topic.name} has {waiting} producers waiting for exclusive access")


def _parse_topic(topic: str) -> TopicName:
    try:
        name = TopicName.parse(topic)
    except ValueError as error:
        raise InvalidCommandError(str(error)) from None
    return name


def _parse_batch_index_acks(items: list[Any]) -> list[tuple[Position, int]]:
    """``[ledger_id, entry_id, [word, ...]]`` items as (position, bits still unacknowledged)."""
    parsed = []
    for item in items:
        if (
            not isinstance(item, list)
            or len(item) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in item[:2])
            or not isinstance(item[2], list)
            or not all(isinstance(w, int) and not isinstance(w, bool) for w in item[2])
        ):
            raise InvalidCommandError(f"batch_index_acks must hold [ledger_id, entry_id, [word, ...]], got {item!r}")
        parsed.append((Position(item[0], item[1]), bits_of(item[2])))
    return parsed


def _parse_positions(message_ids: list[Any]) -> list[Position]:
    positions = []
    for item in message_ids:
        if (
            not isinstance(item, list)
            or len(item) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in item)
        ):
            raise InvalidCommandError(f"message_ids must hold [ledger_id, entry_id] pairs, got {item!r}")
        positions.append(Position(item[0], item[1]))
    if not positions:
        raise InvalidCommandError("message_ids is empty")
    return positions
