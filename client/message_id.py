"""MessageId: where a message is — (ledger, entry, partition, batch index) — as Pulsar's.

The semantics are the official Python client's, which wraps the C++ ``pulsar::MessageId``:

- ``earliest`` is ``(-1, -1, -1, -1)``; ``latest`` has ledger and entry at ``2**63 - 1``.
- ``==`` compares all four fields; ``<`` orders by ``(ledger, entry, batch index)`` and ignores
  the partition (C++ ``operator<``), so ``<=`` is ``< or ==`` and ``>=`` is ``not <``.
  An id outside a batch has batch index -1 and so sorts before the batch's members.
- ``serialize()`` gives the bytes of Pulsar's ``MessageIdData`` protobuf (ledgerId = 1,
  entryId = 2 as uint64; partition = 3 and batch_index = 4 as int32, written only when not
  -1), so ids serialized by the official client deserialize here and back.
- The topic, set on ids from a multi-topic consumer or by ``deserialize(data, topic)``, says
  which topic the id belongs to; it takes no part in comparisons (as in C++).

Unlike the official Python ``MessageId`` (unhashable: it defines ``__eq__`` only), ids hash,
consistently with ``==``, so that they can key dicts and sets.
"""

from __future__ import annotations

from typing import ClassVar

INT64_MAX = 2**63 - 1

# protobuf wire types
_VARINT = 0
_FIXED64 = 1
_LENGTH_DELIMITED = 2
_FIXED32 = 5


class MessageId:
    """Where a message is: ledger, entry, partition (-1: not partitioned) and index inside
    its batch (-1: not batched)."""

    __slots__ = ("_batch_index", "_entry_id", "_ledger_id", "_partition", "_topic")

    earliest: ClassVar[MessageId]
    latest: ClassVar[MessageId]

    def __init__(
        self,
        partition: int = -1,
        ledger_id: int = -1,
        entry_id: int = -1,
        batch_index: int = -1,
        *,
        topic: str | None = None,
    ) -> None:
        self._partition = partition
        self._ledger_id = ledger_id
        self._entry_id = entry_id
        self._batch_index = batch_index
        self._topic = topic

    def ledger_id(self) -> int:
        return self._ledger_id

    def entry_id(self) -> int:
        return self._entry_id

    def partition(self) -> int:
        return self._partition

    def batch_index(self) -> int:
        return self._batch_index

    def topic_name(self) -> str | None:
        """The topic this id belongs to, when known (multi-topic consumers, ``deserialize``)."""
        return self._topic

    def with_topic(self, topic: str | None, partition: int | None = None) -> MessageId:
        """The same position, labelled with ``topic`` (and ``partition`` when given)."""
        return MessageId(
            self._partition if partition is None else partition,
            self._ledger_id,
            self._entry_id,
            self._batch_index,
            topic=topic,
        )

    # -- comparisons (C++ pulsar::MessageId) ------------------------------------------------------

    def _position(self) -> tuple[int, int, int]:
        return (self._ledger_id, self._entry_id, self._batch_index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._position() == other._position() and self._partition == other._partition

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __lt__(self, other: MessageId) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._position() < other._position()

    def __le__(self, other: MessageId) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self < other or self == other

    def __gt__(self, other: MessageId) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return not self <= other

    def __ge__(self, other: MessageId) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return not self < other

    def __hash__(self) -> int:
        return hash((self._ledger_id, self._entry_id, self._partition, self._batch_index))

    # -- bytes ----------------------------------------------------------------------------------

    def serialize(self) -> bytes:
        """Pulsar's ``MessageIdData`` protobuf encoding of this id."""
        out = bytearray()
        _put_field(out, 1, self._ledger_id)
        _put_field(out, 2, self._entry_id)
        if self._partition != -1:
            _put_field(out, 3, self._partition)
        if self._batch_index != -1:
            _put_field(out, 4, self._batch_index)
        return bytes(out)

    @classmethod
    def deserialize(cls, data: bytes, topic: str | None = None) -> MessageId:
        """The id :meth:`serialize` (ours or the official client's) wrote.

        Raises:
            ValueError: ``data`` is not a MessageIdData encoding.
        """
        fields = _parse_fields(bytes(data))
        if 1 not in fields or 2 not in fields:
            raise ValueError("a serialized message id needs ledgerId and entryId")
        return cls(
            _int32(fields.get(3, -1)), _int64(fields[1]), _int64(fields[2]), _int32(fields.get(4, -1)), topic=topic
        )

    def __str__(self) -> str:
        return f"({self._ledger_id},{self._entry_id},{self._partition},{self._batch_index})"

    def __repr__(self) -> str:
        return (
            f"MessageId(partition={self._partition}, ledger_id={self._ledger_id}, "
            f"entry_id={self._entry_id}, batch_index={self._batch_index})"
        )


MessageId.earliest = MessageId(-1, -1, -1, -1)
MessageId.latest = MessageId(-1, INT64_MAX, INT64_MAX, -1)


def batch_message_ids(ledger_id: int, entry_id: int, count: int) -> list[MessageId]:
    """The ids of an entry's ``count`` batched messages (batch index 0 … count-1, not
    partitioned), equal to ``MessageId(-1, ledger_id, entry_id, i)``: a producer's receipt
    path makes one per message, so this skips the constructor's argument handling."""
    new = object.__new__
    ids = []
    for index in range(count):
        message_id = new(MessageId)
        message_id._partition = -1
        message_id._ledger_id = ledger_id
        message_id._entry_id = entry_id
        message_id._batch_index = index
        message_id._topic = None
        ids.append(message_id)
    return ids


def is_earliest(message_id: MessageId) -> bool:
    return message_id.ledger_id() < 0 and message_id.entry_id() < 0


def is_latest(message_id: MessageId) -> bool:
    return message_id.ledger_id() == INT64_MAX and message_id.entry_id() == INT64_MAX


# -- a protobuf subset: varint fields (negative ints as their 64-bit two's complement) -------------


def _put_field(out: bytearray, number: int, value: int) -> None:
    _put_varint(out, number << 3 | _VARINT)
    _put_varint(out, value & 0xFFFF_FFFF_FFFF_FFFF)


def _put_varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def _get_varint(data: bytes, offset: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if offset >= len(data) or shift > 63:
            raise ValueError("truncated or overlong varint in a serialized message id")
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7


def _parse_fields(data: bytes) -> dict[int, int]:
    """Varint fields by number; other wire types (ack_set, first_chunk_message_id …) are skipped."""
    fields: dict[int, int] = {}
    offset = 0
    while offset < len(data):
        key, offset = _get_varint(data, offset)
        number, wire_type = key >> 3, key & 7
        if wire_type == _VARINT:
            fields[number], offset = _get_varint(data, offset)
        elif wire_type == _LENGTH_DELIMITED:
            length, offset = _get_varint(data, offset)
            offset += length
        elif wire_type in (_FIXED64, _FIXED32):
            offset += 8 if wire_type == _FIXED64 else 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire_type} in a serialized message id")
        if offset > len(data):
            raise ValueError("truncated serialized message id")
    return fields


def _int64(value: int) -> int:
    value &= 0xFFFF_FFFF_FFFF_FFFF
    return value - (1 << 64) if value >= 1 << 63 else value


def _int32(value: int) -> int:
    value &= 0xFFFF_FFFF
    return value - (1 << 32) if value >= 1 << 31 else value
