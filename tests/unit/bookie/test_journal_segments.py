"""Journal segment files: preallocation off the writer's path, the next segment created ahead
of time, restarts next to such an empty segment, and segments of the older format (zlib CRC32),
which are replayed but never appended to."""

from __future__ import annotations

import asyncio
import errno
import os
import struct
import threading
import zlib
from pathlib import Path

import pytest
from crc32c import crc32c

from minipulsar.bookie.journal import segment as journal_segment
from minipulsar.bookie.journal.directory import list_segments
from minipulsar.bookie.journal.format import (
    RECORD_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
    SEGMENT_VERSION,
    LogMark,
    RecordType,
    encode_group_header,
    encode_header,
    encode_segment_header,
    read_segment_header,
)
from minipulsar.bookie.journal.segment import Preallocator, SegmentWriter, scan_segment, segment_path
from tests.support.journal import KIB, Add, RecordingSink, new_journal, replay, submit, write
from tests.support.process import wait_for


def test_records_carry_a_crc32c_of_the_header_rest_and_the_payload() -> None:
    header = encode_header(int(RecordType.ADD_ENTRY), 7, 3, 2, b"payload")
    assert int.from_bytes(header[:4], "big") == crc32c(b"payload", crc32c(header[4:]))
    assert read_segment_header(encode_segment_header(5)) == (5, 3, 0)


async def test_zeros_are_prepared_ahead_of_the_writer_and_the_file_never_grows_under_a_group(tmp_path: Path) -> None:
    """Goal: the preallocation keeps at least half a step ahead of the records (in the background)
    and the file size stays a multiple of the step. Method: 64 KiB steps, 300 KiB of records."""
    entries = [(1, i, bytes([i % 251]) * 3000) for i in range(100)]
    journal = await write(tmp_path, entries, prealloc_bytes=64 * KIB)
    writer = journal._files.current  # type: ignore[union-attr]
    assert writer is not None
    await wait_for(lambda: writer._extension is None or writer._extension.done(), 10)
    size = os.path.getsize(segment_path(tmp_path, writer.segment_id))
    assert size % (64 * KIB) == 0 and size >= writer.position + 32 * KIB
    assert segment_path(tmp_path, writer.segment_id).read_bytes()[writer.position :] == bytes(size - writer.position)
    await journal.close()
    assert replay(tmp_path).adds == entries


async def test_the_next_segment_is_created_ahead_and_rolls_keep_every_record_in_order(tmp_path: Path) -> None:
    entries = [(2, i, os.urandom(2000)) for i in range(120)]
    journal = await write(tmp_path, entries, prealloc_bytes=16 * KIB, max_segment_bytes=64 * KIB)
    current = journal._files.current.segment_id  # type: ignore[union-attr]
    await journal.close()
    assert journal.stats.rolls >= 3
    assert list_segments(tmp_path)[-1] in (current, current + 1), "at most one segment created ahead"
    replayed = replay(tmp_path)
    assert replayed.adds == entries and not replayed.result.lost_tail


async def test_a_restart_next_to_an_empty_segment_cuts_the_torn_tail_before_it(tmp_path: Path) -> None:
    """Goal: after a crash that tore the last record of segment N while N+1 was already created
    (empty), the torn record is dropped, new records go after the good ones, and no later
    replay reports lost data. Method: build that state, tear the record, restart, append."""
    first = [(3, i, bytes([i]) * 1000) for i in range(40)]
    journal = await write(tmp_path, first, prealloc_bytes=16 * KIB, max_segment_bytes=80 * KIB)
    writer = journal._files.current  # type: ignore[union-attr]
    assert writer is not None
    # The writer thread asks for the next segment after completing the group that crossed the
    # half-way mark: the completion can reach us first.
    await wait_for(lambda: journal._files.next_writer is not None, 10)
    await asyncio.wrap_future(journal._files.next_writer)
    segment_id, end = writer.segment_id, writer.position
    await journal.close()
    assert list_segments(tmp_path)[-1] == segment_id + 1
    with open(segment_path(tmp_path, segment_id), "r+b") as f:
        f.truncate(end - 500)  # mid-payload of the last record
    replayed = replay(tmp_path)
    assert replayed.adds == first[:-1] and replayed.result.lost_tail
    second = [(3, 40 + i, b"new" * 10) for i in range(5)]
    await (await write(tmp_path, second, prealloc_bytes=16 * KIB, max_segment_bytes=80 * KIB)).close()
    replayed = replay(tmp_path)
    assert replayed.adds == first[:-1] + second and not replayed.result.lost_tail
    # cut where the last group began: its GROUP record and its one record
    assert os.path.getsize(segment_path(tmp_path, segment_id)) == end - 2 * RECORD_HEADER_SIZE - 1000


def _version_1_segment(directory: Path, segment_id: int, entries: list[tuple[int, int, bytes]]) -> None:
    """A segment as a bookie of the previous format wrote it: version 1, zlib CRC32 records."""
    data = encode_segment_header(segment_id, version=1)
    for ledger_id, entry_id, payload in entries:
        rest = struct.pack(">IBqqq", len(payload), int(RecordType.ADD_ENTRY), ledger_id, entry_id, entry_id - 1)
        data += zlib.crc32(payload, zlib.crc32(rest)).to_bytes(4, "big") + rest + payload
    directory.mkdir(parents=True, exist_ok=True)
    segment_path(directory, segment_id).write_bytes(data + bytes(4096))


