"""The journal's on-disk format: segment header, records, and the scan that replays them.

A journal segment file (``{segment_id:016x}.txn``) is::

    segment header   MAGIC "MPJL" | version u16 | flags u16 | segment_id u64            (16 bytes)
    group*           GROUP record, then the group's records
    END record       only in a segment that was rolled over (version 3)
    the rest         zeros (preallocated, not yet written), or, in a reused file, whatever
                     its previous use left there

    record           crc u32 | payload_length u32 | type u8 | ledger_id i64 | entry_id i64 | lac i64 | payload

Versions: 3 (written since) writes the records of each group commit after a GROUP record
(``ledger_id`` = the segment id, ``entry_id`` = the bytes of the group's records, ``lac`` =
CRC32C of their headers, which hold their own payload checksums), and ends a segment that
rolled over with an END record. That is what lets a segment file be reused
(``journalReuseFiles``): stale records of its previous use never follow a GROUP of this
segment's id whose checksum matches, so a replay stops where this use's data ends — and a
group torn by a crash is dropped whole (it was never acknowledged). Version 2 has records
without groups, checksummed with CRC32C; version 1 with zlib's CRC32. All three are read — a
segment's header says which — and a segment is only ever appended to with its own version.
Flag ``REUSED`` (1) says the file had a previous use: its data does not end in zeros.

Invariants:
- a record's crc covers every byte after the crc field (header rest + payload), so a torn
  record, a flipped bit and the zero-filled tail all fail the check;
- records are contiguous: the first offset that does not hold a valid record (version 3: a
  valid group) is the end of the segment's data. Nothing after it is ever read, and the
  writer truncates there before appending again (see :mod:`bookie.journal.segment`);
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
SEGMENT_VERSION = 3
"""What new segments are written with (CRC32C records in checksummed groups)."""
GROUPED_VERSIONS = frozenset({3})
FLAG_REUSED = 1
"""Segment header flag: the file was used before, its tail holds that use's bytes."""
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
RECORD_CRC_BY_VERSION: dict[int, Crc] = {1: zlib.crc32, 2: crc32c, 3: crc32c}
record_crc: Crc = RECORD_CRC_BY_VERSION[SEGMENT_VERSION]

PAYLOAD_BYTES_MAX = 64 * 1024 * 1024
"""Far above any frame (5 MiB + 64 KiB): a larger length is garbage, not a record."""

INT64_MAX = (1 << 63) - 1


class RecordType(enum.IntEnum):
    """What a record means. 0 is never used: it is what the zero-filled tail reads as."""

    ADD_ENTRY = 1
    FENCE = 2
    """The ledger was fenced: later non-recovery adds are refused, across restarts."""
    GROUP = 3
    """Version 3: starts a group commit's records (see the module docstring); never replayed."""
    END = 4
    """Version 3: the segment rolled over here; never replayed."""
    LEDGER_KEY = 5
    """The ledger's master key (the payload), journaled with its first add or fence, before
    it (BookKeeper's ``METAENTRY_ID_LEDGER_KEY`` entry): the key outlives a restart."""


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
    STALE = "stale"
    """A reused segment's data ends here: what follows is its previous use's bytes (not a
    group of this segment). As clean an end as :attr:`CLEAN`."""

    @property
    def clean(self) -> bool:
        return self is ScanEnd.CLEAN or self is ScanEnd.STALE


def segment_file_name(segment_id: int) -> str:
    return f"{segment_id:016x}.txn"


def parse_segment_file_name(name: str) -> int | None:
    """The segment id of a journal file name, None for any other file."""
    stem, _dot, ext = name.partition(".")
    if ext != "txn" or len(stem) != 16:
        return None
    try:
        return int(stem, 16)
    except ValueError:
        return None


def encode_segment_header(segment_id: int, version: int = SEGMENT_VERSION, flags: int = 0) -> bytes:
    return SEGMENT_HEADER.pack(SEGMENT_MAGIC, version, flags, segment_id)


class SegmentHeader(NamedTuple):
    segment_id: int
    version: int
    flags: int = 0

    @property
    def reused(self) -> bool:
        return bool(self.flags & FLAG_REUSED)


def read_segment_header(data: bytes) -> SegmentHeader | None:
    """The header of a segment we can read (any version in :data:`RECORD_CRC_BY_VERSION`),
    None when it is missing, foreign or of an unknown version."""
    if len(data) < SEGMENT_HEADER_SIZE:
        return None
    magic, version, flags, segment_id = SEGMENT_HEADER.unpack_from(data)
    if magic != SEGMENT_MAGIC or version not in RECORD_CRC_BY_VERSION:
        return None
    return SegmentHeader(segment_id, version, flags if version in GROUPED_VERSIONS else 0)


