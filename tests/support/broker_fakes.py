"""Fakes of what broker components are given, for the broker's unit and component tests.

- :class:`FakeConnection`: a client connection that records what it is sent, asked and told
  (a consumer's, a producer's, a throttled one's; the client consumer's too);
- :class:`FakeLedger` and :class:`FakeCursor`: one ledger of entries in memory, read by a
  subscription's dispatcher, deduplication's replay and the cursor protocol;
- :func:`closed_ledger`: a real ManagedLedger over closed ledgers, without bookies (:class:`NoBookies`);
- :func:`make_consumer` (and :func:`sent_to` it), :class:`FakePublisher`, :func:`batch_payload`,
  :class:`NoTopics`; :class:`UnloadingTopic` (a topic as an unload sees it) and
  :class:`LoadedTopic` (a broker with that one topic loaded).

Invariants: each fake implements the broker protocol it stands in for as declared (no
``type: ignore``), and records calls instead of timing, so tests assert on what happened.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from minipulsar.bookkeeper.ledger_handle import LedgerHandle
from minipulsar.broker.managed_ledger.config import ManagedLedgerConfig
from minipulsar.broker.managed_ledger.entry_cache import EntryCache
from minipulsar.broker.managed_ledger.entry_reader import CursorReadCounters
from minipulsar.broker.managed_ledger.info import LedgerInfo
from minipulsar.broker.managed_ledger.ledger import ManagedLedger
from minipulsar.broker.managed_ledger.position import Entry, Position
from minipulsar.broker.managed_ledger.range_set import PositionRangeSet
from minipulsar.broker.topics.base import Topic
from minipulsar.broker.topics.consumer import ServerConsumer
from minipulsar.broker.topics.counters import ProducerConnection, TopicCounters
from minipulsar.broker.topics.non_persistent_topic import NonPersistentSubscription
from minipulsar.errors import MiniPulsarError
from minipulsar.metadata import MemoryMetadataStore, MetadataStore
from minipulsar.protocol.batch import BatchMessage, encode_batch
from minipulsar.protocol.codec import decode_body, encode_message
from minipulsar.protocol.commands import Message
from minipulsar.protocol.frames import LENGTH
from minipulsar.protocol.schema import Command
from minipulsar.topic_name import TopicName
from tests.support.memory_bookies import MemoryBookies

L = 7
"""The one ledger of :class:`FakeLedger`."""


def batch_payload(count: int = 1, key: str | None = None, producer: str = "p", first_sequence_id: int = 0) -> bytes:
    """An entry's payload: a batch of ``count`` messages ``b"x"`` with consecutive sequence ids."""
    messages = [BatchMessage(first_sequence_id + i, b"x", key) for i in range(count)]
    return encode_batch(1000, producer, messages)


