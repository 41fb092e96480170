"""Every command on the wire, grouped by who speaks it (docs/design.md §3).

Requests carry ``id`` (per connection); responses (``response=True``) carry the same ``id``
and complete the request. Payload bytes travel as msgpack ``bin`` and are handed on unchanged
producer → broker → bookie → broker → consumer.

Field names are the wire keys. Keep them short and stable: renaming one breaks old peers.

A field typed with one of the ``Literal`` wire enumerations below accepts only its values:
anything else fails decoding (:class:`~minipulsar.errors.MalformedCommandError`, answered
``InvalidCommand``) before a handler sees it.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal

from minipulsar.protocol.schema import Command, command

PROTOCOL_VERSION = 1

# --------------------------------------------------------------------------------------------
# Wire enumerations

SubscriptionType = Literal["Exclusive", "Shared", "Failover", "Key_Shared"]
"""How a subscription hands messages to its consumers (Pulsar's ``CommandSubscribe.SubType``)."""

SubscriptionInitialPosition = Literal["Latest", "Earliest"]
"""Where a new subscription starts (Pulsar's ``CommandSubscribe.InitialPosition``)."""

KeySharedMode = Literal["AUTO_SPLIT", "STICKY"]
"""How a Key_Shared subscription assigns keys (Pulsar's ``KeySharedMode``); the broker serves
AUTO_SPLIT and refuses STICKY with a message naming it."""

AckType = Literal["individual", "cumulative"]
"""One entry at a time, or everything up to and including it (Pulsar's ``CommandAck.AckType``)."""

ProducerAccessMode = Literal["Shared", "Exclusive", "ExclusiveWithFencing", "WaitForExclusive"]
"""Pulsar's ``ProducerAccessMode``: Shared, or the topic's only producer — refused while others
are attached, fencing them out, or queued until they have gone."""

LookupType = Literal["connect", "redirect", "failed"]
"""A lookup's answer: this broker owns the topic, ask ``broker_url``, or it failed (Pulsar's
``CommandLookupTopicResponse.LookupType``)."""

TopicsOfNamespaceMode = Literal["PERSISTENT", "NON_PERSISTENT", "ALL"]
"""Which topics GET_TOPICS_OF_NAMESPACE lists (Pulsar's ``CommandGetTopicsOfNamespace.Mode``)."""

NotificationKind = Literal["created", "modified", "deleted", "children_changed"]
"""What happened to a metadata path: the values of :class:`minipulsar.metadata.NotificationType`."""

# --------------------------------------------------------------------------------------------
# Every connection


@command("CONNECT")
class Connect(Command):
    """First frame on every connection."""

    id: int
    protocol_version: int
    client_version: str = ""
    auth: dict[str, Any] | None = None
    role: str = "client"
    """What the peer is (client, broker, bookie …); for logs and stats only."""


@command("CONNECTED", response=True)
class Connected(Command):
    id: int
    protocol_version: int
    max_frame_size: int
    server_version: str = ""


@command("PING")
class Ping(Command):
    pass


@command("PONG")
class Pong(Command):
    pass


@command("SUCCESS", response=True)
class Success(Command):
    id: int


@command("ERROR", response=True)
class Error(Command):
    """A typed failure; ``id`` is absent when the error is about the connection itself."""

    code: str
    message: str = ""
    id: int | None = None


# --------------------------------------------------------------------------------------------
# Client ↔ broker


@command("LOOKUP")
class Lookup(Command):
    id: int
    topic: str
    authoritative: bool = False


@command("LOOKUP_RESPONSE", response=True)
class LookupResponse(Command):
    id: int
    kind: LookupType
    broker_url: str = ""
    authoritative: bool = False
    message: str = ""
    error: str = ""
    """kind=failed: the :class:`~minipulsar.errors.ErrorCode` value (``ServiceNotReady`` and
    ``TooManyRequests`` mean retry later; ``TopicNotFound``/``InvalidCommand`` do not)."""


@command("PARTITIONED_METADATA")
class PartitionedMetadata(Command):
    id: int
    topic: str


@command("PARTITIONED_METADATA_RESPONSE", response=True)
class PartitionedMetadataResponse(Command):
    id: int
    partitions: int


@command("GET_TOPICS_OF_NAMESPACE")
class GetTopicsOfNamespace(Command):
    """Regex subscriptions: the topics of ``namespace`` (``tenant/ns``) as full names; a
    partitioned topic is listed as its partitions (as Pulsar's CommandGetTopicsOfNamespace)."""

    id: int
    namespace: str
    mode: TopicsOfNamespaceMode = "PERSISTENT"


@command("GET_TOPICS_OF_NAMESPACE_RESPONSE", response=True)
class GetTopicsOfNamespaceResponse(Command):
    id: int
    topics: list[Any] = field(default_factory=list)
    """Full topic names."""


@command("PRODUCER")
class Producer(Command):
    id: int
    topic: str
    producer_id: int
    producer_name: str | None = None
    access_mode: ProducerAccessMode = "Shared"


@command("PRODUCER_SUCCESS", response=True)
class ProducerSuccess(Command):
    id: int
    producer_name: str
    last_sequence_id: int = -1
    producer_ready: bool = True
    """False: queued for exclusive access (WaitForExclusive); a second, ready answer follows."""


@command("SEND")
class Send(Command):
    """One entry: a producer batch of ``num_messages`` messages (see :mod:`.batch`)."""

    producer_id: int
    sequence_id: int
    payload: bytes
    num_messages: int = 1
    highest_sequence_id: int = -1
    """The batch's last sequence id (-1: the batch holds ``sequence_id`` only); deduplication
    treats the whole batch as ``sequence_id..highest_sequence_id``."""


@command("SEND_RECEIPT")
class SendReceipt(Command):
    producer_id: int
    sequence_id: int
    ledger_id: int
    entry_id: int


@command("SEND_ERROR")
class SendError(Command):
    producer_id: int
    sequence_id: int
    code: str
    message: str = ""


@command("SUBSCRIBE")
class Subscribe(Command):
    id: int
    topic: str
    subscription: str
    consumer_id: int
    sub_type: SubscriptionType = "Exclusive"
    consumer_name: str | None = None
    initial_position: SubscriptionInitialPosition = "Latest"
    """Where a new subscription starts."""
    durable: bool = True
    """False: a non-durable cursor (a Reader), never persisted, starting at ``start_message_id``."""
    priority_level: int = 0
    """Lower is preferred (Failover picks the active consumer by (priority_level, name))."""
    start_message_id: list[Any] | None = None
    """``[ledger_id, entry_id]`` where a non-durable cursor starts (inclusive)."""
    key_shared_mode: KeySharedMode = "AUTO_SPLIT"
    """Key_Shared only: AUTO_SPLIT (consistent hashing over consumers)."""


@command("FLOW")
class Flow(Command):
    consumer_id: int
    permits: int


@command("MESSAGE")
class Message(Command):
    """Broker → consumer push of one entry (one producer batch)."""

    consumer_id: int
    ledger_id: int
    entry_id: int
    payload: bytes
    redelivery_count: int = 0


@command("ACK")
class Ack(Command):
    """Acknowledge entries; ``message_ids`` holds ``[ledger_id, entry_id]`` pairs (empty when
    the ack is only ``batch_index_acks``).

    With an ``id`` the broker answers SUCCESS once the acknowledgement is durable.
    """

    consumer_id: int
    message_ids: list[Any]
    ack_type: AckType = "individual"
    id: int | None = None
    batch_index_acks: list[Any] | None = None
    """``[ledger_id, entry_id, [word, ...]]`` items: acks of part of a batch entry (official
    clients), each with Pulsar's ``ack_set`` of the indexes still unacknowledged."""


@command("REDELIVER_UNACKED")
class RedeliverUnacked(Command):
    """Redeliver this consumer's unacknowledged entries: all of them, or only ``message_ids``
    (``[ledger_id, entry_id]`` pairs: negative acks and ack timeouts on Shared/Key_Shared)."""

    consumer_id: int
    message_ids: list[Any] | None = None


@command("SEEK")
class Seek(Command):
    """Reset the subscription to a message id, or to the first entry published at or after
    ``publish_time_ms`` when that is given."""

    id: int
    consumer_id: int
    ledger_id: int = -1
    entry_id: int = -1
    publish_time_ms: int | None = None


@command("ACTIVE_CONSUMER_CHANGE")
class ActiveConsumerChange(Command):
    """Broker → consumer of a Failover subscription: whether it is now the active one."""

    consumer_id: int
    is_active: bool


@command("GET_LAST_MESSAGE_ID")
class GetLastMessageId(Command):
    id: int
    consumer_id: int


@command("LAST_MESSAGE_ID", response=True)
class LastMessageId(Command):
    id: int
    ledger_id: int
    entry_id: int
    batch_index: int = -1
    """The last message's index in its entry, as Pulsar's clients number messages of a batch
    (-1: not a batch, or not asked: only official clients are told it)."""
    mark_delete: list[int] | None = None
    """``[ledger_id, entry_id]``: the subscription's mark-delete position (official clients only)."""


@command("UNSUBSCRIBE")
class Unsubscribe(Command):
    id: int
    consumer_id: int


@command("CLOSE_PRODUCER")
class CloseProducer(Command):
    """Either side: the client closing, or the broker telling the client to reconnect (its
    topic was unloaded); ``assigned_broker_url`` names the new owner when the broker knows it."""

    producer_id: int
    id: int | None = None
    assigned_broker_url: str | None = None


@command("CLOSE_CONSUMER")
class CloseConsumer(Command):
    """Like CLOSE_PRODUCER, for a consumer."""

    consumer_id: int
    id: int | None = None
    assigned_broker_url: str | None = None


# --------------------------------------------------------------------------------------------
# Broker ↔ bookie


@command("ADD_ENTRY")
class AddEntry(Command):
    """``payload`` is the entry as the writer wrapped it (header + digest + payload,
    :mod:`minipulsar.bookkeeper.digest`); the bookie stores and returns it unchanged."""

    id: int
    ledger_id: int
    entry_id: int
    payload: bytes
    lac: int = -1
    """The writer's last-add-confirmed, piggybacked on every add."""
    recovery: bool = False
    """Recovery adds are accepted on a fenced ledger."""
    master_key: bytes = b""
    """The ledger's master key; the bookie records it with the ledger's first add or fence and
    refuses (UnauthorizedAccess) adds that bring another."""


@command("ADD_ENTRY_RESPONSE", response=True)
class AddEntryResponse(Command):
    id: int
    ledger_id: int
    entry_id: int


@command("READ_ENTRY")
class ReadEntry(Command):
    """Read up to ``count`` entries from ``first_entry_id``, within ``max_bytes``.

    ``fence`` fences the ledger first: later non-recovery adds get LedgerFenced.
    """

    id: int
    ledger_id: int
    first_entry_id: int
    count: int = 1
    max_bytes: int = 0
    """0 = limited by the frame size only."""
    fence: bool = False
    master_key: bytes = b""
    """With ``fence``: the ledger's master key (UnauthorizedAccess if it is not); else unused."""


@command("READ_ENTRY_RESPONSE", response=True)
class ReadEntryResponse(Command):
    id: int
    ledger_id: int
    entries: list[Any] = field(default_factory=list)
    """``[entry_id, payload]`` pairs, consecutive from ``first_entry_id``."""
    lac: int = -1


@command("READ_LAC")
class ReadLac(Command):
    """Ask for a ledger's last-add-confirmed and last entry; ``fence`` fences it first."""

    id: int
    ledger_id: int
    fence: bool = False
    master_key: bytes = b""
    """With ``fence``: the ledger's master key (UnauthorizedAccess if it is not); else unused."""


@command("READ_LAC_RESPONSE", response=True)
class ReadLacResponse(Command):
    id: int
    ledger_id: int
    lac: int
    last_entry_id: int
    """The highest entry id this bookie holds for the ledger (-1: none)."""


@command("BOOKIE_INFO")
class BookieInfo(Command):
    id: int


@command("BOOKIE_INFO_RESPONSE", response=True)
class BookieInfoResponse(Command):
    id: int
    free_disk_bytes: int
    total_disk_bytes: int
    info: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Any process ↔ metastore


@command("MD_GET")
class MdGet(Command):
    id: int
    path: str


@command("MD_GET_RESPONSE", response=True)
class MdGetResponse(Command):
    """``version`` is -1 and ``value`` None when the key does not exist."""

    id: int
    version: int
    value: bytes | None = None
    ephemeral: bool = False
    created_ms: int = 0
    modified_ms: int = 0


@command("MD_PUT")
class MdPut(Command):
    """``expected_version``: None = any, -1 = must not exist, n = must be at version n."""

    id: int
    path: str
    value: bytes
    expected_version: int | None = None
    ephemeral: bool = False
    session_id: int | None = None
    """Owner of an ephemeral key; required when ``ephemeral``."""


@command("MD_PUT_RESPONSE", response=True)
class MdPutResponse(Command):
    id: int
    version: int
    ephemeral: bool = False
    created_ms: int = 0
    modified_ms: int = 0


@command("MD_DELETE")
class MdDelete(Command):
    id: int
    path: str
    expected_version: int | None = None


@command("MD_CHILDREN")
class MdChildren(Command):
    id: int
    path: str


@command("MD_CHILDREN_RESPONSE", response=True)
class MdChildrenResponse(Command):
    id: int
    children: list[Any]


@command("MD_WATCH")
class MdWatch(Command):
    """Receive MD_NOTIFICATION for ``path`` and everything below it on this connection."""

    id: int
    path: str


@command("MD_NOTIFICATION")
class MdNotification(Command):
    path: str
    kind: NotificationKind


@command("MD_SESSION_CREATE")
class MdSessionCreate(Command):
    id: int
    timeout_ms: int


@command("MD_SESSION_CREATED", response=True)
class MdSessionCreated(Command):
    id: int
    session_id: int
    timeout_ms: int


@command("MD_SESSION_KEEPALIVE")
class MdSessionKeepAlive(Command):
    """Renews a session; answered SUCCESS, or SessionExpired once it has expired."""

    id: int
    session_id: int


@command("MD_SESSION_CLOSE")
class MdSessionClose(Command):
    """Ends a session now, deleting its ephemeral keys."""

    id: int
    session_id: int
