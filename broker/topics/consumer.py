"""The broker's view of one consumer: its connection, its permits, what it has not acked."""

from __future__ import annotations

from typing import Protocol

from minipulsar.protocol.commands import Message

from broker.managed_ledger.position import Entry, Position


class ConsumerConnection(Protocol):
    def send(self, command: Message) -> None: ...

    @property
    def writable(self) -> bool: ...


class OutCounters(Protocol):
    messages_out: int
    bytes_out: int


class Consumer:
    """Permits count messages (not entries): a batch entry of n messages costs n permits."""

    def __init__(self, consumer_id: int, name: str, connection: ConsumerConnection, subscription_name: str,
                 topic_counters: "OutCounters") -> None:
        self.consumer_id = consumer_id
        self.name = name
        self.connection = connection
        self.subscription_name = subscription_name
        self.permits = 0
        self.pending_acks: dict[Position, int] = {}
        """Dispatched but not acknowledged: position → messages in the entry."""
        self.messages_out = 0
        self.bytes_out = 0
        self._topic_counters = topic_counters

    def send_entries(self, entries: list[Entry]) -> None:
        send, consumer_id, pending_acks = self.connection.send, self.consumer_id, self.pending_acks
        messages = size = 0
        for entry in entries:
            position = entry.position
            send(Message(consumer_id=consumer_id, ledger_id=position.ledger_id, entry_id=position.entry_id,
                         payload=entry.payload))
            pending_acks[position] = entry.num_messages
            messages += entry.num_messages
            size += len(entry.payload)
        self.permits -= messages
        self.messages_out += messages
        self.bytes_out += size
        self._topic_counters.messages_out += messages
        self._topic_counters.bytes_out += size

    @property
    def unacked_messages(self) -> int:
        return sum(self.pending_acks.values())

    def __repr__(self) -> str:
        return f"Consumer({self.name!r}, id={self.consumer_id}, permits={self.permits})"
