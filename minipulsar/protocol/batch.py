"""The entry payload: a producer batch of messages. Client and broker business only.

An entry stored on the bookies is exactly the SEND payload, never re-encoded. Its layout is
one msgpack array::

    [num_messages, publish_time_ms, producer_name, [message, ...]]
    message = [sequence_id, data (bin | nil), key (str | nil), properties (map | nil), event_time_ms]

``num_messages`` comes first so the broker can count messages in an entry read back from a
bookie (permits count messages, not entries) with :func:`peek_num_messages`, which reads a few
header bytes instead of decoding the batch.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import msgpack

from minipulsar.errors import InvalidCommandError

_ARRAY_OF_4 = 0x94
_UINT = {0xCC: struct.Struct(">B"), 0xCD: struct.Struct(">H"), 0xCE: struct.Struct(">I")}


@dataclass(frozen=True, slots=True)
class BatchMessage:
    """One message of a batch, as the producer set it."""

    sequence_id: int
    data: bytes | None
    key: str | None = None
    properties: dict[str, str] | None = None
    event_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class Batch:
    publish_time_ms: int
    producer_name: str
    messages: list[BatchMessage] = field(default_factory=list)


def encode_batch(publish_time_ms: int, producer_name: str, messages: list[BatchMessage]) -> bytes:
    return msgpack.packb(
        [
            len(messages),
            publish_time_ms,
            producer_name,
            [[m.sequence_id, m.data, m.key, m.properties, m.event_time_ms] for m in messages],
        ],
        use_bin_type=True,
    )


def decode_batch(payload: bytes) -> Batch:
    """Raises InvalidCommandError when the payload is not a batch."""
    try:
        count, publish_time_ms, producer_name, raw = msgpack.unpackb(payload, raw=False)
        messages = [BatchMessage(*m) for m in raw]
    except Exception as exc:
        raise InvalidCommandError(f"entry payload is not a message batch: {exc}") from exc
    if count != len(messages):
        raise InvalidCommandError(f"batch says {count} messages but holds {len(messages)}")
    return Batch(publish_time_ms, producer_name, messages)


def peek_num_messages(payload: bytes, default: int = 1) -> int:
    """``num_messages`` from a batch header without decoding the batch; ``default`` if unreadable."""
    if len(payload) < 2 or payload[0] != _ARRAY_OF_4:
        return default
    marker = payload[1]
    if marker <= 0x7F:
        return marker
    unpacker = _UINT.get(marker)
    if unpacker is None or len(payload) < 2 + unpacker.size:
        return default
    return unpacker.unpack_from(payload, 2)[0]


_UINT_OR_INT = {**_UINT, 0xCF: struct.Struct(">Q"), 0xD0: struct.Struct(">b"), 0xD1: struct.Struct(">h"),
                0xD2: struct.Struct(">i"), 0xD3: struct.Struct(">q")}


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
    if len(payload) < 3 or payload[0] != _ARRAY_OF_4:
        return None
    count = _peek_int(payload, 1)
    if count is None:
        return None
    publish_time = _peek_int(payload, count[1])
    return None if publish_time is None else publish_time[0]


def describe_batch(payload: Any) -> str:
    return f"<batch of {peek_num_messages(payload)} messages, {len(payload)} bytes>"
