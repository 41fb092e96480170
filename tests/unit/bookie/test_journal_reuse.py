"""journalReuseFiles and the grouped (version 3) segment format: trimmed segments are written
over, and a replay returns exactly the records of the current use — never the bytes a file
held before, and never part of a group a crash cut short in a reused file."""

from __future__ import annotations

import os
from pathlib import Path

from minipulsar.bookie.journal.directory import JournalFiles, delete_segments_before, list_segments
from minipulsar.bookie.journal.format import (
    RECORD_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
    RecordType,
    ScanEnd,
    encode_group_header,
    encode_header,
    read_segment_header,
)
from minipulsar.bookie.journal.segment import (
    RECYCLED_SUFFIX,
    SegmentWriter,
    list_recycled,
    scan_segment,
    segment_path,
    take_recycled,
)
from minipulsar.bookie.journal.stats import JournalStats
from tests.support.journal import KIB, add_durably, journal_settings, replay, started_journal


def _group_of(segment_id: int, records: list[tuple[int, int, bytes]]) -> list[bytes]:
    buffers = [b""]
    for ledger_id, entry_id, payload in records:
        buffers += [encode_header(int(RecordType.ADD_ENTRY), ledger_id, entry_id, entry_id - 1, payload), payload]
    buffers[0] = encode_group_header(segment_id, buffers[1::2], sum(map(len, buffers[1:])))
    return buffers


def _write_groups(writer: SegmentWriter, groups: list[list[tuple[int, int, bytes]]]) -> None:
    for records in groups:
        writer.append_synced(_group_of(writer.segment_id, records))


async def test_trimmed_segments_are_written_over_and_replay_returns_only_the_new_records(tmp_path: Path) -> None:
    """Goal: with small segments trimmed after every round of adds, new segments are recycled
    files (flagged reused, old bytes beyond the new data), and replays return exactly what is
    still journaled: nothing from a file's previous use. Method: 64 KiB segments, 12 rounds of
    40 adds of 1–3 KiB, a trim at the applied mark after each round but the last."""
    journal = await started_journal(tmp_path, max_segment_bytes=64 * KIB, prealloc_bytes=16 * KIB)
    written: list[tuple[int, int, bytes]] = []
    last_mark = None
    for round_ in range(12):
        entries = [(7, round_ * 40 + i, os.urandom(1024 + (i * 37) % 2048)) for i in range(40)]
        for ledger_id, entry_id, payload in entries:
            await add_durably(journal, ledger_id, entry_id, payload)
        written += entries
        if round_ < 11:
            last_mark = journal.applied_mark
            journal.trim(last_mark)
    await journal.close()
    reused = [
        s
        for s in list_segments(tmp_path)
        if read_segment_header(segment_path(tmp_path, s).read_bytes()[:SEGMENT_HEADER_SIZE]).reused
    ]
    assert reused, "some segment was written over a recycled file"
    assert len(list_recycled(tmp_path)) <= 2
    replayed = replay(tmp_path, start=last_mark)
    assert replayed.adds == written[-40:] and not replayed.result.lost_tail
    replayed = replay(tmp_path)
    assert replayed.adds == written[len(written) - len(replayed.adds) :] and not replayed.result.lost_tail


def test_a_reused_file_replays_its_new_groups_and_stops_at_the_old_bytes(tmp_path: Path) -> None:
    old = SegmentWriter.create(tmp_path, 1, 0)
    _write_groups(old, [[(1, i, os.urandom(500)) for i in range(10)] for _ in range(5)])
    old.close()
    delete_segments_before(tmp_path, 2, keep_for_reuse=2)
    assert [p.name for p in list_recycled(tmp_path)] == [f"{1:016x}.txn{RECYCLED_SUFFIX}"]
    new = SegmentWriter.create(tmp_path, 2, 0, reuse=True)
    assert list_recycled(tmp_path) == [], "the recycled file became segment 2"
    fresh = [(2, i, os.urandom(500)) for i in range(10)]
    _write_groups(new, [fresh[:4], fresh[4:]])  # less than the old use wrote
    new.close()
    seen: list = []
    scan = scan_segment(
        segment_path(tmp_path, 2),
        2,
        lambda item: seen.append((item.record.ledger_id, item.record.entry_id, bytes(item.payload))),
    )
    assert seen == fresh
    assert scan.reused and scan.end is ScanEnd.STALE and scan.end.clean


