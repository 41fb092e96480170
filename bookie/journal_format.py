"""The journal's on-disk format: segment header, records, and the scan that replays them.

A journal segment file (``{segment_id:016x}.txn``) is::

    segment header   MAGIC "MPJL" | version u16 | reserved u16 | segment_id u64      (16 bytes)
    record*          crc u32 | payload_length u32 | type u8 | ledger_id i64 | entry_id i64 | lac i64 | payload
    zeros            the preallocated, not yet written tail

Versions: 2 (written since) checksums records with CRC32C (Castagnoli, as BookKeeper does;
hardware-accelerated by the ``crc32c`` package: ~2.5 µs per 64 KiB where zlib's CRC32 takes
~12 µs); 1 used zlib's CRC32. Both are read — a segment's header says which — and a segment
is only ever appended to with its own version's checksum (a version-1 segment left by an
older bookie is not reopened for appending: the journal starts a new segment after it).

Invariants:
- the crc covers every byte of the record after the crc field (header rest + payload), so a
  torn record, a flipped bit and the zero-filled tail all fail the check;
- records are contiguous: the first offset that does not hold a valid record is the end of
  the segment's data. Nothing after it is ever read, and the writer truncates there before
  appending again (see :mod:`bookie.journal_segment`), so stale bytes can never be mistaken
  for records by a later replay;
- ``payload_length`` of a valid record is at most :data:`PAYLOAD_BYTES_MAX`; larger values
  are garbage and end the scan without reading further.

This module is pure: it turns bytes into records and back, and never opens a file itself.
"""

from __future__ import annotations

import enum
import itertools
import operator
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO, NamedTuple

from crc32c import crc32c

SEGMENT_MAGIC = b"MPJL"
SEGMENT_VERSION = 2
"""What new segments are written with (CRC32C records)."""
SEGMENT_HEADER = struct.Struct(">4sHHQ")
SEGMENT_HEADER_SIZE = SEGMENT_HEADER.size

RECORD_HEADER = struct.Struct(">IIBqqq")
RECORD_HEADER_SIZE = RECORD_HEADER.size
_CRC_SIZE = 4
_HEADER_REST = struct.Struct(">IBqqq")
"""The header after the crc field: payload_length, type, ledger_id, entry_id, lac."""
_pack_rest = _HEADER_REST.pack
_pack_crc = struct.Struct(">I").pack

Crc = Callable[[bytes | memoryview, int], int]
"""``crc(data, running_value) -> value``: a record checksum, chained over the header rest, then the payload."""
RECORD_CRC_BY_VERSION: dict[int, Crc] = {1: zlib.crc32, 2: crc32c}
record_crc: Crc = RECORD_CRC_BY_VERSION[SEGMENT_VERSION]

PAYLOAD_BYTES_MAX = 64 * 1024 * 1024
"""Far above any frame (5 MiB + 64 KiB): a larger length is garbage, not a record."""

INT64_MAX = (1 << 63) - 1


class RecordType(enum.IntEnum):
    """What a record means. 0 is never used: it is what the zero-filled tail reads as."""

    ADD_ENTRY = 1
    FENCE = 2
    """The ledger was fenced: later non-recovery adds are refused, across restarts."""


class JournalRecord(NamedTuple):
    type: RecordType
    ledger_id: int
    entry_id: int
    """-1 for records that are not about one entry (FENCE)."""
    lac: int
    """The writer's last-add-confirmed piggybacked on the add (-1: none)."""


class EntryLocation(NamedTuple):
    """Where a record's payload sits: journal, segment, byte offset of the payload, length."""

    journal_index: int
    segment_id: int
    offset: int
    length: int


class LogMark(NamedTuple):
    """A position in one journal: every byte before ``offset`` of segment ``segment_id``, and
    every earlier segment. Marks order as tuples (BookKeeper: ``LogMark(logFileId, logFileOffset)``)."""

    segment_id: int
    offset: int

    def __str__(self) -> str:
        return f"{self.segment_id:x}:{self.offset}"


class ScanEnd(enum.Enum):
    """Why a segment scan stopped; only the last two mean lost bytes."""

    CLEAN = "clean"
    """End of file, or the zero-filled preallocated tail."""
    TORN = "torn"
    """A record cut short by the end of the file (a crash mid-write)."""
    CORRUPT = "corrupt"
    """A record whose CRC, type or length is wrong."""


def segment_file_name(segment_id: int) -> str:
    return f"{segment_id:016x}.txn"


def parse_segment_file_name(name: str) -> int | None:
    """The segment id of a journal file name, None for any other file."""
    stem, dot, ext = name.partition(".")
    if ext != "txn" or len(stem) != 16:
        return None
    try:
        return int(stem, 16)
    except ValueError:
        return None


def encode_segment_header(segment_id: int, version: int = SEGMENT_VERSION) -> bytes:
    return SEGMENT_HEADER.pack(SEGMENT_MAGIC, version, 0, segment_id)


