"""MessageId and Message, with the names and accessors of the official ``pulsar`` client."""

from __future__ import annotations

from minipulsar.client.message_id import MessageId

__all__ = ["Message", "MessageId"]


class Message:
    """A received message."""

    __slots__ = (
        "_data",
        "_event_ms",
        "_id",
        "_key",
        "_producer_name",
        "_properties",
        "_publish_ms",
        "_redelivery_count",
        "_topic",
    )

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
