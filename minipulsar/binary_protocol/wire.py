"""Pulsar's binary protocol as a broker connection's wire: Pulsar frames in, minipulsar's
commands out, and back (docs/design.md §3.8). Sans-IO: no sockets, no asyncio.

The broker serves one set of commands (:mod:`minipulsar.protocol.commands`); an official
client's connection differs only in how they cross the socket. :class:`PulsarWire` decodes a
``BaseCommand`` into the command the broker's handlers already take, and encodes what they
answer into the ``BaseCommand`` the client waits for, so producers, consumers, permits,
throttling, deduplication and unloads behave for an official client exactly as for ours.

The two command sets are close but not the same, and the wire keeps the little state that
bridges them:

- a Pulsar answer names its request's kind (an ACK answered by ACK_RESPONSE, a failed LOOKUP
  by LOOKUP_RESPONSE ``Failed``, a failed PARTITIONED_METADATA by its response ``Failed``),
  where ours has SUCCESS and ERROR for all: :attr:`PulsarWire._asked` remembers the kind of
  each request in flight, dropped when it is answered;
- Pulsar's CONNECT carries no request id and negotiates a protocol version: the wire answers
  with the lower of the client's and ours;
- a broker-initiated CLOSE_PRODUCER / CLOSE_CONSUMER needs a request id in Pulsar's protocol:
  the wire numbers them itself.

Commands an official client may send that this build does not serve (schemas, transactions,
topic-list watchers) are refused with ``NotSupported`` (Pulsar's ``NotAllowedError``) and the
request's id, so the client fails loudly instead of waiting.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, Final

from minipulsar.binary_protocol import commands as answers
from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.binary_protocol.commands import server_error_for
from minipulsar.binary_protocol.frames import (
    PulsarFrame,
    PulsarFrameDecoder,
    encode_command,
    encode_payload_command,
)
from minipulsar.errors import ErrorCode, MalformedCommandError
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.commands import PROTOCOL_VERSION
from minipulsar.protocol.schema import Command

T = api.BaseCommand

MAX_PROTOCOL_VERSION: Final = 21
"""The newest protocol version served (Pulsar 4.0's ``ProtocolVersion.v21``)."""

CLIENT_ROLE: Final = "pulsar-client"
"""The CONNECT role an official client's connection gets (stats and logs)."""

_SUB_TYPES: Final[dict[int, cmd.SubscriptionType]] = {
    api.CommandSubscribe.Exclusive: "Exclusive",
    api.CommandSubscribe.Shared: "Shared",
    api.CommandSubscribe.Failover: "Failover",
    api.CommandSubscribe.Key_Shared: "Key_Shared",
}
_INITIAL_POSITIONS: Final[dict[int, cmd.SubscriptionInitialPosition]] = {
    api.CommandSubscribe.Latest: "Latest",
    api.CommandSubscribe.Earliest: "Earliest",
}
_KEY_SHARED_MODES: Final[dict[int, cmd.KeySharedMode]] = {
    api.AUTO_SPLIT: "AUTO_SPLIT",
    api.STICKY: "STICKY",
}
_TOPICS_MODES: Final[dict[int, cmd.TopicsOfNamespaceMode]] = {
    api.CommandGetTopicsOfNamespace.PERSISTENT: "PERSISTENT",
    api.CommandGetTopicsOfNamespace.NON_PERSISTENT: "NON_PERSISTENT",
    api.CommandGetTopicsOfNamespace.ALL: "ALL",
}
_ANSWERED_IN_KIND: Final = frozenset({T.LOOKUP, T.PARTITIONED_METADATA, T.ACK})
"""Requests whose failure (or, for ACK, success) is answered by their own response type."""

_NOT_SUPPORTED: Final[dict[int, str]] = {
    T.GET_SCHEMA: "schemas are not supported by this broker yet",
    T.GET_OR_CREATE_SCHEMA: "schemas are not supported by this broker yet",
    T.WATCH_TOPIC_LIST: "topic list watchers are not supported by this broker",
    T.CONSUMER_STATS: "consumer stats over the binary protocol are not supported; use the admin API",
    T.AUTH_RESPONSE: "authentication is not supported by this broker yet",
}
"""Well-formed commands refused by name; every transaction command is refused as well."""


class PulsarWire:
    """One official client's connection: decodes Pulsar frames into minipulsar commands and
    encodes minipulsar commands (and MESSAGE pushes and SEND_RECEIPTs) as Pulsar frames.

    Args:
        max_frame_size: the largest frame accepted (``nettyMaxFrameSizeBytes``).
        max_message_size: what CONNECTED tells the client it may send (``maxMessageSize``).
        server_version: CONNECTED's ``server_version``.
    """

    def __init__(self, max_frame_size: int, max_message_size: int, server_version: str) -> None:
        self._frames = PulsarFrameDecoder(max_frame_size)
        self.get_buffer = self._frames.get_buffer
        self.buffer_updated = self._frames.buffer_updated
        self.feed = self._frames.feed
        self.compact = self._frames.compact
        self._max_message_size = max_message_size
        self._server_version = server_version
        self.protocol_version = MAX_PROTOCOL_VERSION
        """What CONNECTED answered: the lower of the client's and ours."""
        self._asked: dict[int, api.BaseCommand] = {}
        """Requests in flight answered in their own kind (:data:`_ANSWERED_IN_KIND`), and
        refused requests awaiting their refusal: request id → the request."""
        self._broker_request_ids = itertools.count(1 << 62)
        """Request ids of the broker's own CLOSE_* (far above what a client numbers)."""
        self._discarding = False
        self._decoders: dict[int, Callable[[Any, PulsarFrame], Command]] = {
            T.CONNECT: self._connect,
            T.PING: lambda c, f: cmd.Ping(),
            T.PONG: lambda c, f: cmd.Pong(),
            T.LOOKUP: self._lookup,
            T.PARTITIONED_METADATA: self._partitioned_metadata,
            T.GET_TOPICS_OF_NAMESPACE: _topics_of_namespace,
            T.PRODUCER: _producer,
            T.SEND: _send,
            T.CLOSE_PRODUCER: lambda c, f: cmd.CloseProducer(producer_id=c.producer_id, id=c.request_id),
            T.SUBSCRIBE: _subscribe,
            T.FLOW: lambda c, f: cmd.Flow(consumer_id=c.consumer_id, permits=c.messagePermits),
            T.ACK: self._ack,
            T.REDELIVER_UNACKNOWLEDGED_MESSAGES: _redeliver,
            T.SEEK: _seek,
            T.GET_LAST_MESSAGE_ID: lambda c, f: cmd.GetLastMessageId(id=c.request_id, consumer_id=c.consumer_id),
            T.UNSUBSCRIBE: lambda c, f: cmd.Unsubscribe(id=c.request_id, consumer_id=c.consumer_id),
            T.CLOSE_CONSUMER: lambda c, f: cmd.CloseConsumer(consumer_id=c.consumer_id, id=c.request_id),
        }
        self._encoders: dict[type[Command], Callable[[Any], api.BaseCommand]] = {
            cmd.Connected: self._connected,
            cmd.Ping: lambda c: answers.ping(),
            cmd.Pong: lambda c: answers.pong(),
            cmd.Success: self._success,
            cmd.Error: self._error,
            cmd.LookupResponse: self._lookup_response,
            cmd.PartitionedMetadataResponse: self._partitions_response,
            cmd.GetTopicsOfNamespaceResponse: _topics_response,
            cmd.ProducerSuccess: _producer_success,
            cmd.SendError: _send_error,
            cmd.CloseProducer: self._close_producer,
            cmd.CloseConsumer: self._close_consumer,
            cmd.ActiveConsumerChange: _active_consumer_change,
            cmd.LastMessageId: _last_message_id,
        }

    @property
    def max_frame_size(self) -> int:
        return self._frames.max_frame_size

    # -- in ---------------------------------------------------------------------------------------

    def next_command(self) -> Command | None:
        """The next command, ``None`` when more bytes are needed.

        Raises:
            FrameTooLargeError: fatal; close the connection.
            MalformedCommandError: that frame was skipped (or refused as not supported, with
                its request id and ``NotSupported``); the wire stays usable.
        """
        if self._discarding:
            return None
        frame = self._frames.next_frame()
        if frame is None:
            return None
        command = frame.command
        decode = self._decoders.get(command.type)
        if decode is None:
            raise self._refused(command)
        try:
            decoded = decode(_sub_command(command), frame)
            if command.type in _ANSWERED_IN_KIND:
                self._remember(command)
            return decoded
        except (ValueError, KeyError, TypeError) as exc:  # an enum or a field out of our range
            raise MalformedCommandError(
                f"{T.Type.Name(command.type)}: {exc}", request_id=_request_id_of(command)
            ) from exc

    def discard(self) -> None:
        """Drop what is buffered and everything that arrives from now on."""
        self._discarding = True

    def _remember(self, request: api.BaseCommand) -> None:
        request_id = _request_id_of(request)
        if request_id is not None:
            self._asked[request_id] = request

    def _refused(self, request: api.BaseCommand) -> MalformedCommandError:
        """A command not served: remembered, so its refusal takes the form its client waits for."""
        self._remember(request)
        return _refusal(request)

    def _connect(self, c: api.CommandConnect, frame: PulsarFrame) -> Command:
        self.protocol_version = min(c.protocol_version, MAX_PROTOCOL_VERSION)
        return cmd.Connect(id=0, protocol_version=PROTOCOL_VERSION, client_version=c.client_version, role=CLIENT_ROLE)

    def _lookup(self, c: api.CommandLookupTopic, frame: PulsarFrame) -> Command:
        return cmd.Lookup(id=c.request_id, topic=c.topic, authoritative=c.authoritative)

    def _partitioned_metadata(self, c: api.CommandPartitionedTopicMetadata, frame: PulsarFrame) -> Command:
        return cmd.PartitionedMetadata(id=c.request_id, topic=c.topic)

    def _ack(self, c: api.CommandAck, frame: PulsarFrame) -> Command:
        ack_type: cmd.AckType = "cumulative" if c.ack_type == api.CommandAck.Cumulative else "individual"
        request_id = c.request_id if c.HasField("request_id") else None
        message_ids = [[m.ledgerId, m.entryId] for m in c.message_id if not _partial(m)]
        partial = [[m.ledgerId, m.entryId, list(m.ack_set)] for m in c.message_id if _partial(m)]
        if not message_ids and ack_type == "cumulative":  # up to the batch, and part of it
            message_ids = [[m.ledgerId, m.entryId - 1] for m in c.message_id[:1]]
        return cmd.Ack(
            consumer_id=c.consumer_id,
            message_ids=message_ids,
            ack_type=ack_type,
            id=request_id,
            batch_index_acks=partial or None,
        )

    # -- out --------------------------------------------------------------------------------------

    def encode(self, command: Command) -> tuple[bytes, bytes]:
        """The Pulsar frame answering ``command``, as ``(frame, b"")``."""
        build = self._encoders.get(type(command))
        if build is None:
            raise TypeError(f"{command.TYPE} has no counterpart in Pulsar's protocol")
        return encode_command(build(command)), b""

    def encode_message(
        self,
        consumer_id: int,
        ledger_id: int,
        entry_id: int,
        payload: bytes,
        redelivery_count: int = 0,
        ack_set: Sequence[int] = (),
    ) -> tuple[bytes, bytes | memoryview]:
        """A MESSAGE push of one stored entry, already in Pulsar's entry format; ``ack_set``:
        the batch's indexes still to deliver (empty: all)."""
        command = answers.message(consumer_id, ledger_id, entry_id, redelivery_count, ack_set=ack_set)
        return encode_payload_command(command, payload)

    def encode_send_receipt(
        self, producer_id: int, sequence_id: int, highest_sequence_id: int, ledger_id: int, entry_id: int
    ) -> bytes:
        receipt = answers.send_receipt(producer_id, sequence_id, ledger_id, entry_id, max(highest_sequence_id, 0))
        return encode_command(receipt)

    def _connected(self, c: cmd.Connected) -> api.BaseCommand:
        return answers.connected(self._server_version, self.protocol_version, self._max_message_size)

    def _success(self, c: cmd.Success) -> api.BaseCommand:
        request = self._asked.pop(c.id, None)
        if request is not None and request.type == T.ACK:
            return answers.ack_response(request.ack.consumer_id, c.id)
        return answers.success(c.id)

    def _error(self, c: cmd.Error) -> api.BaseCommand:
        request = self._asked.pop(c.id, None) if c.id is not None else None
        error = server_error_for(_error_code(c.code))
        message = c.message or c.code
        if request is not None:
            refusal = answers.error_response(request, error, message)
            if refusal is not None:
                return refusal
        return answers.error(c.id if c.id is not None else 0, error, message)

    def _lookup_response(self, c: cmd.LookupResponse) -> api.BaseCommand:
        self._asked.pop(c.id, None)
        if c.kind == "failed":
            return answers.lookup_error(c.id, server_error_for(_error_code(c.error)), c.message or c.error)
        return answers.lookup_response(c.id, c.broker_url, redirect=c.kind == "redirect", authoritative=c.authoritative)

    def _partitions_response(self, c: cmd.PartitionedMetadataResponse) -> api.BaseCommand:
        self._asked.pop(c.id, None)
        return answers.partitioned_metadata_response(c.id, c.partitions)

    def _close_producer(self, c: cmd.CloseProducer) -> api.BaseCommand:
        request_id = next(self._broker_request_ids)
        return answers.close_producer(c.producer_id, request_id, assigned_broker_service_url=c.assigned_broker_url)

    def _close_consumer(self, c: cmd.CloseConsumer) -> api.BaseCommand:
        request_id = next(self._broker_request_ids)
        return answers.close_consumer(c.consumer_id, request_id, assigned_broker_service_url=c.assigned_broker_url)


# -- in: stateless decoders -------------------------------------------------------------------


def _topics_of_namespace(c: api.CommandGetTopicsOfNamespace, frame: PulsarFrame) -> Command:
    return cmd.GetTopicsOfNamespace(id=c.request_id, namespace=c.namespace, mode=_TOPICS_MODES[c.mode])


_ACCESS_MODES: Final[dict[int, cmd.ProducerAccessMode]] = {
    api.Shared: "Shared",
    api.Exclusive: "Exclusive",
    api.ExclusiveWithFencing: "ExclusiveWithFencing",
    api.WaitForExclusive: "WaitForExclusive",
}


def _producer(c: api.CommandProducer, frame: PulsarFrame) -> Command:
    access_mode = _ACCESS_MODES.get(c.producer_access_mode)
    if access_mode is None:
        raise MalformedCommandError(
            f"producer access mode {api.ProducerAccessMode.Name(c.producer_access_mode)} is not supported yet",
            request_id=c.request_id,
            code=ErrorCode.NOT_SUPPORTED,
        )
    if c.HasField("schema") and c.schema.type not in (api.Schema.None_, api.Schema.String):
        raise MalformedCommandError(
            f"schema {api.Schema.Type.Name(c.schema.type)} is not supported yet: produce bytes or strings",
            request_id=c.request_id,
            code=ErrorCode.NOT_SUPPORTED,
        )
    name = c.producer_name if c.user_provided_producer_name or c.HasField("producer_name") else None
    return cmd.Producer(
        id=c.request_id, topic=c.topic, producer_id=c.producer_id, producer_name=name or None, access_mode=access_mode
    )


def _send(c: api.CommandSend, frame: PulsarFrame) -> Command:
    payload = frame.headers_and_payload
    if payload is None:
        raise MalformedCommandError("SEND without a payload")
    return cmd.Send(
        producer_id=c.producer_id,
        sequence_id=c.sequence_id,
        payload=payload,
        num_messages=c.num_messages,
        # the C++ client leaves highest_sequence_id out: a batch's ids run on from sequence_id
        highest_sequence_id=(
            c.highest_sequence_id if c.HasField("highest_sequence_id") else c.sequence_id + c.num_messages - 1
        ),
    )


def _subscribe(c: api.CommandSubscribe, frame: PulsarFrame) -> Command:
    start = None
    initial_position = _INITIAL_POSITIONS[c.initialPosition]
    if c.HasField("start_message_id"):
        ledger_id, entry_id = _signed(c.start_message_id.ledgerId), _signed(c.start_message_id.entryId)
        if ledger_id < 0:  # MessageId.earliest: (-1, -1)
            initial_position = "Earliest"
        elif ledger_id == _INT64_MAX:  # MessageId.latest
            initial_position = "Latest"
        else:
            start = [ledger_id, max(entry_id, 0)]
    mode: cmd.KeySharedMode = "AUTO_SPLIT"
    if c.HasField("keySharedMeta"):
        mode = _KEY_SHARED_MODES[c.keySharedMeta.keySharedMode]
    return cmd.Subscribe(
        id=c.request_id,
        topic=c.topic,
        subscription=c.subscription,
        consumer_id=c.consumer_id,
        sub_type=_SUB_TYPES[c.subType],
        consumer_name=c.consumer_name or None,
        initial_position=initial_position,
        durable=c.durable,
        priority_level=c.priority_level,
        start_message_id=start,
        key_shared_mode=mode,
    )


def _redeliver(c: api.CommandRedeliverUnacknowledgedMessages, frame: PulsarFrame) -> Command:
    ids = [[m.ledgerId, m.entryId] for m in c.message_ids]
    return cmd.RedeliverUnacked(consumer_id=c.consumer_id, message_ids=ids or None)


def _seek(c: api.CommandSeek, frame: PulsarFrame) -> Command:
    if c.HasField("message_publish_time"):
        return cmd.Seek(id=c.request_id, consumer_id=c.consumer_id, publish_time_ms=c.message_publish_time)
    return cmd.Seek(
        id=c.request_id, consumer_id=c.consumer_id, ledger_id=c.message_id.ledgerId, entry_id=c.message_id.entryId
    )


_INT64_MAX = 2**63 - 1


def _signed(value: int) -> int:
    """A ``uint64`` id field read as Java's ``long``: MessageId.earliest's -1 arrives as 2**64 - 1."""
    return value - 2**64 if value > _INT64_MAX else value


def _partial(message_id: api.MessageIdData) -> bool:
    """A batch-index ack that leaves some of its batch unacknowledged (a set bit in
    ``ack_set`` is a message still to ack)."""
    return any(message_id.ack_set)


# -- out: stateless encoders ------------------------------------------------------------------


def _topics_response(c: cmd.GetTopicsOfNamespaceResponse) -> api.BaseCommand:
    return answers.topics_of_namespace_response(c.id, c.topics)


def _producer_success(c: cmd.ProducerSuccess) -> api.BaseCommand:
    return answers.producer_success(c.id, c.producer_name, c.last_sequence_id, producer_ready=c.producer_ready)


def _send_error(c: cmd.SendError) -> api.BaseCommand:
    return answers.send_error(c.producer_id, c.sequence_id, server_error_for(_error_code(c.code)), c.message or c.code)


def _active_consumer_change(c: cmd.ActiveConsumerChange) -> api.BaseCommand:
    return answers.active_consumer_change(c.consumer_id, c.is_active)


def _last_message_id(c: cmd.LastMessageId) -> api.BaseCommand:
    mark_delete = (c.mark_delete[0], c.mark_delete[1]) if c.mark_delete is not None else None
    return answers.last_message_id_response(
        c.id, c.ledger_id, c.entry_id, batch_index=c.batch_index, mark_delete_position=mark_delete
    )


# -- helpers ------------------------------------------------------------------------------------


def _sub_command(command: api.BaseCommand) -> Any:
    """The one sub-message a BaseCommand of its ``type`` carries."""
    sub = answers.body(command)
    if sub is None:
        raise MalformedCommandError(f"{T.Type.Name(command.type)} without its command", request_id=None)
    return sub


def _request_id_of(command: api.BaseCommand) -> int | None:
    """The request id inside whatever sub-message ``command`` carries, if any."""
    for descriptor, value in command.ListFields():
        if descriptor.message_type is not None and "request_id" in descriptor.message_type.fields_by_name:
            request_id: int = value.request_id
            return request_id
    return None


def _refusal(command: api.BaseCommand) -> MalformedCommandError:
    name = T.Type.Name(command.type) if command.type in T.Type.values() else str(command.type)
    reason = _NOT_SUPPORTED.get(command.type)
    if reason is None:
        served_by_pulsar = command.type in T.Type.values()
        reason = (
            f"{name} (transactions and the other commands of Pulsar this build lacks) is not supported"
            if served_by_pulsar
            else f"unknown command type {name}"
        )
    return MalformedCommandError(reason, request_id=_request_id_of(command), code=ErrorCode.NOT_SUPPORTED)


def _error_code(code: str) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_ERROR
