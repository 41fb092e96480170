"""The broker's answers as ``BaseCommand``, and minipulsar's error codes as Pulsar's.

Each builder returns a complete command — ``type`` and the one sub-message it names, every
required field filled — for :func:`~.frames.encode_command` (or, for :func:`message`,
:func:`~.frames.encode_payload_command`), so a connection handler is one line per answer.
The sub-message is filled in place (``command.send_receipt.producer_id = …``), not built
apart and copied in: protobuf's constructors copy message arguments.

Pulsar's field number of each sub-message equals its ``Type`` value (``connect = 2`` for
``CONNECT = 2`` … ``topicMigrated = 68``), so :func:`body` finds any command's sub-message by
its type, and :func:`error_response` answers any request in the form its client waits for.

Ids the broker reports as ``-1`` (a duplicate's position, "no mark-delete yet") go into
Pulsar's ``uint64`` fields as ``2**64 - 1``, as Pulsar's Java broker writes them; the clients
read them back as the signed ``-1`` (:func:`u64`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.errors import ErrorCode, code_for_error

T = api.BaseCommand
"""``T.CONNECT`` …: the values of ``BaseCommand.Type``."""

_U64_MASK = (1 << 64) - 1
_FIELDS = api.BaseCommand.DESCRIPTOR.fields_by_number


def u64(value: int) -> int:
    """``value`` as Pulsar's ``uint64`` ids hold it: -1 becomes ``2**64 - 1``."""
    return value & _U64_MASK


def body(command: api.BaseCommand) -> Any | None:
    """The sub-message ``command.type`` names, or ``None`` when it is not set (a command this
    build does not model: its body stayed an unknown field)."""
    field = _FIELDS.get(command.type)
    if field is None or not command.HasField(field.name):
        return None
    return getattr(command, field.name)


# ---- connection -------------------------------------------------------------------------------


def connected(
    server_version: str, protocol_version: int, max_message_size: int, *, feature_flags: api.FeatureFlags | None = None
) -> api.BaseCommand:
    """CONNECTED: the answer to CONNECT (``protocol_version``: the lower of the client's and ours)."""
    command = api.BaseCommand(type=T.CONNECTED)
    answer = command.connected
    answer.server_version = server_version
    answer.protocol_version = protocol_version
    answer.max_message_size = max_message_size
    if feature_flags is not None:
        answer.feature_flags.CopyFrom(feature_flags)
    return command


def ping() -> api.BaseCommand:
    return api.BaseCommand(type=T.PING, ping=api.CommandPing())


def pong() -> api.BaseCommand:
    return api.BaseCommand(type=T.PONG, pong=api.CommandPong())


# ---- generic answers ----------------------------------------------------------------------------


def success(request_id: int) -> api.BaseCommand:
    command = api.BaseCommand(type=T.SUCCESS)
    command.success.request_id = request_id
    return command


def error(request_id: int, server_error: api.ServerError, message: str) -> api.BaseCommand:
    """ERROR: fails the request ``request_id`` (PRODUCER, SUBSCRIBE, UNSUBSCRIBE, SEEK, CLOSE_*,
    GET_LAST_MESSAGE_ID, GET_TOPICS_OF_NAMESPACE …; not LOOKUP nor PARTITIONED_METADATA, whose
    clients wait for their own response type: see :func:`error_response`)."""
    command = api.BaseCommand(type=T.ERROR)
    answer = command.error
    answer.request_id = request_id
    answer.error = server_error
    answer.message = message
    return command


# ---- lookup -------------------------------------------------------------------------------------


def partitioned_metadata_response(request_id: int, partitions: int) -> api.BaseCommand:
    """``partitions`` 0: a topic that is not partitioned."""
    command = api.BaseCommand(type=T.PARTITIONED_METADATA_RESPONSE)
    answer = command.partitionMetadataResponse
    answer.request_id = request_id
    answer.partitions = partitions
    answer.response = api.CommandPartitionedTopicMetadataResponse.Success
    return command


def partitioned_metadata_error(request_id: int, server_error: api.ServerError, message: str) -> api.BaseCommand:
    command = api.BaseCommand(type=T.PARTITIONED_METADATA_RESPONSE)
    answer = command.partitionMetadataResponse
    answer.request_id = request_id
    answer.response = api.CommandPartitionedTopicMetadataResponse.Failed
    answer.error = server_error
    answer.message = message
    return command