async def test_segments_of_the_zlib_format_replay_and_are_never_appended_to(tmp_path: Path) -> None:
    old = [(4, i, os.urandom(300)) for i in range(10)]
    _version_1_segment(tmp_path, 1, old)
    assert replay(tmp_path).adds == old
    new = [(4, 10 + i, os.urandom(300)) for i in range(3)]
    await (await write(tmp_path, new, prealloc_bytes=16 * KIB)).close()
    assert list_segments(tmp_path) == [1, 2], "the new records went to a new (current version) segment"
    assert read_segment_header(segment_path(tmp_path, 2).read_bytes()[:SEGMENT_HEADER_SIZE]).version == SEGMENT_VERSION
    replayed = replay(tmp_path)
    assert replayed.adds == old + new and not replayed.result.lost_tail


def test_a_write_past_the_preallocation_waits_for_it(tmp_path: Path) -> None:
    """Without a background thread the writer extends inline; either way no byte is written
    past the zeros prepared for it."""
    writer = SegmentWriter.create(tmp_path, 1, 16 * KIB)
    start = writer.append([b"r" * (40 * KIB)])
    assert start == SEGMENT_HEADER_SIZE and os.path.getsize(segment_path(tmp_path, 1)) >= writer.position
    assert os.path.getsize(segment_path(tmp_path, 1)) % (16 * KIB) == 0
    writer.close()


async def test_synced_groups_are_dropped_from_the_page_cache(tmp_path: Path) -> None:
    """Goal: with journalRemoveFromPageCache (the default) the segment's synced pages leave the
    page cache — all but the last step's — and every record still replays. Method: 3 MiB of
    64 KiB records, one group each, then mincore over the segment."""
    from minipulsar.bookie.journal.segment import DROP_CACHE_STEP_BYTES
    from tests.support.page_cache import resident_bytes

    entries = [(4, i, os.urandom(64 * KIB)) for i in range(48)]
    journal = await write(tmp_path, entries, prealloc_bytes=1024 * KIB, direct_io=False)
    writer = journal._files.current  # type: ignore[union-attr]
    assert writer is not None
    written = writer.position
    path = segment_path(tmp_path, writer.segment_id)
    assert written > 3 * DROP_CACHE_STEP_BYTES
    assert resident_bytes(path) <= DROP_CACHE_STEP_BYTES + 64 * KIB
    await journal.close()
    replayed = replay(tmp_path)
    assert replayed.adds == entries and not replayed.result.lost_tail


def _numbered_group(segment_id: int, first: int, count: int, size: int) -> tuple[list[bytes], int]:
    """A GROUP record and ``count`` ADD records of ``size`` bytes (entries ``first``...)."""
    buffers, total = [b""], 0
    for entry_id in range(first, first + count):
        payload = bytes([entry_id % 250 + 1]) * size
        buffers += [encode_header(int(RecordType.ADD_ENTRY), 1, entry_id, entry_id - 1, payload), payload]
        total += RECORD_HEADER_SIZE + size
    buffers[0] = encode_group_header(segment_id, buffers[1::2], total)
    return buffers, RECORD_HEADER_SIZE + total


def _entries_replayed(directory: Path, segment_id: int) -> list[int]:
    seen: list[int] = []
    scan_segment(segment_path(directory, segment_id), segment_id, lambda scanned: seen.append(scanned.record.entry_id))
    return seen


@pytest.mark.parametrize("case", ["while-the-extension-runs", "group-bigger-than-the-extension"])
def test_no_group_is_written_past_the_zeros_prepared_for_it(tmp_path: Path, monkeypatch, case: str) -> None:
    """Goal: the writer never writes past what preallocation finished, so a zero-fill (a file
    system without fallocate) never lands on synced, acknowledged records: neither a group
    written while an extension is still running, nor a group bigger than what the extension
    it waited for prepared. Method: posix_fallocate unsupported; the background zero-fill is held until the writer
    waits for it (or to the end, if it never does); then every record written must replay."""
    release = threading.Event()

    def no_fallocate(fd: int, offset: int, length: int) -> None:
        if threading.current_thread() is not threading.main_thread():
            release.wait(10)
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(journal_segment.os, "posix_fallocate", no_fallocate)
    preallocator = Preallocator("test-prealloc")
    writer = SegmentWriter.create(tmp_path, 1, 1024 * KIB, preallocator, limit_bytes=64 * 1024 * KIB)
    buffers, size = _numbered_group(1, 0, 6, 100 * KIB)  # ends at ~600 KiB: an extension to 2 MiB starts
    writer.append_synced(buffers, size)
    extension = writer._extension
    assert extension is not None
    wait_for_it = extension.result
    extension.result = lambda *args, **kwargs: (release.set(), wait_for_it(*args, **kwargs))[1]
    if case == "while-the-extension-runs":
        buffers, size = _numbered_group(1, 6, 5, 100 * KIB)  # ends at ~1.1 MiB: past what is prepared
        writer.append_synced(buffers, size)
        written = 11
    else:
        buffers, size = _numbered_group(1, 6, 20, 100 * KIB)  # ends at ~2.6 MiB: past the extension's 2 MiB
        writer.append_synced(buffers, size)
        buffers, size = _numbered_group(1, 26, 1, 10 * KIB)
        writer.append_synced(buffers, size)
        written = 27
    assert writer.position <= writer._allocated
    release.set()
    writer.close()
    preallocator.close()
    assert _entries_replayed(tmp_path, 1) == list(range(written))


