"""The journal record format: round trip, and a scan that stops cleanly at any damage."""

from __future__ import annotations

import io
import random

import pytest

from minipulsar.bookie.journal.format import (
    RECORD_HEADER_SIZE,
    SEGMENT_VERSION,
    JournalRecord,
    RecordType,
    ScanEnd,
    ScannedRecord,
    encode_record,
    encode_segment_header,
    parse_segment_file_name,
    read_segment_header,
    scan_records,
    segment_file_name,
)


def _records(n: int, seed: int = 7) -> list[tuple[JournalRecord, bytes]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i % 5 == 4:
            out.append((JournalRecord(RecordType.FENCE, i, -1, -1), b""))
        else:
            out.append((JournalRecord(RecordType.ADD_ENTRY, i % 3, i, i - 1), rng.randbytes(rng.randint(0, 300))))
    return out


def _encode(records) -> bytes:
    return b"".join(h + p for h, p in (encode_record(r, p) for r, p in records))


def _scan(data: bytes) -> tuple[list[ScannedRecord], ScanEnd]:
    items = list(scan_records(io.BytesIO(data), 0))
    assert isinstance(items[-1], ScanEnd)
    return items[:-1], items[-1]


def test_records_round_trip_with_payload_offsets() -> None:
    records = _records(20)
    data = _encode(records)
    scanned, end = _scan(data)
    assert end is ScanEnd.CLEAN
    assert [(s.record, s.payload) for s in scanned] == records
    for item in scanned:
        assert data[item.payload_offset : item.payload_offset + len(item.payload)] == item.payload


def test_zero_filled_tail_is_a_clean_end() -> None:
    records = _records(5)
    scanned, end = _scan(_encode(records) + bytes(4096))
    assert end is ScanEnd.CLEAN and len(scanned) == 5


@pytest.mark.parametrize("cut_seed", range(5))
def test_a_record_cut_anywhere_ends_the_scan_after_the_previous_one(cut_seed: int) -> None:
    records = _records(6)
    data = _encode(records)
    last_start = len(_encode(records[:-1]))
    rng = random.Random(cut_seed)
    for cut in sorted({last_start + 1, len(data) - 1, *(rng.randrange(last_start + 1, len(data)) for _ in range(5))}):
        scanned, end = _scan(data[:cut])
        assert [(s.record, s.payload) for s in scanned] == records[:-1], cut
        assert end in (ScanEnd.TORN, ScanEnd.CLEAN), cut
        # cut inside the header with only zeros read is indistinguishable from the zero tail
        scanned, end = _scan(data[:cut] + bytes(64))
        assert [(s.record, s.payload) for s in scanned] == records[:-1], cut


def test_a_flipped_bit_is_a_corrupt_end() -> None:
    records = _records(6)
    data = bytearray(_encode(records))
    third = len(_encode(records[:2]))
    data[third + RECORD_HEADER_SIZE - 3] ^= 0x10  # inside record 3's header (its lac)
    scanned, end = _scan(bytes(data))
    assert end is ScanEnd.CORRUPT
    assert [(s.record, s.payload) for s in scanned] == records[:2]


def test_garbage_never_yields_a_record() -> None:
    rng = random.Random(1)
    for _ in range(200):
        scanned, _ = _scan(rng.randbytes(rng.randint(0, 400)))
        assert scanned == []


def test_segment_names_and_header() -> None:
    assert parse_segment_file_name(segment_file_name(0x2A)) == 0x2A
    assert parse_segment_file_name("0000000000000001.tmp") is None
    assert parse_segment_file_name("VERSION") is None
    assert read_segment_header(encode_segment_header(9)) == (9, SEGMENT_VERSION, 0)
    assert read_segment_header(bytes(16)) is None