def lookup_response(
    request_id: int,
    broker_service_url: str,
    *,
    redirect: bool = False,
    authoritative: bool = False,
    broker_service_url_tls: str | None = None,
    proxy_through_service_url: bool = False,
) -> api.BaseCommand:
    """LOOKUP_RESPONSE: ``Connect`` (``broker_service_url`` owns the topic) or, with
    ``redirect``, ``Redirect`` (ask that broker again, ``authoritative`` when it must take
    the topic)."""
    command = api.BaseCommand(type=T.LOOKUP_RESPONSE)
    answer = command.lookupTopicResponse
    answer.request_id = request_id
    answer.brokerServiceUrl = broker_service_url
    if broker_service_url_tls is not None:
        answer.brokerServiceUrlTls = broker_service_url_tls
    lookup = api.CommandLookupTopicResponse
    answer.response = lookup.Redirect if redirect else lookup.Connect
    answer.authoritative = authoritative
    answer.proxy_through_service_url = proxy_through_service_url
    return command


def lookup_error(request_id: int, server_error: api.ServerError, message: str) -> api.BaseCommand:
    command = api.BaseCommand(type=T.LOOKUP_RESPONSE)
    answer = command.lookupTopicResponse
    answer.request_id = request_id
    answer.response = api.CommandLookupTopicResponse.Failed
    answer.error = server_error
    answer.message = message
    return command


def topics_of_namespace_response(
    request_id: int, topics: Iterable[str], *, filtered: bool = False, topics_hash: str | None = None
) -> api.BaseCommand:
    """``filtered``: ``topics`` already matched the request's ``topics_pattern``."""
    command = api.BaseCommand(type=T.GET_TOPICS_OF_NAMESPACE_RESPONSE)
    answer = command.getTopicsOfNamespaceResponse
    answer.request_id = request_id
    answer.topics.extend(topics)
    answer.filtered = filtered
    if topics_hash is not None:
        answer.topics_hash = topics_hash
    return command


# ---- producers ----------------------------------------------------------------------------------


def producer_success(
    request_id: int,
    producer_name: str,
    last_sequence_id: int = -1,
    *,
    schema_version: bytes | None = None,
    producer_ready: bool = True,
) -> api.BaseCommand:
    """``last_sequence_id``: with deduplication, the highest sequence id stored for this
    producer name (-1: none); ``producer_ready`` False: queued behind an exclusive producer."""
    command = api.BaseCommand(type=T.PRODUCER_SUCCESS)
    answer = command.producer_success
    answer.request_id = request_id
    answer.producer_name = producer_name
    answer.last_sequence_id = last_sequence_id
    if schema_version is not None:
        answer.schema_version = schema_version
    if not producer_ready:
        answer.producer_ready = False
    return command


def send_receipt(
    producer_id: int, sequence_id: int, ledger_id: int, entry_id: int, highest_sequence_id: int = 0
) -> api.BaseCommand:
    """SEND_RECEIPT: the SEND ``(producer_id, sequence_id)`` is stored at (ledger, entry);
    -1, -1 for a duplicate of a message stored before (:func:`u64`)."""
    command = api.BaseCommand(type=T.SEND_RECEIPT)
    answer = command.send_receipt
    answer.producer_id = producer_id
    answer.sequence_id = sequence_id
    if highest_sequence_id:
        answer.highest_sequence_id = highest_sequence_id
    position = answer.message_id
    position.ledgerId = u64(ledger_id)
    position.entryId = u64(entry_id)
    return command


def send_error(producer_id: int, sequence_id: int, server_error: api.ServerError, message: str) -> api.BaseCommand:
    """SEND_ERROR: the SEND was not stored. The clients drop just that message on
    ``ChecksumError`` and reconnect (resending what is pending) on anything else."""
    command = api.BaseCommand(type=T.SEND_ERROR)
    answer = command.send_error
    answer.producer_id = producer_id
    answer.sequence_id = sequence_id
    answer.error = server_error
    answer.message = message
    return command


