"""Entry logs on real files: append and read back, roll at logSizeLimit, CRC checks, read-ahead,
and a writer that never appends to a log of an earlier run."""

from __future__ import annotations

import errno
import os
import random
import threading
from pathlib import Path

import pytest

from minipulsar.bookie import direct_io
from minipulsar.bookie.storage import entry_logger
from minipulsar.bookie.storage.entry_log import LOG_HEADER_SIZE, RECORD_HEADER_SIZE, make_location, split_location
from minipulsar.bookie.storage.entry_logger import (
    CorruptEntryError,
    EntryLogReader,
    EntryLogWriter,
    entry_log_path,
    list_entry_logs,
)

KIB = 1024


def _write_entry_log(
    tmp_path: Path, entries: list[tuple[int, int, bytes]], limit: int = 1 << 30, first_log_id: int = 1
) -> list[int]:
    writer = EntryLogWriter(tmp_path, limit, first_log_id)
    locations = [writer.append(ledger_id, entry_id, payload) for ledger_id, entry_id, payload in entries]
    writer.flush()
    writer.close()
    return locations


def test_location_packs_the_log_id_and_the_offset() -> None:
    assert split_location(make_location(0x1234, 0xFFFF_FFF0)) == (0x1234, 0xFFFF_FFF0)
    assert make_location(1, LOG_HEADER_SIZE) == (1 << 32) | LOG_HEADER_SIZE


def test_entries_read_back_byte_identical(tmp_path: Path) -> None:
    rng = random.Random(1)
    entries = [
        (ledger_id, entry_id, rng.randbytes(rng.choice([0, 1, 100, 5000, 70_000])))
        for ledger_id in (1, 2)
        for entry_id in range(20)
    ]
    locations = _write_entry_log(tmp_path, entries)
    reader = EntryLogReader(tmp_path)
    for (ledger_id, entry_id, payload), location in zip(entries, locations):
        got, after = reader.read(location, ledger_id, entry_id)
        assert got == payload
        assert after == location + RECORD_HEADER_SIZE + len(payload)
    reader.close()


def test_logs_roll_before_passing_the_size_limit(tmp_path: Path) -> None:
    """Goal: no log grows past logSizeLimit, except a single record bigger than the limit."""
    limit = 16 * KIB
    entries = [(1, i, bytes([i]) * 3000) for i in range(20)] + [(2, 0, bytes(40 * KIB)), (2, 1, b"x")]
    locations = _write_entry_log(tmp_path, entries, limit)
    logs = list_entry_logs(tmp_path)
    assert len(logs) >= 5 and logs == sorted({split_location(loc)[0] for loc in locations})
    big_log = split_location(locations[20])[0]
    for log_id in logs:
        size = os.path.getsize(entry_log_path(tmp_path, log_id))
        assert size <= limit or log_id == big_log
    assert split_location(locations[21])[0] == big_log + 1, "the record after the big one starts a new log"
    reader = EntryLogReader(tmp_path)
    assert all(reader.read(loc, ledger, entry)[0] == p for (ledger, entry, p), loc in zip(entries, locations))
    reader.close()


@pytest.mark.expect_error_log(r"checksum mismatch", r"no such record")
@pytest.mark.parametrize("damage", ["payload", "ids"])
def test_a_damaged_record_is_refused(tmp_path: Path, damage: str) -> None:
    locations = _write_entry_log(tmp_path, [(1, 0, b"a" * 100), (1, 1, b"b" * 100)])
    log_id, offset = split_location(locations[0])
    with open(entry_log_path(tmp_path, log_id), "r+b") as f:
        f.seek(offset + (RECORD_HEADER_SIZE + 10 if damage == "payload" else 8))
        f.write(b"\xff")
    reader = EntryLogReader(tmp_path)
    with pytest.raises(CorruptEntryError):
        reader.read(locations[0], 1, 0)
    assert reader.read(locations[1], 1, 1)[0] == b"b" * 100
    with pytest.raises(CorruptEntryError):
        reader.read(locations[1], 1, 2)  # not the entry asked for
    reader.close()


def test_read_ahead_follows_one_ledger_and_stops_at_a_gap_another_ledger_or_the_end(tmp_path: Path) -> None:
    entries = [(1, i, bytes([i]) * 50) for i in range(10)] + [(1, 11, b"gap")] + [(2, i, b"two") for i in range(3)]
    locations = _write_entry_log(tmp_path, entries)
    reader = EntryLogReader(tmp_path)
    _, after_first = reader.read(locations[0], 1, 0)
    ahead = reader.read_ahead(after_first, 1, 1, 100, -1)
    assert [e for e, _ in ahead] == list(range(1, 10)), "stops before the gap (entry 10 missing)"
    assert reader.read_ahead(after_first, 1, 1, 4, -1) == [(i, bytes([i]) * 50) for i in range(1, 5)]
    assert len(reader.read_ahead(after_first, 1, 1, 100, 120)) == 3, "the byte cap stops it once reached"
    _, after_two = reader.read(locations[11], 2, 0)
    assert [e for e, _ in reader.read_ahead(after_two, 2, 1, 100, -1)] == [1, 2], "then the end of the log"
    reader.close()


