"""Entry-log records checksummed with CRC32C (and logs of the zlib format still readable), and
the location index's multi-row inserts (thousands of rows per statement)."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

from crc32c import crc32c

from minipulsar.bookie.storage.entry_location_index import ENTRIES_KEY, EntryLocationIndex
from minipulsar.bookie.storage.entry_log import (
    RECORD_HEADER_SIZE,
    decode_record_header,
    encode_record_header,
    record_ok,
)
from minipulsar.bookie.storage.entry_logger import EntryLogReader, EntryLogWriter
from minipulsar.bookie.storage.index_db import IndexDb


def test_records_are_checksummed_with_crc32c() -> None:
    payload = os.urandom(1000)
    header = decode_record_header(encode_record_header(9, 4, payload))
    assert header is not None
    assert header.crc == crc32c(payload, crc32c(struct.pack(">Iqq", len(payload), 9, 4)))
    assert record_ok(header, payload) and not record_ok(header, payload[:-1] + b"?")


def test_records_of_the_zlib_format_still_read_back(tmp_path: Path) -> None:
    """A log written before CRC32C: its records pass with their zlib CRC32, damage still fails."""
    writer = EntryLogWriter(tmp_path, 1 << 30, 1)
    location = writer.append(3, 0, b"placeholder")
    writer.flush()
    writer.close()
    payload = b"written by an older bookie"
    crc = zlib.crc32(payload, zlib.crc32(struct.pack(">Iqq", len(payload), 3, 0)))
    old_record = struct.pack(">IIqq", len(payload), crc, 3, 0) + payload
    path = tmp_path / "1.log"
    data = path.read_bytes()
    offset = location & 0xFFFF_FFFF
    path.write_bytes(data[:offset] + old_record)
    reader = EntryLogReader(tmp_path)
    try:
        assert reader.read(location, 3, 0)[0] == payload
        header = decode_record_header(old_record)
        assert header is not None and not record_ok(header, payload.upper())
    finally:
        reader.close()


def test_a_flush_of_many_runs_and_rolls_keeps_every_location(tmp_path: Path) -> None:
    """append_entries (the flush's per-ledger loop) gives the same locations append would, across rolls."""
    entries = [(entry_id, os.urandom(700 + entry_id)) for entry_id in range(300)]
    writer = EntryLogWriter(tmp_path, 64 * 1024, 1)
    entry_ids = [entry_id for entry_id, _ in entries]
    locations = list(zip(entry_ids, writer.append_entries(5, entry_ids, [payload for _, payload in entries])))
    writer.flush()
    writer.close()
    assert len({location >> 32 for _, location in locations}) > 1, "rolled at least once"
    reader = EntryLogReader(tmp_path)
    try:
        for (entry_id, payload), (located_id, location) in zip(entries, locations):
            assert located_id == entry_id and reader.read(location, 5, entry_id)[0] == payload
    finally:
        reader.close()


def test_thousands_of_locations_insert_in_chunks_and_re_adds_update(tmp_path: Path) -> None:
    db = IndexDb(tmp_path)
    db.open()
    try:
        index = EntryLocationIndex(db)
        locations = [(entry_id, (1 << 32) + RECORD_HEADER_SIZE * entry_id) for entry_id in range(10_000)]
        with db.transaction() as cursor:
            assert index.add_ledger_locations(cursor, 8, locations) == 10_000
            IndexDb.add_meta(cursor, ENTRIES_KEY, 10_000)
        moved = [(entry_id, (2 << 32) + entry_id) for entry_id in range(9_990, 10_010)]
        with db.transaction() as cursor:
            assert index.add_ledger_locations(cursor, 8, moved) == 10, "only 10 of them are new"
        assert index.get(8, 0) == 1 << 32
        assert index.get(8, 9_995) == (2 << 32) + 9_995 and index.get(8, 10_009) == (2 << 32) + 10_009
    finally:
        db.close()
