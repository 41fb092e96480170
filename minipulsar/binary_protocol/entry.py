"""A stored entry in Pulsar's format: the headers and payload of the SEND that wrote it.

The broker stores each entry in the format of the protocol that produced it (a msgpack batch
from minipulsar's producers, :mod:`minipulsar.protocol.batch`; these bytes from Pulsar's),
so it must tell the two apart from the bytes alone — :func:`is_pulsar_entry` — and read
either. The layout, all integers big-endian::

    [0x0e02 u16][size u32][BrokerEntryMetadata]      optional: written by a broker, never here
    [0x0e01 u16][crc32c u32]                         optional: the producer's checksum
    [metadataSize u32][MessageMetadata][payload]     the crc32c covers these, to the end

A minipulsar batch starts with ``0x94`` or ``0x95`` (a msgpack fixarray of 4 or 5) and a
Pulsar entry with ``0x0e`` or with ``metadataSize``'s high byte, ``0x00`` (metadata is far
below 16 MiB), so the first byte decides.

A checksum that does not match is reported (:attr:`PulsarEntry.checksum_ok` False), not
raised: the broker answers such a SEND with ``SendError(ChecksumError)`` and the producer
drops the one corrupt message, as with Pulsar. Anything else unreadable raises
:class:`~minipulsar.errors.MalformedCommandError`.
"""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass

import crc32c
from google.protobuf.message import DecodeError

from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.binary_protocol.frames import MAGIC_BROKER_ENTRY_METADATA, MAGIC_CRC32C
from minipulsar.errors import MalformedCommandError

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_MAGIC_SIZE = _U16.size
_CHECKSUM_SIZE = _MAGIC_SIZE + _U32.size


@dataclass(slots=True, frozen=True)
class PulsarEntry:
    """A parsed entry: its metadata, its (still compressed, still batched) payload."""

    metadata: api.MessageMetadata
    payload: bytes
    """As stored: compressed with ``metadata.compression``, a batch when
    ``metadata.num_messages_in_batch`` is set (:func:`minipulsar.binary_protocol.batch.split_batch`)."""
    checksum_ok: bool | None
    """Whether the stored crc32c matches; ``None`` when the entry carries no checksum."""


def is_pulsar_entry(data: bytes | memoryview) -> bool:
    """Whether ``data`` is a Pulsar-format entry (else: a minipulsar batch, or garbage)."""
    if len(data) < _MAGIC_SIZE:
        return False
    first = data[0]
    if first == 0x0E:
        return data[1] in (0x01, 0x02)
    return first == 0x00


def parse_entry(data: bytes | memoryview) -> PulsarEntry:
    """The entry's metadata and payload, its checksum verified when it has one.

    Raises:
        MalformedCommandError: a size out of range, or metadata that does not parse.
    """
    offset = _skip_broker_entry_metadata(data)
    checksum_ok: bool | None = None
    if _has_checksum(data, offset):
        checksum_ok = _checksum_matches(data, offset)
        offset += _CHECKSUM_SIZE
    metadata, payload_start = _parse_metadata_at(data, offset)
    return PulsarEntry(metadata, bytes(data[payload_start:]), checksum_ok)


def parse_metadata(data: bytes | memoryview) -> api.MessageMetadata:
    """Only the metadata, checksum unchecked and payload uncopied: the dispatch path's look
    at an entry it already verified when it was written (its count, its key).

    Raises:
        MalformedCommandError: as :func:`parse_entry`.
    """
    offset = _skip_broker_entry_metadata(data)
    if _has_checksum(data, offset):
        offset += _CHECKSUM_SIZE
    return _parse_metadata_at(data, offset)[0]


def verify_checksum(data: bytes | memoryview) -> bool | None:
    """The SEND path's check before storing: whether the crc32c matches (``None``: there is
    none), without parsing the metadata.

    Raises:
        MalformedCommandError: too short to hold the checksum its magic announces.
    """
    offset = _skip_broker_entry_metadata(data)
    if not _has_checksum(data, offset):
        return None
    return _checksum_matches(data, offset)


def num_messages(metadata: api.MessageMetadata) -> int:
    """Messages in the entry: ``num_messages_in_batch`` for a batch, else 1 (the permits a
    dispatch of it costs)."""
    return metadata.num_messages_in_batch if metadata.HasField("num_messages_in_batch") else 1


def sticky_key(metadata: api.MessageMetadata) -> bytes | None:
    """The key Key_Shared routes the entry by, as Pulsar's ``peekStickyKey``: the ordering
    key, else the partition key (base64-decoded when flagged so), else ``None``."""
    if metadata.HasField("ordering_key"):
        return metadata.ordering_key
    if not metadata.HasField("partition_key"):
        return None
    key = metadata.partition_key
    if metadata.partition_key_b64_encoded:
        try:
            return base64.b64decode(key, validate=True)
        except (binascii.Error, ValueError):
            pass  # not base64 after all: route by the text, as Pulsar would by its bytes
    return key.encode() if isinstance(key, str) else key


def _skip_broker_entry_metadata(data: bytes | memoryview) -> int:
    """Offset after the broker entry metadata (0 when there is none)."""
    if len(data) < _MAGIC_SIZE or _U16.unpack_from(data, 0)[0] != MAGIC_BROKER_ENTRY_METADATA:
        return 0
    size = _read_u32(data, _MAGIC_SIZE, "broker entry metadata size")
    end = _MAGIC_SIZE + _U32.size + size
    if end > len(data):
        raise MalformedCommandError(f"broker entry metadata of {size} bytes overruns the {len(data)}-byte entry")
    return end


def _has_checksum(data: bytes | memoryview, offset: int) -> bool:
    if len(data) < offset + _MAGIC_SIZE or _U16.unpack_from(data, offset)[0] != MAGIC_CRC32C:
        return False
    if len(data) < offset + _CHECKSUM_SIZE:
        raise MalformedCommandError("entry ends inside its checksum")
    return True


def _checksum_matches(data: bytes | memoryview, offset: int) -> bool:
    (stored,) = _U32.unpack_from(data, offset + _MAGIC_SIZE)
    return bool(crc32c.crc32c(data[offset + _CHECKSUM_SIZE :]) == stored)


def _parse_metadata_at(data: bytes | memoryview, offset: int) -> tuple[api.MessageMetadata, int]:
    """The metadata at ``offset`` (its size prefix first) and the offset of the payload."""
    size = _read_u32(data, offset, "metadataSize")
    start = offset + _U32.size
    end = start + size
    if end > len(data):
        raise MalformedCommandError(f"metadataSize {size} overruns the {len(data)}-byte entry")
    metadata = api.MessageMetadata()
    try:
        metadata.ParseFromString(data[start:end])
    except DecodeError as exc:
        raise MalformedCommandError(f"entry metadata does not parse: {exc}") from exc
    if not metadata.IsInitialized():
        raise MalformedCommandError(f"entry metadata misses {', '.join(metadata.FindInitializationErrors())}")
    return metadata, end


def _read_u32(data: bytes | memoryview, offset: int, what: str) -> int:
    if len(data) < offset + _U32.size:
        raise MalformedCommandError(f"entry of {len(data)} bytes ends inside its {what}")
    value: int = _U32.unpack_from(data, offset)[0]
    return value