def test_read_ahead_stops_at_a_torn_tail(tmp_path: Path) -> None:
    entries = [(1, i, bytes(1000)) for i in range(5)]
    locations = _write_entry_log(tmp_path, entries)
    path = entry_log_path(tmp_path, 1)
    os.truncate(path, split_location(locations[3])[1] + 500)  # record 3 cut mid-payload
    reader = EntryLogReader(tmp_path)
    _, after = reader.read(locations[0], 1, 0)
    assert [e for e, _ in reader.read_ahead(after, 1, 1, 100, -1)] == [1, 2]
    reader.close()


def test_a_new_writer_starts_a_new_log_and_so_does_one_after_a_failure(tmp_path: Path) -> None:
    _write_entry_log(tmp_path, [(1, 0, b"first run")])
    second = _write_entry_log(tmp_path, [(1, 1, b"second run")], first_log_id=max(list_entry_logs(tmp_path)) + 1)
    assert split_location(second[0])[0] == 2
    writer = EntryLogWriter(tmp_path, 1 << 30, 3)
    writer.append(1, 2, b"lost in a failed flush")
    _retry_after_a_failure(tmp_path, writer, entry_id=2, expected_log_id=4)


def _retry_after_a_failure(tmp_path: Path, writer: EntryLogWriter, entry_id: int, expected_log_id: int) -> None:
    """What the storage does after a failed flush (abandon the log, append again): the retried
    record starts log ``expected_log_id`` and reads back."""
    writer.abandon()
    location = writer.append(1, entry_id, b"retried")
    writer.flush()
    writer.close()
    assert split_location(location) == (expected_log_id, LOG_HEADER_SIZE)
    reader = EntryLogReader(tmp_path)
    assert reader.read(location, 1, entry_id)[0] == b"retried"
    reader.close()


def test_flush_entrylog_bytes_syncs_along_the_way(tmp_path: Path, monkeypatch) -> None:
    """Goal: a big flush fdatasyncs every flushEntrylogBytes, not only at its end."""
    from minipulsar.bookie.storage import entry_logger

    syncs: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(entry_logger.os, "fdatasync", lambda fd: (syncs.append(fd), real(fd)))
    writer = EntryLogWriter(tmp_path, 1 << 30, 1, sync_every_bytes=1024 * KIB)
    for entry_id in range(60):
        writer.append(1, entry_id, bytes(100 * KIB))  # 6 MB
    assert len(syncs) >= 4
    writer.flush()
    writer.close()


def test_synced_entry_log_pages_beyond_the_cache_window_leave_the_page_cache(tmp_path: Path) -> None:
    """Goal: with a cache window, the log being written keeps only about its last
    ``cache_window_bytes`` in the page cache, and every entry still reads back intact (from the
    disk). Method: 6 MB of 100 KiB entries with a 1 MiB window and flushEntrylogBytes, then
    mincore over the log."""
    from minipulsar.bookie.journal.segment import DROP_CACHE_STEP_BYTES
    from tests.support.page_cache import resident_bytes

    window = 1024 * KIB
    writer = EntryLogWriter(tmp_path, 1 << 30, 1, sync_every_bytes=1024 * KIB, cache_window_bytes=window)
    entries = [(7, entry_id, os.urandom(100 * KIB)) for entry_id in range(60)]
    locations = [writer.append(ledger_id, entry_id, payload) for ledger_id, entry_id, payload in entries]
    writer.flush()
    path = entry_log_path(tmp_path, writer.log_id)
    assert os.path.getsize(path) > 5 * window
    assert resident_bytes(path) <= window + DROP_CACHE_STEP_BYTES + 2 * 100 * KIB
    writer.close()
    reader = EntryLogReader(tmp_path)
    try:
        for (ledger_id, entry_id, payload), location in zip(entries, locations):
            assert reader.read(location, ledger_id, entry_id)[0] == payload
    finally:
        reader.close()