def close_producer(
    producer_id: int, request_id: int, *, assigned_broker_service_url: str | None = None
) -> api.BaseCommand:
    """CLOSE_PRODUCER from the broker (an unload): the client re-creates the producer,
    looking the topic up again unless ``assigned_broker_service_url`` says where."""
    command = api.BaseCommand(type=T.CLOSE_PRODUCER)
    close = command.close_producer
    close.producer_id = producer_id
    close.request_id = request_id
    if assigned_broker_service_url is not None:
        close.assignedBrokerServiceUrl = assigned_broker_service_url
    return command


# ---- consumers ----------------------------------------------------------------------------------


def message(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    redelivery_count: int = 0,
    partition: int = -1,
    *,
    ack_set: Sequence[int] = (),
) -> api.BaseCommand:
    """MESSAGE: the command in front of one dispatched entry (its headers and payload follow
    in the frame). ``partition`` -1 (not partitioned) is left unset: it is the default, and
    a negative int32 costs ten bytes on the wire. ``ack_set``: the batch's indexes still to
    deliver, as Pulsar's bit set of ``int64`` words (empty: all)."""
    command = api.BaseCommand(type=T.MESSAGE)
    push = command.message
    push.consumer_id = consumer_id
    position = push.message_id
    position.ledgerId = ledger_id
    position.entryId = entry_id
    if partition >= 0:
        position.partition = partition
    if redelivery_count:
        push.redelivery_count = redelivery_count
    if ack_set:
        push.ack_set.extend(ack_set)
    return command


def ack_response(
    consumer_id: int, request_id: int, server_error: api.ServerError | None = None, message: str = ""
) -> api.BaseCommand:
    """ACK_RESPONSE: the answer to an ACK that carried a ``request_id`` (the consumer waits)."""
    command = api.BaseCommand(type=T.ACK_RESPONSE)
    answer = command.ackResponse
    answer.consumer_id = consumer_id
    answer.request_id = request_id
    if server_error is not None:
        answer.error = server_error
        answer.message = message
    return command


def active_consumer_change(consumer_id: int, is_active: bool) -> api.BaseCommand:
    """ACTIVE_CONSUMER_CHANGE: a Failover (or Exclusive) subscription's active consumer moved."""
    command = api.BaseCommand(type=T.ACTIVE_CONSUMER_CHANGE)
    change = command.active_consumer_change
    change.consumer_id = consumer_id
    change.is_active = is_active
    return command


def reached_end_of_topic(consumer_id: int) -> api.BaseCommand:
    command = api.BaseCommand(type=T.REACHED_END_OF_TOPIC)
    command.reachedEndOfTopic.consumer_id = consumer_id
    return command


def close_consumer(
    consumer_id: int, request_id: int, *, assigned_broker_service_url: str | None = None
) -> api.BaseCommand:
    """CLOSE_CONSUMER from the broker: the client subscribes again (see :func:`close_producer`)."""
    command = api.BaseCommand(type=T.CLOSE_CONSUMER)
    close = command.close_consumer
    close.consumer_id = consumer_id
    close.request_id = request_id
    if assigned_broker_service_url is not None:
        close.assignedBrokerServiceUrl = assigned_broker_service_url
    return command


def last_message_id_response(
    request_id: int,
    ledger_id: int,
    entry_id: int,
    *,
    partition: int = -1,
    batch_index: int = -1,
    mark_delete_position: tuple[int, int] | None = None,
) -> api.BaseCommand:
    """GET_LAST_MESSAGE_ID_RESPONSE: the topic's last position (-1, -1: empty topic, see
    :func:`u64`) and, when given, the subscription's mark-delete position."""
    command = api.BaseCommand(type=T.GET_LAST_MESSAGE_ID_RESPONSE)
    answer = command.getLastMessageIdResponse
    answer.request_id = request_id
    last = answer.last_message_id
    last.ledgerId = u64(ledger_id)
    last.entryId = u64(entry_id)
    if partition >= 0:
        last.partition = partition
    if batch_index >= 0:
        last.batch_index = batch_index
    if mark_delete_position is not None:
        mark_delete = answer.consumer_mark_delete_position
        mark_delete.ledgerId = u64(mark_delete_position[0])
        mark_delete.entryId = u64(mark_delete_position[1])
    return command


