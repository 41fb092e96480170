"""The entry payload: a producer batch of messages. Client and broker business only.

An entry stored on the bookies is exactly the SEND payload, never re-encoded. Its layout is
one msgpack array, in one of two shapes::

    plain:       [num_messages, publish_time_ms, producer_name, [message, ...]]
    compressed:  [num_messages, publish_time_ms, producer_name, [head], [codec, uncompressed_size, blob]]

    message = [sequence_id, data (bin | nil), key (str | nil), properties (map | nil), event_time_ms
               (, ordering_key (str | nil))]
    head    = [first sequence_id, nil, first key (, first ordering_key)]  (the first message without its data)
    blob    = codec(msgpack([message, ...]))            (codec: LZ4 | ZSTD | ZLIB, see .compression)

The plain shape is the original one and is what an uncompressed batch is still written as, so
entries written before compression existed read the same. ``ordering_key`` is written only
when set (a 5-element message is the original form).

Whatever the shape, the first elements stay where readers that do not decode the batch look:

- ``num_messages`` first, so the broker counts an entry's messages (permits count messages)
  with :func:`peek_num_messages` from a few header bytes;
- ``publish_time_ms`` second (:func:`peek_publish_time_ms`: time-based retention and seek);
- the fourth element's first item carries the first message's key at index 2 and its
  ordering key, when set, last (index 5 of a message, 3 of a head), so the Key_Shared
  dispatcher finds a batch's routing key (:func:`peek_sticky_key`) without inflating a
  compressed batch.

:func:`decode_batch` reads both shapes (inflating a compressed one) and returns the same
:class:`Batch`; :func:`decode_batch_items` the same without an object per message (the
consumer's receive path).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack

from minipulsar.errors import MalformedCommandError
from minipulsar.protocol import compression
from minipulsar.protocol.codec import MSGPACK_SHAPE_ERRORS

_ARRAY_OF_4 = 0x94
_ARRAY_OF_5 = 0x95
_HEADERS = (_ARRAY_OF_4, _ARRAY_OF_5)
_UINT = {0xCC: struct.Struct(">B"), 0xCD: struct.Struct(">H"), 0xCE: struct.Struct(">I")}


@dataclass(frozen=True, slots=True)
class BatchMessage:
    """One message of a batch, as the producer set it."""

    sequence_id: int
    data: bytes | None
    key: str | None = None
    properties: dict[str, str] | None = None
    event_time_ms: int = 0
    ordering_key: str | None = None


@dataclass(frozen=True, slots=True)
class Batch:
    publish_time_ms: int
    producer_name: str
    messages: list[BatchMessage] = field(default_factory=list)
    compression: compression.CompressionCodec = compression.NONE
    """The codec the entry was written with (NONE: the plain shape)."""


def _message_fields(m: BatchMessage) -> tuple[Any, ...]:
    if m.ordering_key is None:
        return (m.sequence_id, m.data, m.key, m.properties, m.event_time_ms)
    return (m.sequence_id, m.data, m.key, m.properties, m.event_time_ms, m.ordering_key)


def encode_batch(
    publish_time_ms: int,
    producer_name: str,
    messages: list[BatchMessage],
    compression_type: compression.CompressionCodec = compression.NONE,
) -> bytes:
    """The entry payload of ``messages``; ``compression_type`` NONE writes the plain shape."""
    return encode_rows(publish_time_ms, producer_name, [_message_fields(m) for m in messages], compression_type)


Row = tuple[Any, ...]
"""A message as the batch holds it: ``(sequence_id, data, key, properties, event_time_ms)``,
plus ``ordering_key`` when it has one (the module docstring's ``message``)."""


def encode_rows(
    publish_time_ms: int,
    producer_name: str,
    rows: list[Row],
    compression_type: compression.CompressionCodec = compression.NONE,
) -> bytes:
    """:func:`encode_batch` of messages given as rows — the producer's path: the same bytes,
    without an object per message."""
    if compression_type == compression.NONE:
        return _pack((len(rows), publish_time_ms, producer_name, rows))
    inner = _pack(rows)
    head = [(rows[0][0], None, rows[0][2], *rows[0][5:6])] if rows else []
    blob = compression.compress(compression_type, inner)
    return _pack((len(rows), publish_time_ms, producer_name, head, (compression_type, len(inner), blob)))


_packers = threading.local()


def _pack(value: Any) -> bytes:
    """msgpack of ``value`` (tuples as arrays) with this thread's Packer: ``msgpack.packb``
    makes a Packer per call, whose fresh 1 MiB buffer costs more than packing a batch. A
    Packer keeps its buffer — at most the largest batch it packed — for the next call."""
    packer = getattr(_packers, "packer", None)
    if packer is None:
        packer = _packers.packer = msgpack.Packer(use_bin_type=True)
    packed: bytes = packer.pack(value)
    return packed


def decode_batch(payload: bytes) -> Batch:
    """Both shapes; a compressed batch is inflated.

    Raises:
        MalformedCommandError: the payload is not a batch (or its compressed part is corrupt).
    """
    publish_time_ms, producer_name, raw, codec = _decode(payload)
    try:
        messages = [BatchMessage(*m) for m in raw]
    except MSGPACK_SHAPE_ERRORS as exc:
        raise MalformedCommandError(f"entry payload is not a message batch: {exc}") from exc
    return Batch(publish_time_ms, producer_name, messages, codec)


def decode_batch_items(payload: bytes) -> tuple[int, str, Sequence[Sequence[Any]]]:
    """``(publish_time_ms, producer_name, messages)``, each message its raw field tuple
    (``(sequence_id, data, key, properties, event_time_ms(, ordering_key))``, the module
    docstring's ``message``): :func:`decode_batch` without an object per message, for the
    consumer's receive path. Tuples, not lists: the garbage collector stops tracking a tuple
    of plain values, so a queue of received messages costs its collections less. Checked as
    far as the receive path relies on: the count, and every message 5 or 6 fields long.

    Raises:
        MalformedCommandError: as :func:`decode_batch`.
    """
    publish_time_ms, producer_name, raw, _ = _decode(payload)
    try:
        lengths = list(map(len, raw))  # in C: no Python-level step per message
    except TypeError as exc:
        raise MalformedCommandError(f"entry payload is not a message batch: {exc}") from exc
    if lengths and (min(lengths) < 5 or max(lengths) > 6):
        raise MalformedCommandError("entry payload is not a message batch: a message without 5 or 6 fields")
    return publish_time_ms, producer_name, raw


def _decode(payload: bytes) -> tuple[int, str, Sequence[Any], compression.CompressionCodec]:
    codec: compression.CompressionCodec = compression.NONE
    try:
        fields = msgpack.unpackb(payload, raw=False, use_list=False)
        if len(fields) == 4:
            count, publish_time_ms, producer_name, raw = fields
        else:
            count, publish_time_ms, producer_name, _, (codec_name, size, blob) = fields
            codec = compression.codec_of_entry(codec_name)
            raw = msgpack.unpackb(compression.decompress(codec, blob, size), raw=False, use_list=False)
        if count != len(raw):
            raise MalformedCommandError(f"batch says {count} messages but holds {len(raw)}")
    except MSGPACK_SHAPE_ERRORS as exc:
        raise MalformedCommandError(f"entry payload is not a message batch: {exc}") from exc
    return publish_time_ms, producer_name, raw, codec


def peek_num_messages(payload: bytes, default: int = 1) -> int:
    """``num_messages`` from a batch header without decoding the batch; ``default`` if unreadable."""
    if len(payload) < 2 or payload[0] not in _HEADERS:
        return default
    marker = payload[1]
    if marker <= 0x7F:
        return marker
    unpacker = _UINT.get(marker)
    if unpacker is None or len(payload) < 2 + unpacker.size:
        return default
    count: int = unpacker.unpack_from(payload, 2)[0]
    return count


_UINT_OR_INT = {
    **_UINT,
    0xCF: struct.Struct(">Q"),
    0xD0: struct.Struct(">b"),
    0xD1: struct.Struct(">h"),
    0xD2: struct.Struct(">i"),
    0xD3: struct.Struct(">q"),
}


def _peek_int(payload: bytes, offset: int) -> tuple[int, int] | None:
    """A msgpack integer at ``offset``: (value, offset after it), or None."""
    if offset >= len(payload):
        return None
    marker = payload[offset]
    if marker <= 0x7F:
        return marker, offset + 1
    if marker >= 0xE0:
        return marker - 0x100, offset + 1
    unpacker = _UINT_OR_INT.get(marker)
    if unpacker is None or len(payload) < offset + 1 + unpacker.size:
        return None
    return unpacker.unpack_from(payload, offset + 1)[0], offset + 1 + unpacker.size


def peek_publish_time_ms(payload: bytes) -> int | None:
    """``publish_time_ms`` from a batch header without decoding the batch; None if unreadable."""
    if len(payload) < 3 or payload[0] not in _HEADERS:
        return None
    count = _peek_int(payload, 1)
    if count is None:
        return None
    publish_time = _peek_int(payload, count[1])
    return None if publish_time is None else publish_time[0]


def peek_sticky_key(payload: bytes) -> bytes | None:
    """The key Key_Shared routes the batch by: its first message's ordering key, else its key
    (Pulsar's order), read from the batch header and that message only (the compressed shape
    keeps both in ``head``); None if it has neither or is not a batch."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(payload)
    try:
        if unpacker.read_array_header() < 4:
            return None
        unpacker.skip()  # num_messages
        unpacker.skip()  # publish_time_ms
        unpacker.skip()  # producer_name
        if unpacker.read_array_header() == 0:
            return None
        fields = unpacker.read_array_header()  # a message (5 or 6) or a head (3 or 4)
        if fields < 3:
            return None
        unpacker.skip()  # sequence_id
        unpacker.skip()  # data
        key = unpacker.unpack()
        ordering_key = None
        if fields == 6:
            unpacker.skip()  # properties
            unpacker.skip()  # event_time_ms
            ordering_key = unpacker.unpack()
        elif fields == 4:
            ordering_key = unpacker.unpack()
    except (ValueError, msgpack.UnpackException):  # not a batch: one opaque message without a key
        return None
    for candidate in (ordering_key, key):
        if isinstance(candidate, str) and candidate:
            return candidate.encode()
        if isinstance(candidate, bytes) and candidate:
            return candidate
    return None