class SegmentHeader(NamedTuple):
    segment_id: int
    version: int


def read_segment_header(data: bytes) -> SegmentHeader | None:
    """The header of a segment we can read (any version in :data:`RECORD_CRC_BY_VERSION`),
    None when it is missing, foreign or of an unknown version."""
    if len(data) < SEGMENT_HEADER_SIZE:
        return None
    magic, version, _, segment_id = SEGMENT_HEADER.unpack_from(data)
    if magic != SEGMENT_MAGIC or version not in RECORD_CRC_BY_VERSION:
        return None
    return SegmentHeader(segment_id, version)


def decode_segment_header(data: bytes) -> int | None:
    """The segment id in a readable segment header, None when the header is missing or foreign."""
    header = read_segment_header(data)
    return None if header is None else header.segment_id


def encode_header(kind: int, ledger_id: int, entry_id: int, lac: int, payload: bytes) -> bytes:
    """The record header (with its checksum) to write before ``payload``, current version.

    The hot path: called on the event loop once per add at admission, so that the journal
    thread only writes and syncs."""
    rest = _pack_rest(len(payload), kind, ledger_id, entry_id, lac)
    return _pack_crc(crc32c(payload, crc32c(rest))) + rest


_LEDGER_ID, _ENTRY_ID = operator.attrgetter("ledger_id"), operator.attrgetter("entry_id")
_LAC, _PAYLOAD = operator.attrgetter("lac"), operator.attrgetter("payload")


def encode_add_headers(requests: Sequence[Any]) -> tuple[list[bytes], list[bytes], list[int]]:
    """:func:`encode_header` for many ADD records at once (anything with ``ledger_id``,
    ``entry_id``, ``lac`` and ``payload``): ``(headers, payloads, record sizes)``.

    Same bytes, iterated in C (``map``) instead of one Python call per record: the event
    loop encodes every add a bookie receives, holding the GIL."""
    # One list per field, not a tuple per request: no container objects for the cyclic GC.
    payloads = list(map(_PAYLOAD, requests))
    ledger_ids, entry_ids, lacs = map(_LEDGER_ID, requests), map(_ENTRY_ID, requests), map(_LAC, requests)
    lengths = list(map(len, payloads))
    rests = list(map(_pack_rest, lengths, itertools.repeat(int(RecordType.ADD_ENTRY)), ledger_ids, entry_ids, lacs))
    crcs = map(crc32c, payloads, map(crc32c, rests))
    headers = list(map(bytes.__add__, map(_pack_crc, crcs), rests))
    return headers, payloads, list(map(RECORD_HEADER_SIZE.__add__, lengths))


def encode_record(record: JournalRecord, payload: bytes = b"") -> tuple[bytes, bytes]:
    """``(header, payload)`` of one record; write both, header first."""
    return encode_header(record.type, record.ledger_id, record.entry_id, record.lac, payload), payload


def record_size(payload_length: int) -> int:
    return RECORD_HEADER_SIZE + payload_length


class ScannedRecord(NamedTuple):
    record: JournalRecord
    payload_offset: int
    """Offset of the payload in the segment file."""
    payload: bytes


def scan_records(stream: BinaryIO, start_offset: int, crc: Crc = record_crc) -> Iterator[ScannedRecord | ScanEnd]:
    """Yield every valid record of ``stream`` from ``start_offset``, then one :class:`ScanEnd`.

    ``stream`` must be positioned at ``start_offset``; ``crc`` is the checksum of the
    segment's version (:data:`RECORD_CRC_BY_VERSION`). The offset of the end of the valid data
    is the last record's ``payload_offset + len(payload)`` (or ``start_offset`` if none).
    """
    offset, checksum = start_offset, crc
    while True:
        header = stream.read(RECORD_HEADER_SIZE)
        if len(header) < RECORD_HEADER_SIZE:
            yield ScanEnd.TORN if header.strip(b"\0") else ScanEnd.CLEAN
            return
        expected, length, kind, ledger_id, entry_id, lac = RECORD_HEADER.unpack(header)
        if kind == 0 and expected == 0 and length == 0:
            yield ScanEnd.CLEAN if not header.strip(b"\0") else ScanEnd.CORRUPT
            return
        if kind not in _RECORD_TYPES or length > PAYLOAD_BYTES_MAX:
            yield ScanEnd.CORRUPT
            return
        payload = stream.read(length)
        if len(payload) < length:
            yield ScanEnd.TORN
            return
        if checksum(payload, checksum(header[_CRC_SIZE:], 0)) != expected:
            yield ScanEnd.CORRUPT
            return
        yield ScannedRecord(JournalRecord(RecordType(kind), ledger_id, entry_id, lac),
                            offset + RECORD_HEADER_SIZE, payload)
        offset += RECORD_HEADER_SIZE + length


_RECORD_TYPES = frozenset(int(t) for t in RecordType)