# ---- any request, refused -------------------------------------------------------------------------


def error_response(request: api.BaseCommand, server_error: api.ServerError, message: str) -> api.BaseCommand | None:
    """The answer that fails ``request`` in the form its client waits for, or ``None`` when
    it cannot be answered (no id to answer: FLOW, REDELIVER, an ACK without ``request_id``,
    or a command whose body this build does not model).

    - LOOKUP, PARTITIONED_METADATA: their own response type, ``Failed`` (an ERROR would
      leave the client's lookup waiting for its timeout);
    - SEND: SEND_ERROR; an ACK with ``request_id``: ACK_RESPONSE;
    - GET_SCHEMA, GET_OR_CREATE_SCHEMA, CONSUMER_STATS and the transaction requests: their
      ``*_RESPONSE`` with the error set;
    - any other request with a ``request_id``: ERROR.
    """
    request_body = body(request)
    if request_body is None:
        return None
    kind = request.type
    if kind == T.LOOKUP:
        return lookup_error(request_body.request_id, server_error, message)
    if kind == T.PARTITIONED_METADATA:
        return partitioned_metadata_error(request_body.request_id, server_error, message)
    if kind == T.SEND:
        return send_error(request_body.producer_id, request_body.sequence_id, server_error, message)
    if kind == T.ACK:
        if not request_body.HasField("request_id"):
            return None
        return ack_response(request_body.consumer_id, request_body.request_id, server_error, message)
    if kind in _OWN_RESPONSE:
        return _own_response(request, request_body, server_error, message)
    if "request_id" not in request_body.DESCRIPTOR.fields_by_name:
        return None
    return error(request_body.request_id, server_error, message)


_OWN_RESPONSE: dict[int, tuple[api.BaseCommand.Type, str, str]] = {
    T.GET_SCHEMA: (T.GET_SCHEMA_RESPONSE, "error_code", "error_message"),
    T.GET_OR_CREATE_SCHEMA: (T.GET_OR_CREATE_SCHEMA_RESPONSE, "error_code", "error_message"),
    T.CONSUMER_STATS: (T.CONSUMER_STATS_RESPONSE, "error_code", "error_message"),
    T.NEW_TXN: (T.NEW_TXN_RESPONSE, "error", "message"),
    T.ADD_PARTITION_TO_TXN: (T.ADD_PARTITION_TO_TXN_RESPONSE, "error", "message"),
    T.ADD_SUBSCRIPTION_TO_TXN: (T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE, "error", "message"),
    T.END_TXN: (T.END_TXN_RESPONSE, "error", "message"),
    T.END_TXN_ON_PARTITION: (T.END_TXN_ON_PARTITION_RESPONSE, "error", "message"),
    T.END_TXN_ON_SUBSCRIPTION: (T.END_TXN_ON_SUBSCRIPTION_RESPONSE, "error", "message"),
    T.TC_CLIENT_CONNECT_REQUEST: (T.TC_CLIENT_CONNECT_RESPONSE, "error", "message"),
}
"""Requests answered by their own response type: that type, and the names of its error and
message fields."""
_TXN_ID_FIELDS = ("txnid_least_bits", "txnid_most_bits")


def _own_response(
    request: api.BaseCommand, request_body: Any, server_error: api.ServerError, message: str
) -> api.BaseCommand:
    response_type, error_field, message_field = _OWN_RESPONSE[request.type]
    command = api.BaseCommand(type=response_type)
    answer = getattr(command, _FIELDS[response_type].name)
    answer.request_id = request_body.request_id
    setattr(answer, error_field, server_error)
    setattr(answer, message_field, message)
    for name in _TXN_ID_FIELDS:
        if name in request_body.DESCRIPTOR.fields_by_name and request_body.HasField(name):
            setattr(answer, name, getattr(request_body, name))
    return command


# ---- error codes --------------------------------------------------------------------------------