def test_a_rolled_entry_log_leaves_the_page_cache_whole(tmp_path: Path) -> None:
    """Goal: with a cache window, a log that rolls is dropped from the page cache entirely (the
    window moves on to the next log). Method: a 2 MiB logSizeLimit, 5 MB of entries."""
    from tests.support.page_cache import resident_bytes

    writer = EntryLogWriter(tmp_path, 2048 * KIB, 1, cache_window_bytes=1024 * KIB)
    for entry_id in range(50):
        writer.append(8, entry_id, os.urandom(100 * KIB))
    writer.flush()
    logs = list_entry_logs(tmp_path)
    assert len(logs) >= 3
    assert all(resident_bytes(entry_log_path(tmp_path, log_id)) == 0 for log_id in logs[:-1])
    writer.close()


def test_direct_entry_logs_share_their_writer_threads_and_close_stops_them(tmp_path: Path, monkeypatch) -> None:
    """Goal: the background direct writes of one log after another go through the same
    BACKGROUND_WRITERS threads (not new ones per log), which close() stops; every entry reads
    back. Method: 3 MiB logs, 12 MiB of 64 KiB entries; the threads that wrote are recorded."""
    writing_threads: list[threading.Thread] = []  # kept alive: distinct objects are distinct threads
    write = direct_io.DirectAppender._write_exactly

    def recorded(self, data, offset, flags=0) -> None:
        if threading.current_thread() not in writing_threads:
            writing_threads.append(threading.current_thread())
        write(self, data, offset, flags)

    monkeypatch.setattr(direct_io.DirectAppender, "_write_exactly", recorded)
    writer = EntryLogWriter(tmp_path, 3 * 1024 * KIB, 1, direct_io=True)
    entries = [(1, i, bytes([i % 251]) * (64 * KIB)) for i in range(192)]
    locations = [writer.append(ledger_id, entry_id, payload) for ledger_id, entry_id, payload in entries]
    writer.flush()
    if writer._direct is None:
        writer.close()
        pytest.skip(f"{tmp_path}: no O_DIRECT")
    assert len(list_entry_logs(tmp_path)) >= 4
    background = [t for t in writing_threads if t is not threading.current_thread()]
    assert 0 < len(background) <= direct_io.BACKGROUND_WRITERS
    writer.close()
    assert not any(t.is_alive() for t in background)
    reader = EntryLogReader(tmp_path)
    assert all(reader.read(loc, ledger, entry)[0] == p for (ledger, entry, p), loc in zip(entries, locations))
    reader.close()


@pytest.mark.parametrize("failing", ["header", "fsync"])
def test_a_log_whose_creation_failed_half_way_is_removed_so_the_next_attempt_succeeds(
    tmp_path: Path, monkeypatch, failing: str
) -> None:
    """Goal: a new log's header write or fsync failing (a full disk) leaves no file behind, so
    the retry, which asks for the same id with O_EXCL, creates it once the disk has room again
    (it failed with EEXIST forever, and the dir never flushed again). Method: the first
    creation's header write (or fsync) fails with ENOSPC, the second works."""
    real = os.write if failing == "header" else os.fsync
    calls = {"n": 0}

    def fails_once(*args):
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args)

    writer = EntryLogWriter(tmp_path, 1 << 30, 1)
    monkeypatch.setattr(entry_logger.os, "write" if failing == "header" else "fsync", fails_once)
    with pytest.raises(OSError) as failed:
        writer.append(1, 0, b"first try")
    assert failed.value.errno == errno.ENOSPC
    assert list_entry_logs(tmp_path) == []
    monkeypatch.undo()
    _retry_after_a_failure(tmp_path, writer, entry_id=0, expected_log_id=1)


def test_a_failed_log_that_cannot_be_removed_has_its_id_skipped(tmp_path: Path, monkeypatch) -> None:
    """Goal: when the half-created log cannot even be removed, the next attempt takes the next
    id instead of failing with EEXIST on the same one. Method: header write and unlink fail."""

    def no_space(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    def no_unlink(*args):
        raise OSError(errno.EIO, "Input/output error")

    writer = EntryLogWriter(tmp_path, 1 << 30, 1)
    monkeypatch.setattr(entry_logger.os, "write", no_space)
    monkeypatch.setattr(entry_logger.os, "unlink", no_unlink)
    with pytest.raises(OSError):
        writer.append(1, 0, b"first try")
    monkeypatch.undo()
    _retry_after_a_failure(tmp_path, writer, entry_id=0, expected_log_id=2)
    assert list_entry_logs(tmp_path) == [1, 2]


def test_close_unmaps_the_direct_staging_buffers(tmp_path: Path) -> None:
    writer = EntryLogWriter(tmp_path, 1 << 30, 1, direct_io=True)
    writer.append(1, 0, b"x" * (64 * KIB))
    writer.flush()
    if writer._direct is None:
        writer.close()
        pytest.skip(f"{tmp_path}: no O_DIRECT")
    staging = writer._staging
    writer.close()
    assert staging._free == {}
