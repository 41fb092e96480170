"""Pulsar's batch payload: the messages of one entry, each with its own metadata. Sans-IO.

An entry whose ``MessageMetadata`` has ``num_messages_in_batch`` is a batch. Its payload, once
decompressed (``compression``, ``uncompressed_size``), is that many messages back to back::

    [size u32][SingleMessageMetadata][payload of payload_size bytes]   (big-endian size)

The entry-level metadata holds what the batch shares (producer, publish time, the first
sequence id, the codec); each ``SingleMessageMetadata`` what is each message's own (key,
ordering key, properties, event time, sequence id, null value). A message sent alone has no
``num_messages_in_batch`` and its own fields are in the entry's metadata: :func:`split_batch`
returns it in the same shape, so readers see one kind of message either way.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from minipulsar.binary_protocol import compression
from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.errors import MalformedCommandError

_U32 = struct.Struct(">I")
_unpack_u32 = _U32.unpack_from
_parse_single = api.SingleMessageMetadata.FromString

MESSAGE_FIELDS = (
    "partition_key",
    "partition_key_b64_encoded",
    "null_partition_key",
    "ordering_key",
    "event_time",
    "sequence_id",
    "null_value",
)
"""Fields a lone message carries in its ``MessageMetadata`` that a batched one carries in its
``SingleMessageMetadata`` (same names in both), besides ``properties``."""


@dataclass(slots=True, frozen=True)
class SingleMessage:
    """One message of a batch: its own metadata and its payload (empty for a null value)."""

    metadata: api.SingleMessageMetadata
    payload: bytes


def split_batch(metadata: api.MessageMetadata, payload: bytes) -> list[SingleMessage]:
    """The messages of an entry's payload (decompressed first when the metadata says so).

    Raises:
        MalformedCommandError: corrupt compression, a size that overruns the payload, a
            metadata that does not parse, or bytes left after the announced messages.
    """
    return [SingleMessage(single, data) for single, data in iter_messages(metadata, payload)]


def iter_messages(metadata: api.MessageMetadata, payload: bytes) -> Iterator[tuple[api.SingleMessageMetadata, bytes]]:
    """:func:`split_batch` as ``(metadata, payload)`` pairs, without an object per message
    (the conversion's path). Raises as it does, when the iteration reaches the fault."""
    if metadata.compression != api.NONE:
        payload = compression.decompress(metadata.compression, payload, metadata.uncompressed_size)
    if not metadata.HasField("num_messages_in_batch"):
        yield _lone_message_metadata(metadata, len(payload)), payload
        return
    count = metadata.num_messages_in_batch
    if count < 0:
        raise MalformedCommandError(f"batch of {count} messages")
    offset, size = 0, len(payload)
    for _ in range(count):
        single, start, offset = _read_message(payload, offset, size)
        yield single, payload[start:offset]
    if offset != size:
        raise MalformedCommandError(f"batch of {count} messages leaves {size - offset} bytes over")


def build_batch(messages: Sequence[SingleMessage]) -> bytes:
    """The uncompressed batch payload of ``messages``; each ``payload_size`` is set to its
    payload's length (on a copy: the callers' metadata is left as it was)."""
    parts: list[bytes] = []
    for message in messages:
        single = message.metadata
        if not single.HasField("payload_size") or single.payload_size != len(message.payload):
            single = _with_payload_size(single, len(message.payload))
        serialized = single.SerializeToString()
        parts += (_U32.pack(len(serialized)), serialized, message.payload)
    return b"".join(parts)


def _read_message(payload: bytes, offset: int, size: int) -> tuple[api.SingleMessageMetadata, int, int]:
    """The metadata of the message at ``offset``, and where its payload starts and ends."""
    if offset + _U32.size > size:
        raise MalformedCommandError(f"batch ends inside a message's size at byte {offset}")
    (metadata_size,) = _unpack_u32(payload, offset)
    start = offset + _U32.size
    end = start + metadata_size
    if end > size:
        raise MalformedCommandError(f"SingleMessageMetadata of {metadata_size} bytes overruns the batch at {offset}")
    try:
        single = _parse_single(payload[start:end])
    except DecodeError as exc:
        raise MalformedCommandError(f"SingleMessageMetadata does not parse: {exc}") from exc
    # Checked by hand, not IsInitialized() (~1 µs a message): payload_size is the field the
    # layout needs; a property missing its key or value reads as an empty string.
    if not single.HasField("payload_size"):
        raise MalformedCommandError("SingleMessageMetadata without payload_size")
    payload_size = single.payload_size
    payload_end = end + payload_size
    if payload_size < 0 or payload_end > size:
        raise MalformedCommandError(f"message payload of {payload_size} bytes overruns the batch")
    return single, end, payload_end


def _lone_message_metadata(metadata: api.MessageMetadata, payload_size: int) -> api.SingleMessageMetadata:
    single = api.SingleMessageMetadata(payload_size=payload_size)
    single.properties.extend(metadata.properties)
    for name in MESSAGE_FIELDS:
        if metadata.HasField(name):
            setattr(single, name, getattr(metadata, name))
    return single


def _with_payload_size(single: api.SingleMessageMetadata, payload_size: int) -> api.SingleMessageMetadata:
    copy = api.SingleMessageMetadata()
    copy.CopyFrom(single)
    copy.payload_size = payload_size
    return copy
