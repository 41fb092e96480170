"""The broker's view of one consumer: its connection, its permits, what it has not acked.

Permits count messages, not entries: a batch entry of n messages costs n permits, and the
client grants them back by the message. A dispatcher may push a consumer
below zero — Pulsar does, by up to one read's worth — and sends it nothing more until FLOWs
bring it above zero again.

``pending_acks`` maps each entry sent and not yet acknowledged to its message count. It is
filled in dispatch order; every reset of dispatch (a rewind, a seek) empties it, so for a
single-active subscription its keys stay in ascending order (cumulative acks rely on this).

Invariants:

- ``unacked_messages`` is the sum of ``pending_acks`` values;
- ``permits`` goes down by the messages sent (it may go below zero), up only by FLOW, and to
  0 on a seek;
- an entry sent twice without a reset in between counts once in ``unacked_messages``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from typing import Protocol

from minipulsar.broker.managed_ledger.position import Entry, Position
from minipulsar.broker.topics.batch_index_acks import BatchIndexAcks, words_of
from minipulsar.protocol.schema import Command

EMA_WEIGHT_OLD = 0.9
"""Pulsar's ``avgPercent``: avg = 0.9·avg + 0.1·(messages / entries) after each send."""


class ConsumerConnection(Protocol):
    """The client connection a consumer is attached to (the broker's BrokerConnection)."""

    @property
    def peer(self) -> str:
        """The client's ``host:port``, as the stats show it."""
        ...

    @property
    def writable(self) -> bool:
        """The socket takes writes now (the client reads what it is sent)."""
        ...

    @property
    def client_version(self) -> str:
        """What the client's CONNECT named itself, as the stats show it."""
        ...

    def send(self, command: Command) -> None: ...

    def push_message(
        self, consumer_id: int, position: Position, payload: bytes, redelivery_count: int, ack_set: Sequence[int] = ()
    ) -> None:
        """Push one entry as a MESSAGE, in the entry format the connection's protocol reads;
        ``ack_set``: the batch's messages still to deliver (Pulsar's words; empty: all)."""
        ...

    def detach_consumer(self, consumer_id: int) -> bool:
        """Take the consumer off this connection (its topic is unloaded); False when it is not on it."""
        ...

    def send_close_consumer(self, consumer_id: int, assigned_broker_url: str | None = None) -> None:
        """CLOSE_CONSUMER for a detached consumer: the client looks its topic up again."""
        ...


class OutCounters(Protocol):
    messages_out: int
    bytes_out: int


class RedeliveryCounts(Protocol):
    def count(self, position: Position) -> int: ...


class ServerConsumer:
    """A consumer attached through one client connection: its permits, what it was sent and
    not yet acknowledged, and its counters (Pulsar's ``Consumer``; see :class:`~broker.topics.base.Consumer`)."""

    def __init__(
        self,
        consumer_id: int,
        name: str,
        connection: ConsumerConnection,
        subscription_name: str,
        topic_counters: OutCounters,
        priority_level: int = 0,
    ) -> None:
        self.consumer_id = consumer_id
        self.name = name
        self.connection = connection
        self.subscription_name = subscription_name
        self.priority_level = priority_level
        """Lower is preferred: Failover's active consumer and Shared's round-robin level."""
        self.permits = 0
        self._pending_acks: dict[Position, int] = {}
        self.unacked_messages = 0
        """Sum of ``pending_acks`` values, kept as we go."""
        self.blocked_on_unacked = False
        """Shared/Key_Shared: maxUnackedMessagesPerConsumer reached; cleared at half of it."""
        self.avg_messages_per_entry: float | None = None
        """EMA of messages per entry sent; None until the first send."""
        self.messages_out = 0
        self.bytes_out = 0
        self.redelivered_messages = 0
        self._topic_counters = topic_counters
        self.connected_since = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")

    @property
    def pending_acks(self) -> dict[Position, int]:
        """Dispatched but not acknowledged: position → messages in the entry."""
        return self._pending_acks

    @pending_acks.setter
    def pending_acks(self, pending: dict[Position, int]) -> None:
        self._pending_acks = pending
        self.unacked_messages = sum(pending.values())

    @property
    def writable(self) -> bool:
        return self.connection.writable

    def can_receive(self) -> bool:
        """Has permits, a socket that takes writes, and is not blocked on unacked messages."""
        return self.permits > 0 and not self.blocked_on_unacked and self.connection.writable

    def send_entries(
        self, entries: list[Entry], redelivery: RedeliveryCounts | None = None, batch_acks: BatchIndexAcks | None = None
    ) -> int:
        """Push ``entries`` (one MESSAGE each, naming what is left of a partly acknowledged
        batch); returns the messages sent."""
        send, consumer_id, pending_acks = self.connection.push_message, self.consumer_id, self._pending_acks
        messages = size = 0
        for entry in entries:
            position = entry.position
            count = redelivery.count(position) if redelivery is not None else 0
            # the payload as it came from the cache or the bookies: never decoded, never copied
            remaining = batch_acks.remaining(position) if batch_acks else None
            if remaining is None:
                send(consumer_id, position, entry.payload, count)
            else:
                send(consumer_id, position, entry.payload, count, words_of(remaining))
            if count:
                self.redelivered_messages += entry.num_messages
            previous = pending_acks.get(position)
            if previous is not None:  # sent twice without a reset in between: count it once
                self.unacked_messages -= previous
            pending_acks[position] = entry.num_messages
            messages += entry.num_messages
            size += len(entry.payload)
        self.unacked_messages += messages
        self.permits -= messages
        self.messages_out += messages
        self.bytes_out += size
        self._topic_counters.messages_out += messages
        self._topic_counters.bytes_out += size
        if entries:
            sample = messages / len(entries)
            avg = self.avg_messages_per_entry
            self.avg_messages_per_entry = (
                sample if avg is None else EMA_WEIGHT_OLD * avg + (1 - EMA_WEIGHT_OLD) * sample
            )
        return messages

    def acked(self, positions: Iterable[Position]) -> None:
        pending_acks = self._pending_acks
        for position in positions:
            count = pending_acks.pop(position, None)
            if count is not None:
                self.unacked_messages -= count

    def acked_up_to(self, position: Position) -> None:
        """Cumulative ack: drop pending entries at or before ``position`` (ascending keys, see above)."""
        pending_acks = self._pending_acks
        done = []
        for pending in pending_acks:
            if pending > position:
                break
            done.append(pending)
        for pending in done:
            self.unacked_messages -= pending_acks.pop(pending)

    def take_pending(self, positions: Iterable[Position] | None = None) -> list[Position]:
        """Remove and return pending entries (all, or those of ``positions`` this consumer holds)."""
        if positions is None:
            taken = list(self._pending_acks)
            self._pending_acks = {}
            self.unacked_messages = 0
            return taken
        taken = []
        for position in positions:
            count = self._pending_acks.pop(position, None)
            if count is not None:
                self.unacked_messages -= count
                taken.append(position)
        return taken

    def __repr__(self) -> str:
        return f"ServerConsumer({self.name!r}, id={self.consumer_id}, permits={self.permits})"