def encode_header(kind: int, ledger_id: int, entry_id: int, lac: int, payload: bytes) -> bytes:
    """The record header (with its checksum) to write before ``payload``, current version.

    The hot path: called on the event loop once per add at admission, so that the journal
    thread only writes and syncs."""
    rest = _pack_rest(len(payload), kind, ledger_id, entry_id, lac)
    return _pack_crc(crc32c(payload, crc32c(rest))) + rest


_LEDGER_ID, _ENTRY_ID = operator.attrgetter("ledger_id"), operator.attrgetter("entry_id")
_LAC, _PAYLOAD = operator.attrgetter("lac"), operator.attrgetter("payload")


def encode_headers(kind: int, requests: Sequence[Any]) -> tuple[list[bytes], list[bytes], list[int]]:
    """:func:`encode_header` for many records of one type at once (anything with
    ``ledger_id``, ``entry_id``, ``lac`` and ``payload``): ``(headers, payloads, record sizes)``.

    Same bytes, iterated in C (``map``) instead of one Python call per record: the event
    loop encodes every add a bookie receives, holding the GIL."""
    # One list per field, not a tuple per request: no container objects for the cyclic GC.
    payloads = list(map(_PAYLOAD, requests))
    ledger_ids, entry_ids, lacs = map(_LEDGER_ID, requests), map(_ENTRY_ID, requests), map(_LAC, requests)
    lengths = list(map(len, payloads))
    rests = list(map(_pack_rest, lengths, itertools.repeat(kind), ledger_ids, entry_ids, lacs))
    crcs = map(crc32c, payloads, map(crc32c, rests))
    headers = list(map(bytes.__add__, map(_pack_crc, crcs), rests))
    return headers, payloads, list(map(RECORD_HEADER_SIZE.__add__, lengths))


def encode_group_header(segment_id: int, record_headers: list[bytes], group_bytes: int) -> bytes:
    """The GROUP record before a group of ``group_bytes`` of records whose headers are
    ``record_headers`` (version 3): one per group commit, built on the journal's thread."""
    return encode_header(RecordType.GROUP, segment_id, group_bytes, crc32c(b"".join(record_headers)), b"")


def encode_end(segment_id: int) -> bytes:
    """The END record of a segment that rolls over (version 3)."""
    return encode_header(RecordType.END, segment_id, -1, -1, b"")


def encode_record(record: JournalRecord, payload: bytes = b"") -> tuple[bytes, bytes]:
    """``(header, payload)`` of one record; write both, header first."""
    return encode_header(record.type, record.ledger_id, record.entry_id, record.lac, payload), payload


class ScannedRecord(NamedTuple):
    record: JournalRecord
    payload_offset: int
    """Offset of the payload in the segment file."""
    payload: bytes


class GroupCut(NamedTuple):
    """Yielded by a grouped scan just before its :class:`ScanEnd` when the data ends inside a
    group (cut short by a crash, or damaged) whose first records were yielded: the valid data
    ends at the group's start, ``offset``. An append must resume there, not after those
    records: a new group written after them would sit inside the range the cut group's header
    announces, and a later replay through it would stop there as corrupt."""

    offset: int


def scan_records(
    stream: BinaryIO, start_offset: int, crc: Crc = record_crc, segment_id: int | None = None, reused: bool = False
) -> Iterator[ScannedRecord | GroupCut | ScanEnd]:
    """Yield every valid record of ``stream`` from ``start_offset``, then one :class:`ScanEnd`.

    ``stream`` must be positioned at ``start_offset``; ``crc`` is the checksum of the
    segment's version (:data:`RECORD_CRC_BY_VERSION`). ``segment_id``: the segment's id when
    its version writes groups (:data:`GROUPED_VERSIONS`); ``start_offset`` is then a group
    boundary. A group cut short (a crash mid-write) yields the records before the cut that
    check out, as a segment without groups does — except in a ``reused`` file, where a record
    that checks out may be one of the previous use's at the same offset: there a group's
    records are yielded only once the whole group checked out (none of them was acknowledged
    before it was whole). The offset of the end of the valid data is the last record's
    ``payload_offset + len(payload)`` (or ``start_offset`` if none) — or, in a grouped segment
    whose data ends inside a group after some of its records were yielded, the :class:`GroupCut`
    yielded just before the :class:`ScanEnd`.
    """
    if segment_id is None:
        yield from _scan_plain(stream, start_offset, crc)
    else:
        yield from _scan_groups(stream, start_offset, segment_id, reused)