class FakeConnection:
    """Records every command sent (``sent``), request made (``requests``) and call (``log``).

    Broker side: the connection of a consumer (``writable``, ``peer``), of a producer, or one
    the publish buffer throttles (``reasons``); ``detach_*`` answer True for the ids in
    ``attached_producers`` / ``attached_consumers``. Client side: the client consumer's
    connection (``is_open``, ``consumers``, ``request`` answered at once).
    """

    peer = "127.0.0.1:40000"
    client_version = "fake-client"
    is_open = True

    def __init__(self, log: list[str] | None = None) -> None:
        self.log = log if log is not None else []
        self.sent: list[Command] = []
        self.requests: list[tuple[type[Command], dict[str, Any]]] = []
        self.writable = True
        self.reasons: set[str] = set()
        self.attached_producers: set[int] = set()
        self.attached_consumers: set[int] = set()
        self.consumers: dict[int, Any] = {}
        self.ack_sets: dict[Position, list[int]] = {}
        """The client consumers registered on this connection (client side)."""
        self.on_detach_producer: Callable[[int], object] | None = None
        """Called with the producer id on each :meth:`detach_producer`."""

    # -- what is sent ----------------------------------------------------------------------------

    def send(self, command: Command) -> None:
        self.sent.append(command)

    def push_message(
        self, consumer_id: int, position: Position, payload: bytes, redelivery_count: int, ack_set: Sequence[int] = ()
    ) -> None:
        """A MESSAGE push: recorded as the command it decodes to (``ack_set`` in ``ack_sets``)."""
        if ack_set:
            self.ack_sets[position] = list(ack_set)
        header, body = encode_message(consumer_id, position.ledger_id, position.entry_id, payload, redelivery_count)
        self.sent.append(decode_body((header + body)[LENGTH.size :]))

    def request(self, cls: type[Command], *, timeout_s: float | None = None, **fields: Any) -> asyncio.Future[None]:
        self.requests.append((cls, fields))
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    def of(self, kind: type[Command]) -> list[Any]:
        return [command for command in self.sent if isinstance(command, kind)]

    def messages(self) -> list[Position]:
        """The positions of the MESSAGEs sent, in order."""
        return [Position(m.ledger_id, m.entry_id) for m in self.of(Message)]

    # -- throttling ------------------------------------------------------------------------------

    def throttle(self, reason: str) -> None:
        self.reasons.add(reason)

    def unthrottle(self, reason: str) -> None:
        self.reasons.discard(reason)

    @property
    def reading(self) -> bool:
        return not self.reasons

    # -- unload ----------------------------------------------------------------------------------

    def detach_producer(self, producer_id: int) -> bool:
        """True the first time only, as the broker's connection answers (the producer is off it)."""
        self.log.append(f"detach producer {producer_id}")
        if self.on_detach_producer is not None:
            self.on_detach_producer(producer_id)
        attached = producer_id in self.attached_producers
        self.attached_producers.discard(producer_id)
        return attached

    def detach_consumer(self, consumer_id: int) -> bool:
        self.log.append(f"detach consumer {consumer_id}")
        attached = consumer_id in self.attached_consumers
        self.attached_consumers.discard(consumer_id)
        return attached

    def send_close_producer(self, producer_id: int, assigned_broker_url: str | None = None) -> None:
        self.log.append(f"CLOSE_PRODUCER {producer_id} {assigned_broker_url}")

    def send_close_consumer(self, consumer_id: int, assigned_broker_url: str | None = None) -> None:
        self.log.append(f"CLOSE_CONSUMER {consumer_id} {assigned_broker_url}")


@dataclass
class FakePublisher:
    """A producer as a topic's counters list it (:class:`~broker.topics.counters.Publisher`)."""

    producer_id: int
    connection: ProducerConnection
    in_flight: asyncio.Future[Any] | None = None
    """What :meth:`drained` gives: the producer's sends still being written."""
    name: str = "p"
    address: str = "127.0.0.1:40000"
    connected_since: str = "2024-01-01T00:00:00.000+00:00"
    client_version: str = "fake-client"
    access_mode: str = "Shared"
    messages_in: int = 0
    bytes_in: int = 0

    def drained(self) -> asyncio.Future[Any] | None:
        return self.in_flight


def make_consumer(
    consumer_id: int, name: str | None = None, priority_level: int = 0, permits: int = 0
) -> ServerConsumer:
    """A broker consumer on its own :class:`FakeConnection`, with ``permits``."""
    consumer = ServerConsumer(
        consumer_id, name or f"c{consumer_id}", FakeConnection(), "sub", TopicCounters(), priority_level=priority_level
    )
    consumer.permits = permits
    return consumer


def connection_of(consumer: ServerConsumer) -> FakeConnection:
    """The :class:`FakeConnection` of a consumer :func:`make_consumer` made."""
    connection = consumer.connection
    assert isinstance(connection, FakeConnection), connection
    return connection


def sent_to(consumer: ServerConsumer) -> list[Position]:
    """The positions sent to a consumer :func:`make_consumer` made, in order."""
    return connection_of(consumer).messages()


