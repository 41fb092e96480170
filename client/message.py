"""MessageId and Message, with the names and accessors of the official ``pulsar`` client."""

from __future__ import annotations

import functools
from typing import ClassVar

import msgpack


@functools.total_ordering
class MessageId:
    """Where a message is: ledger, entry, partition, and index inside its batch (-1: not batched)."""

    __slots__ = ("_ledger_id", "_entry_id", "_partition", "_batch_index")

    earliest: ClassVar["MessageId"]
    latest: ClassVar["MessageId"]

    def __init__(self, partition: int = -1, ledger_id: int = -1, entry_id: int = -1, batch_index: int = -1) -> None:
        self._ledger_id = ledger_id
        self._entry_id = entry_id
        self._partition = partition
        self._batch_index = batch_index

    def ledger_id(self) -> int:
        return self._ledger_id

    def entry_id(self) -> int:
        return self._entry_id

    def partition(self) -> int:
        return self._partition

    def batch_index(self) -> int:
        return self._batch_index

    def _key(self) -> tuple[int, int, int, int]:
        return (self._partition, self._ledger_id, self._entry_id, self._batch_index)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessageId) and self._key() == other._key()

    def __lt__(self, other: "MessageId") -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def serialize(self) -> bytes:
        return msgpack.packb(list(self._key()))

    @classmethod
    def deserialize(cls, data: bytes, topic: str | None = None) -> "MessageId":
        partition, ledger_id, entry_id, batch_index = msgpack.unpackb(data)
        return cls(partition, ledger_id, entry_id, batch_index)

    def __str__(self) -> str:
        return f"({self._ledger_id},{self._entry_id},{self._partition},{self._batch_index})"

    def __repr__(self) -> str:
        return f"MessageId(ledger_id={self._ledger_id}, entry_id={self._entry_id}, " \
               f"partition={self._partition}, batch_index={self._batch_index})"


MessageId.earliest = MessageId(-1, -1, -1, -1)
MessageId.latest = MessageId(-1, 2**63 - 1, 2**63 - 1, -1)


class Message:
    """A received message."""

    __slots__ = ("_data", "_id", "_topic", "_properties", "_key", "_publish_ms", "_event_ms",
                 "_redelivery_count", "_producer_name")

    def __init__(self, data: bytes | None, message_id: MessageId, topic: str, *, properties: dict | None,
                 partition_key: str | None, publish_timestamp: int, event_timestamp: int,
                 redelivery_count: int, producer_name: str) -> None:
        self._data = data
        self._id = message_id
        self._topic = topic
        self._properties = properties or {}
        self._key = partition_key
        self._publish_ms = publish_timestamp
        self._event_ms = event_timestamp
        self._redelivery_count = redelivery_count
        self._producer_name = producer_name

    def data(self) -> bytes:
        return self._data if self._data is not None else b""

    def value(self) -> bytes:
        return self.data()

    def has_null_value(self) -> bool:
        return self._data is None

    def message_id(self) -> MessageId:
        return self._id

    def topic_name(self) -> str:
        return self._topic

    def properties(self) -> dict:
        return self._properties

    def partition_key(self) -> str | None:
        return self._key

    def publish_timestamp(self) -> int:
        return self._publish_ms

    def event_timestamp(self) -> int:
        return self._event_ms

    def redelivery_count(self) -> int:
        return self._redelivery_count

    def producer_name(self) -> str:
        return self._producer_name

    def __repr__(self) -> str:
        return f"Message(id={self._id}, {len(self.data())} bytes)"
