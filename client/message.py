"""MessageId and Message, with the names and accessors of the official ``pulsar`` client."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from minipulsar.client.message_id import MessageId

__all__ = ["EntryInfo", "Message", "MessageId"]


class EntryInfo:
    """What every message of one pushed entry shares: where it is and the batch's header."""

    __slots__ = ("batched", "entry_id", "key", "ledger_id", "producer_name", "publish_ms", "redelivery_count", "topic")

    def __init__(
        self,
        topic: str,
        ledger_id: int,
        entry_id: int,
        batched: bool,
        publish_ms: int,
        producer_name: str,
        redelivery_count: int,
    ) -> None:
        self.topic = topic
        self.ledger_id, self.entry_id, self.key = ledger_id, entry_id, (ledger_id, entry_id)
        self.batched = batched
        self.publish_ms, self.producer_name, self.redelivery_count = publish_ms, producer_name, redelivery_count


class Message:
    """A received message.

    Built per message on the receive path, so it holds little: the batch's raw message fields
    (``(sequence_id, data, key, properties, event_time_ms, ...)``, :mod:`minipulsar.protocol.batch`),
    its index in the batch and the :class:`EntryInfo` its entry's messages share; the
    :class:`MessageId` is made when first asked for (:meth:`message_id`)."""

    __slots__ = ("_entry", "_id", "_index", "_item")

    def __init__(
        self,
        data: bytes | None,
        message_id: MessageId,
        topic: str,
        *,
        properties: dict | None,
        partition_key: str | None,
        publish_timestamp: int,
        event_timestamp: int,
        redelivery_count: int,
        producer_name: str,
    ) -> None:
        self._item: Sequence[Any] = (0, data, partition_key, properties, event_timestamp)
        self._index = message_id.batch_index()
        self._entry = EntryInfo(
            topic,
            message_id.ledger_id(),
            message_id.entry_id(),
            self._index >= 0,
            publish_timestamp,
            producer_name,
            redelivery_count,
        )
        self._id: MessageId | None = message_id

    @classmethod
    def of_item(cls, item: Sequence[Any], index: int, entry: EntryInfo) -> Message:
        """The message at ``index`` of a batch entry (``item``: its raw fields), the receive path's
        constructor: three slots, no id yet."""
        message = cls.__new__(cls)
        message._item, message._index, message._entry, message._id = item, index, entry, None
        return message

    def data(self) -> bytes:
        data = self._item[1]
        return data if data is not None else b""

    def value(self) -> bytes:
        return self.data()

    def has_null_value(self) -> bool:
        return self._item[1] is None

    def message_id(self) -> MessageId:
        message_id = self._id
        if message_id is None:
            entry = self._entry
            message_id = self._id = MessageId(-1, entry.ledger_id, entry.entry_id, self._index if entry.batched else -1)
        return message_id

    def entry_key(self) -> tuple[int, int]:
        """(ledger_id, entry_id): the entry this message came in (shared by its batch)."""
        return self._entry.key

    def batch_index(self) -> int:
        """Index in its batch entry; -1 when the entry held one message outside a batch."""
        return self._index if self._entry.batched else -1

    def topic_name(self) -> str:
        return self._entry.topic

    def properties(self) -> dict:
        return self._item[3] or {}

    def partition_key(self) -> str | None:
        key: str | None = self._item[2]
        return key

    def ordering_key(self) -> str | None:
        """The key Key_Shared orders by when it differs from the partition key (None: unset)."""
        item = self._item
        key: str | None = item[5] if len(item) > 5 else None
        return key

    def publish_timestamp(self) -> int:
        return self._entry.publish_ms

    def event_timestamp(self) -> int:
        event_ms: int = self._item[4]
        return event_ms

    def redelivery_count(self) -> int:
        return self._entry.redelivery_count

    def producer_name(self) -> str:
        return self._entry.producer_name

    def __repr__(self) -> str:
        return f"Message(id={self.message_id()}, {len(self.data())} bytes)"