def test_preallocation_syncs_through_a_descriptor_of_its_own(tmp_path: Path, monkeypatch) -> None:
    """Goal: the preallocation's fdatasync (of the whole file) is never made through the
    writer's descriptor: the kernel reports a failed writeback once per open file, so it would
    take the error that the writer's synced write must see. Method: every fdatasync and
    posix_fallocate is recorded with its descriptor while groups cross several steps."""
    calls: list[tuple[str, int]] = []
    real_sync, real_fallocate = os.fdatasync, os.posix_fallocate

    def fdatasync(fd: int) -> None:
        calls.append(("fdatasync", fd))
        real_sync(fd)

    def posix_fallocate(fd: int, offset: int, length: int) -> None:
        calls.append(("fallocate", fd))
        real_fallocate(fd, offset, length)

    preallocator = Preallocator("test-prealloc")
    writer = SegmentWriter.create(tmp_path, 1, 64 * KIB, preallocator, limit_bytes=64 * 1024 * KIB)
    monkeypatch.setattr(journal_segment.os, "fdatasync", fdatasync)
    monkeypatch.setattr(journal_segment.os, "posix_fallocate", posix_fallocate)
    for first in range(0, 40, 4):
        buffers, size = _numbered_group(1, first, 4, 16 * KIB)
        writer.append(buffers, size)
        writer.sync()
    writer.close()
    preallocator.close()
    monkeypatch.undo()
    fallocate_fds = {fd for name, fd in calls if name == "fallocate"}
    assert fallocate_fds, "the groups crossed several steps: preallocation ran"
    writer_syncs = {fd for name, fd in calls if name == "fdatasync"} - fallocate_fds
    assert writer_syncs, "the writer's own syncs"
    writer_fd = next(iter(writer_syncs))
    assert writer_fd not in fallocate_fds
    assert _entries_replayed(tmp_path, 1) == list(range(40))


async def test_appending_after_a_group_cut_short_resumes_at_the_group_start(tmp_path: Path) -> None:
    """Goal: after a crash that cut a group short, appending resumes where that group starts,
    so a replay from any earlier mark reads through to the groups written after the restart
    (appended after the cut group's surviving records, inside the range its header announces,
    a replay from before would stop there as corrupt and lose every later add).
    Method: two groups of 5 adds; the second cut inside its second record; a restart appends 3
    adds; then replays from the start and from the restart's mark."""

    async def write_group(first: int) -> tuple[int, LogMark]:
        journal = new_journal(tmp_path, reuse_files=False, direct_io=False, prealloc_bytes=64 * KIB)
        result = journal.replay(lambda *args: None)
        await journal.start()
        count = 5 if first < 100 else 3
        sink = RecordingSink()
        assert submit(journal, sink, *(Add(1, first + i, bytes([i + 1]) * 1000) for i in range(count)))
        await sink.wait(count)
        end = journal._files.current.position  # type: ignore[union-attr]
        await journal.close()
        return end, result.end_mark

    await write_group(0)
    end, _ = await write_group(5)
    with open(segment_path(tmp_path, list_segments(tmp_path)[-1]), "r+b") as segment:
        segment.truncate(end - 3 * (RECORD_HEADER_SIZE + 1000) - 500)  # entry 5 whole, 6 torn
    replayed = replay(tmp_path)
    assert [e for _, e, _ in replayed.adds] == [0, 1, 2, 3, 4, 5] and replayed.result.lost_tail
    _, restart_mark = await write_group(100)
    replayed = replay(tmp_path)
    assert [e for _, e, _ in replayed.adds] == [0, 1, 2, 3, 4, 100, 101, 102]
    assert not replayed.result.lost_tail
    assert [e for _, e, _ in replay(tmp_path, restart_mark).adds] == [100, 101, 102]


def test_trimming_that_fails_at_start_is_logged_and_left_for_the_next_checkpoint(
    tmp_path: Path, monkeypatch, caplog
) -> None:
    """Goal: deleting old segments is housekeeping: when it fails during start-up (the replay's
    checkpoint trims before the journal's threads run), the bookie still starts."""
    from minipulsar.bookie.journal import journal as journal_module

    def failing(*args) -> list[int]:
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(journal_module, "trim_segments", failing)
    new_journal(tmp_path).trim_soon(LogMark(2, SEGMENT_HEADER_SIZE))
    assert "deleting segments before" in caplog.text and "Permission denied" in caplog.text