class FakeLedger:
    """One ledger (:data:`L`) of entries in memory; :meth:`add` completes at once and wakes readers.
    Enough of a managed ledger for a durable ManagedCursor on it (deduplication's), whose cursor
    ledger goes to :attr:`bookkeeper` (in memory)."""

    name = "public/default/persistent/t"
    path = "/managed-ledgers/public/default/persistent/t"
    config = ManagedLedgerConfig()

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._waiters: list[asyncio.Future[None]] = []
        self.bookkeeper = MemoryBookies()
        self.cursors: list[Any] = []

    def add_cursor(self, cursor: Any) -> None:
        self.cursors.append(cursor)

    def remove_cursor(self, cursor: Any) -> None:
        if cursor in self.cursors:
            self.cursors.remove(cursor)

    def contains(self, position: Position) -> bool:
        return position.ledger_id == L and 0 <= position.entry_id < len(self.entries)

    def normalize(self, position: Position) -> Position:
        return position

    def mark_delete_moved(self, previous: Position, current: Position) -> None:
        pass

    def trim_soon(self) -> None:
        pass

    def add(self, count: int = 1, key: str | None = None) -> Position:
        """An entry of ``count`` messages with ``key``."""
        return self._append(batch_payload(count, key), count)

    def add_batch(self, producer: str, sequence_ids: list[int]) -> Position:
        """An entry of ``producer``'s messages with these sequence ids (what deduplication replays)."""
        payload = encode_batch(0, producer, [BatchMessage(s, b"x") for s in sequence_ids])
        return self._append(payload, len(sequence_ids))

    def _append(self, payload: bytes, num_messages: int) -> Position:
        position = Position(L, len(self.entries))
        self.entries.append(Entry(position, payload, num_messages))
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        return position

    async def read_entries(
        self,
        start: Position,
        max_entries: int,
        max_bytes: int | None = None,
        cursor: CursorReadCounters | None = None,
    ) -> list[Entry]:
        return self.entries[start.entry_id : start.entry_id + max_entries]

    def wait_for_entries(self) -> asyncio.Future[None]:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        return waiter

    @property
    def first_position(self) -> Position:
        return Position(L, -1)

    @property
    def last_confirmed(self) -> Position:
        return Position(L, len(self.entries) - 1)

    def next_position(self, position: Position) -> Position:
        return Position(L, 0) if position.ledger_id != L else Position(L, position.entry_id + 1)

    async def find_position_by_publish_time(self, publish_time_ms: int) -> Position:
        """Every entry is older: past the tail."""
        return self.next_position(self.last_confirmed)


class FakeCursor:
    """A ManagedCursor's dispatch-facing surface over a :class:`FakeLedger`."""

    name = "sub"
    durable = True

    def __init__(self, ledger: FakeLedger) -> None:
        self.ledger = ledger
        self.mark_delete = Position(L, -1)
        self.individually_deleted = PositionRangeSet()
        self.read_position = Position(L, 0)
        self.active = False
        self.cache_hits_tailing = self.cache_hits_catch_up = 0
        self.cache_misses_tailing = self.cache_misses_catch_up = 0
        self.closed = self.deleted = False

    @property
    def backlog_entries(self) -> int:
        return len(self.ledger.entries) - 1 - self.mark_delete.entry_id - self.individually_deleted.entry_count

    def has_more_entries(self) -> bool:
        return self.read_position.entry_id < len(self.ledger.entries)

    async def read_entries(self, max_entries: int, max_bytes: int | None = None) -> list[Entry]:
        entries = self.ledger.entries[self.read_position.entry_id : self.read_position.entry_id + max_entries]
        if entries:
            self.read_position = Position(L, entries[-1].position.entry_id + 1)
        return [e for e in entries if not self.is_acked(e.position)]

    def rewind(self) -> None:
        self.read_position = Position(L, self.mark_delete.entry_id + 1)

    def seek(self, read_position: Position) -> None:
        self.read_position = read_position

    def is_acked(self, position: Position) -> bool:
        return position <= self.mark_delete or position in self.individually_deleted

    async def acknowledge(self, positions: list[Position]) -> None:
        for position in positions:
            if position > self.mark_delete:
                self.individually_deleted.add(position)
        while Position(L, self.mark_delete.entry_id + 1) in self.individually_deleted:
            self.mark_delete = Position(L, self.mark_delete.entry_id + 1)
            self.individually_deleted.remove_up_to(self.mark_delete)

    async def acknowledge_cumulative(self, position: Position) -> None:
        self.mark_delete = max(self.mark_delete, position)
        self.individually_deleted.remove_up_to(self.mark_delete)

    async def reset(self, position: Position) -> None:
        self.mark_delete = Position(L, position.entry_id - 1)
        self.individually_deleted.clear()
        self.read_position = position

    async def close(self) -> None:
        self.closed = True

    async def delete(self) -> None:
        self.deleted = True