_SERVER_ERRORS: dict[str, api.ServerError] = {
    "UnknownError": api.UnknownError,
    "InvalidCommand": api.NotAllowedError,
    "UnsupportedVersion": api.UnsupportedVersionError,
    "TooLarge": api.NotAllowedError,
    "AuthenticationError": api.AuthenticationError,
    "AuthorizationError": api.AuthorizationError,
    "ServiceNotReady": api.ServiceNotReady,
    "TooManyRequests": api.TooManyRequests,
    "TopicNotFound": api.TopicNotFound,
    "NotOwner": api.ServiceNotReady,
    "ProducerBusy": api.ProducerBusy,
    "ConsumerBusy": api.ConsumerBusy,
    "ProducerNotFound": api.ServiceNotReady,
    "ConsumerNotFound": api.ConsumerNotFound,
    "SubscriptionNotFound": api.SubscriptionNotFound,
    "PublishRateLimited": api.ServiceNotReady,
    "PersistenceError": api.PersistenceError,
    "NotEnoughBookies": api.PersistenceError,
    "ChecksumError": api.ChecksumError,
    "NotSupported": api.NotAllowedError,
    "LedgerFenced": api.ServiceNotReady,
    "NoSuchEntry": api.PersistenceError,
    "NoSuchLedger": api.PersistenceError,
    "BookieReadOnly": api.PersistenceError,
    "UnauthorizedAccess": api.PersistenceError,
    "NotFound": api.MetadataError,
    "AlreadyExists": api.MetadataError,
    "BadVersion": api.MetadataError,
    "NotEmpty": api.MetadataError,
    "SessionExpired": api.MetadataError,
}


def server_error_for(code: ErrorCode | str) -> api.ServerError:
    """Pulsar's ``ServerError`` for a minipulsar error code (keyed by the code's wire name,
    so a code this table predates is ``UnknownError``, never a crash).

    What the official clients do with each answer decided the mapping: ``ServiceNotReady``
    is the one code both retry after a fresh lookup (C++: ``ResultRetryable``); the C++
    client gives up on ``TopicNotFound``, ``ProducerBusy``, ``ConsumerBusy``,
    ``TooManyRequests``, ``NotAllowedError``, ``ChecksumError``, ``Authentication/
    AuthorizationError`` and retries the rest (``PersistenceError``, ``MetadataError``,
    ``UnknownError`` …). On a SEND_ERROR any code but ``ChecksumError`` makes the client
    reconnect and resend.

    =========================================  ===============================  ==========================
    minipulsar ``ErrorCode``                   Pulsar ``ServerError``           why
    =========================================  ===============================  ==========================
    UnknownError                               UnknownError
    InvalidCommand, TooLarge, NotSupported     NotAllowedError                  no such code in Pulsar;
                                                                                final, like ours
    UnsupportedVersion                         UnsupportedVersionError
    Authentication/AuthorizationError          the same
    ServiceNotReady                            ServiceNotReady
    NotOwner, LedgerFenced                     ServiceNotReady                  Pulsar's answer for a
                                                                                bundle not owned / a
                                                                                fenced topic: retry
                                                                                after a lookup
    ProducerNotFound, PublishRateLimited       ServiceNotReady                  retriable here; Pulsar
                                                                                has no code (it closes
                                                                                / pauses reads)
    TooManyRequests                            TooManyRequests                  Pulsar's own throttle
    TopicNotFound, ProducerBusy, ConsumerBusy  the same
    ConsumerNotFound, SubscriptionNotFound     the same
    ChecksumError                              ChecksumError
    PersistenceError, NotEnoughBookies,        PersistenceError                 a BookKeeper failure
    NoSuchEntry, NoSuchLedger,                                                  behind the broker
    BookieReadOnly, UnauthorizedAccess
    NotFound, AlreadyExists, BadVersion,       MetadataError                    a metadata-store
    NotEmpty, SessionExpired                                                    failure
    anything else                              UnknownError
    =========================================  ===============================  ==========================
    """
    name = code.value if isinstance(code, ErrorCode) else code
    return _SERVER_ERRORS.get(name, api.UnknownError)


def server_error_of(exc: BaseException) -> api.ServerError:
    """:func:`server_error_for` the code minipulsar reports ``exc`` with: its own ``code`` (a
    :class:`~minipulsar.errors.ServerError`, a ``MalformedCommandError`` that names one), else
    ``code_for_error``'s."""
    code = getattr(exc, "code", None)
    return server_error_for(code if isinstance(code, ErrorCode) else code_for_error(exc))