def _read_record(stream: BinaryIO, checksum: Crc) -> tuple[tuple, bytes, bytes] | ScanEnd:
    """``(header fields, header bytes, payload)`` of the next record, or why there is none."""
    header = stream.read(RECORD_HEADER_SIZE)
    if len(header) < RECORD_HEADER_SIZE:
        return ScanEnd.TORN if header.strip(b"\0") else ScanEnd.CLEAN
    fields = RECORD_HEADER.unpack(header)
    expected, length, kind = fields[0], fields[1], fields[2]
    if kind == 0 and expected == 0 and length == 0:
        return ScanEnd.CLEAN if not header.strip(b"\0") else ScanEnd.CORRUPT
    if kind not in _RECORD_TYPES or length > PAYLOAD_BYTES_MAX:
        return ScanEnd.CORRUPT
    payload = stream.read(length)
    if len(payload) < length:
        return ScanEnd.TORN
    if checksum(payload, checksum(header[_CRC_SIZE:], 0)) != expected:
        return ScanEnd.CORRUPT
    return fields, header, payload


def _scan_plain(stream: BinaryIO, offset: int, checksum: Crc) -> Iterator[ScannedRecord | ScanEnd]:
    while True:
        item = _read_record(stream, checksum)
        if isinstance(item, ScanEnd):
            yield item
            return
        (_, length, kind, ledger_id, entry_id, lac), _, payload = item
        if kind in _GROUPING_TYPES:
            yield ScanEnd.CORRUPT  # never in a segment without groups
            return
        yield ScannedRecord(
            JournalRecord(RecordType(kind), ledger_id, entry_id, lac), offset + RECORD_HEADER_SIZE, payload
        )
        offset += RECORD_HEADER_SIZE + length


def _scan_groups(
    stream: BinaryIO, offset: int, segment_id: int, reused: bool
) -> Iterator[ScannedRecord | GroupCut | ScanEnd]:
    while True:
        item = _read_record(stream, crc32c)
        if isinstance(item, ScanEnd):
            yield ScanEnd.STALE if reused and item is not ScanEnd.CLEAN else item
            return
        (_, _, kind, ledger_id, group_bytes, group_crc), _, _ = item
        if ledger_id != segment_id or kind not in _GROUPING_TYPES:
            yield ScanEnd.STALE if reused else ScanEnd.CORRUPT  # the previous use's bytes, or damage
            return
        if kind == RecordType.END:
            yield ScanEnd.CLEAN
            return
        group_offset = offset
        offset += RECORD_HEADER_SIZE
        records: list[ScannedRecord] = []
        headers: list[bytes] = []
        left = group_bytes
        while left > 0:
            item = _read_record(stream, crc32c)
            if isinstance(item, ScanEnd):  # cut short inside a group: a crash mid-write, or damage
                if not reused:
                    yield from _cut(records, group_offset)
                yield ScanEnd.TORN if item is not ScanEnd.CORRUPT or reused else ScanEnd.CORRUPT
                return
            (_, length, kind, ledger_id, entry_id, lac), header, payload = item
            left -= RECORD_HEADER_SIZE + length
            if kind in _GROUPING_TYPES or left < 0:
                if not reused:
                    yield from _cut(records, group_offset)
                yield ScanEnd.TORN if reused else ScanEnd.CORRUPT
                return
            records.append(
                ScannedRecord(
                    JournalRecord(RecordType(kind), ledger_id, entry_id, lac), offset + RECORD_HEADER_SIZE, payload
                )
            )
            headers.append(header)
            offset += RECORD_HEADER_SIZE + length
        if crc32c(b"".join(headers)) != group_crc:
            if not reused:  # every record checks out, the group record does not: damage
                yield from _cut(records, group_offset)
                yield ScanEnd.CORRUPT
            else:  # records of the previous use inside the group's range: cut short
                yield ScanEnd.TORN
            return
        yield from records


def _cut(records: list[ScannedRecord], group_offset: int) -> Iterator[ScannedRecord | GroupCut]:
    """The records of a group that ends cut short (replayed: none was acknowledged unless the
    group was whole once, and then they are all that is left of it), then where the valid data
    ends: the group's start."""
    yield from records
    if records:
        yield GroupCut(group_offset)


_RECORD_TYPES = frozenset(int(t) for t in RecordType)
_GROUPING_TYPES = frozenset({int(RecordType.GROUP), int(RecordType.END)})
