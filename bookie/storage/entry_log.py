"""The entry-log file format: where flushed entries live (BookKeeper's ``<hex logId>.log``).

An entry log ``{log_id:x}.log`` in a ledger dir's ``current/`` is append-only::

    header   MAGIC "MPEL" | version u16 | reserved u16 | log_id u64                      (16 bytes)
    record*  payload_length u32 | crc32 u32 | ledger_id i64 | entry_id i64 | payload    (24 + n bytes)

Invariants:
- ``crc32`` covers ``payload_length``, ``ledger_id``, ``entry_id`` and the payload, so a torn
  or foreign record never passes as an entry;
- an entry's *location* is ``(log_id << 32) | offset`` with ``offset`` the record's first byte
  (BookKeeper's encoding), so offsets stay below 4 GiB (``logSizeLimit`` is capped) and 0 is
  never a location (the header is there);
- records are written in (ledger, entry) order within one flush, so the records following an
  entry are, while the ledger stays the same, that ledger's next entries: read-ahead reads
  them without asking the index.

Pure: bytes in, records out; :mod:`bookie.storage.entry_logger` does the file I/O.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

LOG_MAGIC = b"MPEL"
LOG_VERSION = 1
LOG_HEADER = struct.Struct(">4sHHQ")
LOG_HEADER_SIZE = LOG_HEADER.size

RECORD_HEADER = struct.Struct(">IIqq")
RECORD_HEADER_SIZE = RECORD_HEADER.size
_LENGTH_IDS = struct.Struct(">Iqq")

PAYLOAD_BYTES_MAX = 64 * 1024 * 1024
"""Far above any frame: a larger length is garbage, not a record."""


def log_file_name(log_id: int) -> str:
    return f"{log_id:x}.log"


def parse_log_file_name(name: str) -> int | None:
    stem, dot, ext = name.partition(".")
    if ext != "log" or not stem:
        return None
    try:
        return int(stem, 16)
    except ValueError:
        return None


def encode_log_header(log_id: int) -> bytes:
    return LOG_HEADER.pack(LOG_MAGIC, LOG_VERSION, 0, log_id)


def decode_log_header(data: bytes) -> int | None:
    """The log id in a header, None when the header is missing or foreign."""
    if len(data) < LOG_HEADER_SIZE:
        return None
    magic, version, _, log_id = LOG_HEADER.unpack_from(data)
    return log_id if magic == LOG_MAGIC and version == LOG_VERSION else None


def make_location(log_id: int, offset: int) -> int:
    assert 0 < offset < (1 << 32), offset
    return (log_id << 32) | offset


def split_location(location: int) -> tuple[int, int]:
    """``(log_id, offset)``."""
    return location >> 32, location & 0xFFFF_FFFF


def _crc(length: int, ledger_id: int, entry_id: int, payload: bytes | memoryview) -> int:
    return zlib.crc32(payload, zlib.crc32(_LENGTH_IDS.pack(length, ledger_id, entry_id)))


def encode_record_header(ledger_id: int, entry_id: int, payload: bytes) -> bytes:
    """The 24 bytes to write before ``payload``."""
    length = len(payload)
    return RECORD_HEADER.pack(length, _crc(length, ledger_id, entry_id, payload), ledger_id, entry_id)


class RecordHeader(NamedTuple):
    length: int
    crc: int
    ledger_id: int
    entry_id: int


def decode_record_header(data: bytes | memoryview, offset: int = 0) -> RecordHeader | None:
    """The header at ``offset``, None when it cannot be one (short, zero length field beyond
    bounds). A header that decodes may still be garbage: check :func:`record_ok`."""
    if len(data) - offset < RECORD_HEADER_SIZE:
        return None
    header = RecordHeader(*RECORD_HEADER.unpack_from(data, offset))
    if header.length > PAYLOAD_BYTES_MAX or header.ledger_id < 0:
        return None
    return header


def record_ok(header: RecordHeader, payload: bytes | memoryview) -> bool:
    return len(payload) == header.length and \
        _crc(header.length, header.ledger_id, header.entry_id, payload) == header.crc