class NoBookies:
    """A :class:`~broker.managed_ledger.ledger_client.LedgerClient` for a managed ledger that must
    never reach BookKeeper: any call is a failed test."""

    async def create_ledger(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        custom: dict[str, str] | None = None,
        *,
        id_above: int = -1,
    ) -> LedgerHandle:
        raise AssertionError("no bookies in this test: a ledger was created")

    async def open_ledger(self, ledger_id: int, *, recovery: bool = True) -> LedgerHandle:
        raise AssertionError(f"no bookies in this test: ledger {ledger_id} was opened")

    async def delete_ledger(self, ledger_id: int) -> None:
        raise AssertionError(f"no bookies in this test: ledger {ledger_id} was deleted")


KEEP_FOREVER = {"retention_time_minutes": -1, "retention_size_mb": -1}
"""No trimming: there are no bookies to delete ledgers from."""


def closed_ledger(
    *entries_per_ledger: int, store: MetadataStore | None = None, bookies: MemoryBookies | None = None, **config: Any
) -> ManagedLedger:
    """A real managed ledger whose ledgers 10, 11, … are closed with the given entry counts, kept
    forever unless ``config`` says otherwise (no bookies: nothing is added or read from them;
    durable cursors write their cursor ledgers to ``bookies``, default in memory)."""
    ledger = ManagedLedger(
        "t/ns/persistent/x",
        store=store if store is not None else MemoryMetadataStore(),
        bookkeeper=bookies if bookies is not None else MemoryBookies(),
        cache=EntryCache(0),
        config=ManagedLedgerConfig(**{**KEEP_FOREVER, **config}),
    )
    ledger._ledgers.replace([LedgerInfo(10 + i, entries=n) for i, n in enumerate(entries_per_ledger)])
    return ledger


class NoTopics:
    """:class:`~minipulsar.broker.topics.registry.LoadedTopics` of a broker with no topic loaded."""

    def loaded_topics(self) -> list[Topic]:
        return []

    def loaded_topic(self, name: TopicName) -> Topic | None:
        return None

    def take_topics(self, belongs: Callable[[TopicName], bool]) -> list[asyncio.Future[Topic]]:
        return []


class UnloadingTopic:
    """What an unload reads of a topic: producer 1 (its last send ``in_flight``) and consumer 7 on
    ``connection``; its close is logged."""

    def __init__(
        self,
        log: list[str],
        connection: FakeConnection,
        in_flight: asyncio.Future[Any],
        name: str = "persistent://t/ns/x",
    ) -> None:
        self.name, self.log = TopicName.parse(name), log
        connection.attached_producers.add(1)
        connection.attached_consumers.add(7)
        self.counters = TopicCounters(producers={(1, 1): FakePublisher(1, connection, in_flight)})
        subscription = NonPersistentSubscription("sub", "Shared")
        subscription.add_consumer(ServerConsumer(7, "c", connection, "sub", self.counters), "Shared")
        self.subscriptions = {"sub": subscription}

    def fence(self, error: MiniPulsarError) -> None:
        self.log.append("topic fenced")

    async def close(self) -> None:
        self.log.append("topic closed")


class LoadedTopic:
    """:class:`~minipulsar.broker.topics.registry.LoadedTopics` of a broker with one topic loaded
    (an :class:`UnloadingTopic`, say) until an unload takes it."""

    def __init__(self, topic: Any) -> None:
        self.future: asyncio.Future[Any] | None = asyncio.get_running_loop().create_future()
        self.future.set_result(topic)
        self.name: TopicName = topic.name

    def loaded_topics(self) -> list[Topic]:
        return [] if self.future is None else [self.future.result()]

    def loaded_topic(self, name: TopicName) -> Topic | None:
        return self.future.result() if self.future is not None and name == self.name else None

    def take_topics(self, belongs: Callable[[TopicName], bool]) -> list[asyncio.Future[Topic]]:
        if self.future is None or not belongs(self.name):
            return []
        taken, self.future = self.future, None
        return [taken]