def test_a_torn_group_in_a_reused_file_is_dropped_whole(tmp_path: Path) -> None:
    """In a reused file a record that checks out may be the previous use's, at the same offset
    (same-size entries): a group cut short is dropped whole — none of it was acknowledged."""
    old = SegmentWriter.create(tmp_path, 1, 0)
    same_size = [[(1, i, bytes([i]) * 700) for i in range(g * 5, g * 5 + 5)] for g in range(4)]
    _write_groups(old, same_size)
    old.close()
    delete_segments_before(tmp_path, 2, keep_for_reuse=1)
    new = SegmentWriter.create(tmp_path, 2, 0, reuse=True)
    first = [(9, i, bytes([100 + i]) * 700) for i in range(5)]
    second = [(9, i, bytes([200 + i]) * 700) for i in range(5, 10)]
    _write_groups(new, [first])
    torn_at = new.position
    new.close()
    # The second group's GROUP record and first record reach the disk, the rest does not: what
    # follows them is the previous use's records, same sizes, valid checksums.
    buffers = _group_of(2, second)
    with open(segment_path(tmp_path, 2), "r+b") as f:
        f.seek(torn_at)
        f.write(b"".join(buffers[:3]))
    seen: list = []
    scan = scan_segment(segment_path(tmp_path, 2), 2, lambda item: seen.append(item.record.entry_id))
    assert seen == [0, 1, 2, 3, 4] and scan.end is ScanEnd.TORN


def test_segments_rolling_over_write_through_the_same_two_staging_buffers(tmp_path: Path) -> None:
    """Goal: a journal rolling over segment after segment maps no new direct-I/O staging buffer
    per segment (a fresh page is a page fault inside the writer's copy): the segment created
    ahead of time takes a second one, and each roll hands the old one back. Method: 64 KiB
    segments, groups appended through JournalFiles until six rolls; every record replays."""
    settings = journal_settings(max_segment_bytes=64 * KIB, prealloc_bytes=16 * KIB)
    files = JournalFiles(tmp_path, 0, settings, JournalStats())
    files.open(None, [])
    written: list[tuple[int, int, bytes]] = []
    try:
        while files.stats.rolls < 6:
            assert files.current is not None
            records = [(7, len(written) + i, os.urandom(3000)) for i in range(4)]
            _write_groups(files.current, [records])
            written += records
            files.after_write()
    finally:
        files.close()
    assert 1 <= files.staging.mapped <= 2
    replayed = replay(tmp_path)
    assert replayed.adds == written and not replayed.result.lost_tail


def test_a_segment_that_rolled_over_ends_with_an_end_record(tmp_path: Path) -> None:
    writer = SegmentWriter.create(tmp_path, 1, 0)
    _write_groups(writer, [[(1, 0, b"x" * 100)]])
    end = writer.position
    writer.end()
    writer.close()
    scan = scan_segment(segment_path(tmp_path, 1), 1, lambda item: None)
    assert scan.end is ScanEnd.CLEAN and scan.end_offset == end and scan.records == 1
    assert os.path.getsize(segment_path(tmp_path, 1)) >= end + RECORD_HEADER_SIZE


def test_two_threads_racing_for_one_recycled_file_get_it_once(tmp_path: Path) -> None:
    old = SegmentWriter.create(tmp_path, 1, 0)
    old.close()
    delete_segments_before(tmp_path, 2, keep_for_reuse=1)
    first = take_recycled(tmp_path, 2)
    second = take_recycled(tmp_path, 3)
    assert first >= 0 and second == -1
    os.close(first)
    assert list_segments(tmp_path) == [2]
