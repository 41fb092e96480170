"""The storage engine under a whole in-process BookieImpl (real journals, real files): replay from
the checkpoint, journal trimming, a torn journal tail, fences that outlive their journal
record, throttled adds, periodic checkpoints.

A "crash" is a copy of every directory taken while the bookie runs (see ``crash_image``): what
a SIGKILL at that instant leaves on disk. The real SIGKILL test is
tests/faults/test_bookie_crash.py.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from pathlib import Path

import pytest

from minipulsar.bookie.journal.directory import list_segments, replay_directory
from minipulsar.bookie.journal.format import RecordType
from minipulsar.bookie.journal.segment import segment_path
from minipulsar.bookie.storage import metrics
from minipulsar.bookie.storage.checkpoint import EMPTY_CHECKPOINT
from minipulsar.bookie.storage.single_directory import SingleDirectoryDbLedgerStorage
from minipulsar.errors import LedgerFencedError, NoSuchEntryError, UnauthorizedAccessError
from tests.support.bookie_storage import (
    add,
    add_many,
    crash_image,
    read_all,
    started_bookie,
    storage,
)
from tests.support.entries import payload_for
from tests.support.process import wait_for

KIB = 1024


async def _assert_all_readable(bookie, ledgers, count: int, size: int = 1000) -> None:
    for ledger_id in ledgers:
        got = await read_all(bookie, ledger_id, 0, count)
        assert [e for e, _ in got] == list(range(count)), f"ledger {ledger_id}"
        assert all(p == payload_for(ledger_id, e, size) for e, p in got), f"ledger {ledger_id} differs"


async def test_a_restart_replays_only_the_records_after_the_checkpoint(tmp_path: Path) -> None:
    """Goal: entries before the checkpoint come from entry logs via the index, only the records
    after it are replayed, and every entry reads back. Method: 3 ledgers x 50 adds, checkpoint,
    20 more each, crash image, start on it, count the replayed records."""
    root = tmp_path / "bookie"
    bookie = await started_bookie(root)
    await add_many(bookie, range(3), range(50))
    checkpoint = await storage(bookie).checkpoint()
    assert checkpoint != EMPTY_CHECKPOINT
    await add_many(bookie, range(3), range(50, 70))
    image = crash_image(root)
    await bookie.close()

    restarted = await started_bookie(image)
    try:
        assert sum(r.records for r in restarted.replay_results) == 60
        await _assert_all_readable(restarted, range(3), 70)
        assert restarted.ledger(1).last_entry_id == 69 and restarted.ledger(1).lac == 68
    finally:
        await restarted.close()


async def test_journal_trimming_deletes_only_the_segments_wholly_before_the_mark(tmp_path: Path) -> None:
    root = tmp_path / "bookie"
    bookie = await started_bookie(root, journalMaxSizeMB=1)
    journal = bookie.journals.for_ledger(0)
    for entry_id in range(35):  # one group each (a pipelined burst would be one 3.5 MB group)
        await add(bookie, 0, entry_id, payload_for(0, entry_id, 100 * KIB))
    before = list_segments(journal.directory)
    assert len(before) >= 3, "~3.5 MB in 1 MB segments"
    checkpoint = await storage(bookie).checkpoint()
    mark = checkpoint.mark(journal.index)
    await wait_for(
        lambda: all(s >= mark.segment_id for s in list_segments(journal.directory)),
        10,
        message="every segment wholly before the mark went (deleted on the journal's trim thread)",
    )
    after = list_segments(journal.directory)
    assert [s for s in before if s >= mark.segment_id] == [s for s in after if s in before], (
        "the segment holding the mark, and any later one, stayed"
    )
    assert mark.segment_id in after and len(after) < len(before)
    await add_many(bookie, [0], range(35, 40), size=100 * KIB)
    image = crash_image(root)
    await bookie.close()
    restarted = await started_bookie(image, journalMaxSizeMB=1)
    try:
        await _assert_all_readable(restarted, [0], 40, size=100 * KIB)
    finally:
        await restarted.close()


async def test_a_torn_last_journal_record_is_ignored_and_everything_before_it_is_served(tmp_path: Path) -> None:
    """Goal: a crash mid-write of the last record (after the checkpoint) loses only that record.
    Method: crash image, cut the journal in the middle of the last record, restart on it, then
    add the lost entry again and restart once more."""
    root = tmp_path / "bookie"
    bookie = await started_bookie(root)
    await add_many(bookie, [0], range(40))
    await storage(bookie).checkpoint()
    await add_many(bookie, [0], range(40, 50))
    end = bookie.journals.for_ledger(0).applied_mark
    image = crash_image(root)
    await bookie.close()
    journal_dir = image / "journal-a" / "current"
    with open(segment_path(journal_dir, end.segment_id), "r+b") as segment:
        segment.truncate(end.offset - 500)  # entry 49's record, cut mid-payload

    restarted = await started_bookie(image)
    try:
        assert any(r.lost_tail for r in restarted.replay_results)
        await _assert_all_readable(restarted, [0], 49)
        with pytest.raises(NoSuchEntryError):
            await read_all(restarted, 0, 49, 1)
        assert restarted.ledger(0).last_entry_id == 48
        await add(restarted, 0, 49, payload_for(0, 49))
        second_image = crash_image(image)
    finally:
        await restarted.close()
    again = await started_bookie(second_image)
    try:
        await _assert_all_readable(again, [0], 50)
    finally:
        await again.close()


def _fence_records(journal_dir: Path) -> list[int]:
    fenced: list[int] = []
    replay_directory(
        journal_dir,
        lambda _, item: fenced.append(item.record.ledger_id) if item.record.type is RecordType.FENCE else None,
    )
    return fenced


async def test_a_master_key_is_replayed_from_the_journal_and_outlives_its_record(tmp_path: Path) -> None:
    """Goal: a ledger's master key survives a crash before any checkpoint (its LEDGER_KEY
    record is replayed) and a crash after the checkpoint that deleted that record's segment
    (the ledger index has it). Method: add with key k, crash image, restart on it, check;
    then roll the journal past the record, checkpoint, crash image, restart, check."""
    root = tmp_path / "bookie"
    bookie = await started_bookie(root, journalMaxSizeMB=1)
    await add(bookie, 2, 0, b"first", master_key=b"k")
    image = crash_image(root)
    await bookie.close()
    bookie = await started_bookie(image, journalMaxSizeMB=1)
    try:
        with pytest.raises(UnauthorizedAccessError):
            await add(bookie, 2, 1, b"intruder", master_key=b"not k")
        with pytest.raises(UnauthorizedAccessError):
            bookie.fence(2, b"not k")
        assert not bookie.ledger(2).fenced
        await add(bookie, 2, 1, b"second", master_key=b"k")
        journal = bookie.journals.for_ledger(2)
        for entry_id in range(25):  # same journal: rolls past the LEDGER_KEY record
            await add(bookie, 0, entry_id, payload_for(0, entry_id, 100 * KIB))
        mark = (await storage(bookie).checkpoint()).mark(journal.index)
        await wait_for(
            lambda: all(s >= mark.segment_id for s in list_segments(journal.directory)),
            10,
            message="segments before the checkpoint deleted (on the journal's trim thread)",
        )
        second_image = crash_image(image)
    finally:
        await bookie.close()
    bookie = await started_bookie(second_image, journalMaxSizeMB=1)
    try:
        assert bookie.ledger(2).master_key == b"k"
        with pytest.raises(UnauthorizedAccessError):
            await add(bookie, 2, 2, b"intruder", master_key=b"not k")
        await add(bookie, 2, 2, b"third", master_key=b"k")
    finally:
        await bookie.close()


async def test_a_fence_outlives_its_journal_record(tmp_path: Path) -> None:
    """Goal: a fenced ledger stays fenced across a restart once the segment holding its FENCE
    record was deleted by a checkpoint. Method: fence, roll the journal past it, checkpoint,
    check the record is gone, crash image, restart, add."""
    root = tmp_path / "bookie"
    bookie = await started_bookie(root, journalMaxSizeMB=1)
    await add(bookie, 2, 0, b"before the fence")
    await bookie.fence(2, b"")
    journal = bookie.journals.for_ledger(2)
    assert _fence_records(journal.directory) == [2]
    for entry_id in range(25):  # same journal: rolls past the record
        await add(bookie, 0, entry_id, payload_for(0, entry_id, 100 * KIB))
    mark = (await storage(bookie).checkpoint()).mark(journal.index)
    await wait_for(
        lambda: all(s >= mark.segment_id for s in list_segments(journal.directory)),
        10,
        message="segments before the checkpoint deleted (on the journal's trim thread)",
    )
    assert _fence_records(journal.directory) == [], "the FENCE record's segment was trimmed"
    image = crash_image(root)
    await bookie.close()

    restarted = await started_bookie(image, journalMaxSizeMB=1)
    try:
        assert restarted.ledger(2).fenced
        with pytest.raises(LedgerFencedError):
            await add(restarted, 2, 1, b"after the fence")
        await add(restarted, 2, 1, b"recovery add", recovery=True)
        assert await read_all(restarted, 2, 0, 5) == [(0, b"before the fence"), (1, b"recovery add")]
    finally:
        await restarted.close()


async def test_adds_wait_for_a_slow_flush_and_none_is_lost(tmp_path: Path, monkeypatch) -> None:
    """Goal: with the write cache full and its flush slow, adds wait (counted as throttled)
    instead of failing, and every one of them is stored. Method: hold every flush on an
    event while 400 x 4 KiB adds go to a 1 MB write cache."""
    release = threading.Event()
    real_flush = SingleDirectoryDbLedgerStorage.flush

    def slow_flush(self, batch) -> None:
        release.wait(30)
        real_flush(self, batch)

    monkeypatch.setattr(SingleDirectoryDbLedgerStorage, "flush", slow_flush)
    root = tmp_path / "bookie"
    bookie = await started_bookie(root, dbStorage_writeCacheMaxSizeMb=1)
    throttled_before = metrics.THROTTLED_WRITE_REQUESTS._value.get()
    adds = asyncio.ensure_future(add_many(bookie, range(4), range(100), size=4 * KIB))
    await wait_for(
        lambda: metrics.THROTTLED_WRITE_REQUESTS._value.get() > throttled_before,
        10,
        message="no add waited for write-cache room",
    )
    assert not adds.done()
    cached = sum(d.write_cache_size_bytes for d in storage(bookie).dirs)
    assert cached <= 1024 * KIB + 8 * KIB, "the write cache stays within dbStorage_writeCacheMaxSizeMb"
    release.set()
    await asyncio.wait_for(adds, 30)
    await _assert_all_readable(bookie, range(4), 100, size=4 * KIB)
    await bookie.close()
    restarted = await started_bookie(root)
    try:
        await _assert_all_readable(restarted, range(4), 100, size=4 * KIB)
    finally:
        await restarted.close()


async def test_the_ledger_dirs_flush_at_the_same_time(tmp_path: Path, monkeypatch) -> None:
    """Goal: with two ledger dirs (each may be its own disk), a checkpoint flushes both at
    once, not one after the other. Method: each dir's flush waits for the other's to start
    (5 s at most); one after the other, the first would wait in vain."""
    started = {name: threading.Event() for name in ("ledgers-a", "ledgers-b")}
    saw_the_other: dict[str, bool] = {}
    real_flush = SingleDirectoryDbLedgerStorage.flush

    def meeting_flush(self, batch) -> None:
        name = self.directory.parent.name
        started[name].set()
        other = "ledgers-b" if name == "ledgers-a" else "ledgers-a"
        saw_the_other[name] = started[other].wait(5)
        real_flush(self, batch)

    bookie = await started_bookie(tmp_path / "bookie")
    try:
        await add_many(bookie, range(4), range(10))  # ledgers 0..3: both dirs get entries
        monkeypatch.setattr(SingleDirectoryDbLedgerStorage, "flush", meeting_flush)
        await storage(bookie).checkpoint()
        assert saw_the_other == {"ledgers-a": True, "ledgers-b": True}
        await _assert_all_readable(bookie, range(4), 10)
    finally:
        await bookie.close()


@pytest.mark.expect_error_log(
    r"flush failed in checkpoint", r"checkpoint \d+ failed", r"is out of space", r"ledger dir \S+ failed"
)
async def test_what_a_failing_ledger_dir_never_flushed_is_replayed_from_the_journal(
    tmp_path: Path, monkeypatch
) -> None:
    """Goal: while one ledger dir's flushes fail, the checkpoints the other dir's full cache
    asks for flush that dir but never move the mark past what the failing dir holds; a bookie
    closed in that state (its last checkpoint failing too) replays those entries from the
    journal at the next start. Method: 1 MB write cache, flushes of ``ledgers-a`` (even
    ledgers) failing with ENOSPC; ledger 0 gets entries that cannot be flushed, then ledger 1
    (``ledgers-b``) several halves' worth; close, restart with the disk healthy, read back."""
    real_flush = SingleDirectoryDbLedgerStorage.flush
    flushed_b = []

    def failing_in_a(self, batch) -> None:
        if self.directory.parent.name == "ledgers-a":
            raise OSError(errno.ENOSPC, "No space left on device")
        real_flush(self, batch)
        flushed_b.append(batch)

    root = tmp_path / "bookie"
    bookie = await started_bookie(root, dbStorage_writeCacheMaxSizeMb=1)
    await add_many(bookie, range(2), range(10))
    mark = await storage(bookie).checkpoint()
    monkeypatch.setattr(SingleDirectoryDbLedgerStorage, "flush", failing_in_a)
    await add_many(bookie, [0], range(10, 20))
    with pytest.raises(RuntimeError, match="No space left"):
        await storage(bookie).checkpoint()
    await add_many(bookie, [1], range(10, 410), size=4 * KIB)  # ~1.6 MB: ledgers-b's halves fill
    assert len(flushed_b) >= 3
    assert storage(bookie).last_checkpoint == mark
    await asyncio.wait_for(bookie.close(), 30)
    monkeypatch.undo()
    restarted = await started_bookie(root)
    try:
        await _assert_all_readable(restarted, [0], 20)
        got = await read_all(restarted, 1, 10, 400)
        assert [e for e, _ in got] == list(range(10, 410))
        assert all(p == payload_for(1, e, 4 * KIB) for e, p in got)
    finally:
        await restarted.close()


@pytest.mark.expect_error_log(
    r"flush failed in checkpoint", r"checkpoint \d+ failed", r"is out of space", r"ledger dir \S+ failed"
)
async def test_a_dir_whose_new_entry_log_hit_a_full_disk_flushes_again_once_there_is_room(
    tmp_path: Path, monkeypatch
) -> None:
    """Goal: a checkpoint whose new entry log was created but whose header could not be written
    (ENOSPC) does not leave that dir unable to flush: once the disk has room, the retry creates
    the log and the mark moves (the half-created file made every retry fail with EEXIST, the
    mark stuck until a restart). Method: the header writes of ``ledgers-a`` fail, then work."""
    from minipulsar.bookie.storage import entry_logger

    real_header = entry_logger.encode_log_header

    def full_disk(log_id: int) -> bytes:
        raise OSError(errno.ENOSPC, "No space left on device")

    root = tmp_path / "bookie"
    bookie = await started_bookie(root)
    try:
        await add_many(bookie, range(2), range(10))
        monkeypatch.setattr(entry_logger, "encode_log_header", full_disk)
        with pytest.raises(RuntimeError, match="No space left"):
            await storage(bookie).checkpoint()
        monkeypatch.setattr(entry_logger, "encode_log_header", real_header)
        mark = await storage(bookie).checkpoint()
        assert mark == storage(bookie).last_checkpoint == bookie.journals.new_checkpoint()
        await _assert_all_readable(bookie, range(2), 10)
    finally:
        await bookie.close()
    restarted = await started_bookie(root)
    try:
        await _assert_all_readable(restarted, range(2), 10)
    finally:
        await restarted.close()


@pytest.mark.expect_error_log(
    r"flush failed in checkpoint", r"checkpoint \d+ failed", r"is out of space", r"ledger dir \S+ failed"
)
async def test_each_dir_failing_is_logged_when_it_starts(tmp_path: Path, monkeypatch, caplog) -> None:
    """Goal: while one dir keeps failing (its checkpoint errors logged only now and then),
    another dir starting to fail is logged at once, and so is a dir flushing again. Method:
    ``ledgers-a`` fails with ENOSPC (it is full then: ledger 0 takes no more adds), a few
    checkpoints later ``ledgers-b`` with EIO too (failed: ledger 1 takes no more adds)."""
    real_flush = SingleDirectoryDbLedgerStorage.flush
    failing = {"ledgers-a": errno.ENOSPC}

    def flush(self, batch) -> None:
        code = failing.get(self.directory.parent.name)
        if code is not None:
            raise OSError(code, os.strerror(code))
        real_flush(self, batch)

    monkeypatch.setattr(SingleDirectoryDbLedgerStorage, "flush", flush)
    bookie = await started_bookie(tmp_path / "bookie")
    try:
        caplog.set_level("ERROR", logger="minipulsar.bookie.storage.db_ledger_storage")
        for attempt in range(3):
            await add_many(bookie, range(2) if attempt == 0 else [1], range(attempt * 5, attempt * 5 + 5))
            with pytest.raises(RuntimeError):
                await storage(bookie).checkpoint()
        assert bookie.dirs_manager.state(tmp_path / "bookie" / "ledgers-a") == "full"
        failing["ledgers-b"] = errno.EIO
        await add_many(bookie, [1], range(15, 20))
        with pytest.raises(RuntimeError):
            await storage(bookie).checkpoint()
        assert bookie.dirs_manager.state(tmp_path / "bookie" / "ledgers-b") == "failed"
        assert not bookie.dirs_manager.writable
        dir_lines = [
            r.getMessage()
            for r in caplog.records
            if r.getMessage().startswith("ledger dir ") and r.name.endswith("db_ledger_storage")
        ]
        assert len([line for line in dir_lines if "ledgers-a" in line and "No space" in line]) == 1
        assert len([line for line in dir_lines if "ledgers-b" in line and "Input/output" in line]) == 1
        caplog.set_level("WARNING", logger="minipulsar.bookie.storage.db_ledger_storage")
        failing.clear()
        await storage(bookie).checkpoint()
        again = [r.getMessage() for r in caplog.records if "flushes again" in r.getMessage()]
        assert sorted(line.split()[2].rsplit("/", 2)[1] for line in again) == ["ledgers-a", "ledgers-b"]
        await _assert_all_readable(bookie, [0], 5)
        await _assert_all_readable(bookie, [1], 20)
        assert bookie.dirs_manager.state(tmp_path / "bookie" / "ledgers-b") == "failed", "until a restart"
    finally:
        await bookie.close()


async def test_the_flush_interval_checkpoints_a_cache_that_is_not_full(tmp_path: Path) -> None:
    root = tmp_path / "bookie"
    bookie = await started_bookie(root, flushInterval=50)
    try:
        await add_many(bookie, range(2), range(10))
        await wait_for(
            lambda: sum(d.write_cache_count for d in storage(bookie).dirs) == 0,
            10,
            message="the flush interval did not flush the write cache",
        )
        await wait_for(lambda: storage(bookie).last_checkpoint == bookie.journals.new_checkpoint(), 10)
        await _assert_all_readable(bookie, range(2), 10)
    finally:
        await bookie.close()


async def test_storage_metrics_are_exported_under_bookkeepers_names(tmp_path: Path) -> None:
    from prometheus_client import generate_latest

    bookie = await started_bookie(tmp_path / "bookie")
    try:
        await add_many(bookie, range(2), range(20))
        await storage(bookie).checkpoint()
        await read_all(bookie, 0, 0, 20)
        text = generate_latest().decode()
    finally:
        await bookie.close()
    for name in (
        "bookie_flush_count",
        "bookie_flush_entrylog_count",
        "bookie_flush_locations_index_count",
        "bookie_flush_ledger_index_count",
        "bookie_flush_size_count",
        "bookie_write_cache_size",
        "bookie_write_cache_count",
        "bookie_read_cache_size",
        "bookie_read_cache_count",
        "bookie_read_cache_hits",
        "bookie_read_cache_misses",
        "bookie_write_cache_hits",
        "bookie_throttled_write_requests",
        "bookie_throttled_write_count",
        "bookie_read_entry_count",
        "bookie_read_locations_index_time_count",
        "bookie_read_entrylog_time_count",
        "bookie_readahead_batch_count_count",
        "bookie_readahead_batch_size_count",
    ):
        assert f"\n{name}" in text, name


async def test_reads_never_miss_an_acknowledged_entry_while_halves_swap_and_flush(tmp_path: Path) -> None:
    """Goal: an entry acknowledged before a read starts is always found, wherever it is at that
    moment: active half, half being flushed, read-ahead cache or entry log + index.
    Method: a 1 MB write cache and a 20 ms flush interval; a writer keeps adding while 4
    readers read random acknowledged entries (on the read threads) until more than 500 reads
    and 500 adds went through more than 5 checkpoints."""
    import random

    bookie = await started_bookie(tmp_path / "bookie", dbStorage_writeCacheMaxSizeMb=1, flushInterval=20)
    acked = [0, 0]  # per ledger: entries 0..n-1 are acknowledged
    stop = asyncio.Event()

    async def writer(ledger_id: int) -> None:
        while not stop.is_set():
            entry_id = acked[ledger_id]
            await add(bookie, ledger_id, entry_id, payload_for(ledger_id, entry_id, 2000))
            acked[ledger_id] = entry_id + 1

    reads = [0, 0, 0, 0]  # per reader

    async def reader(seed: int) -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            ledger_id = rng.randrange(2)
            if acked[ledger_id] == 0:
                await asyncio.sleep(0.001)
                continue
            entry_id = rng.randrange(max(0, acked[ledger_id] - 50), acked[ledger_id])
            got = await bookie.read_entries(ledger_id, entry_id, 1, 1 << 20)
            assert got == [(entry_id, payload_for(ledger_id, entry_id, 2000))]
            reads[seed] += 1

    checkpoints_before = metrics.CHECKPOINTS._value.get()
    tasks = [
        asyncio.ensure_future(writer(0)),
        asyncio.ensure_future(writer(1)),
        *(asyncio.ensure_future(reader(seed)) for seed in range(4)),
    ]

    def enough() -> bool:
        checkpoints = metrics.CHECKPOINTS._value.get() - checkpoints_before
        return sum(reads) > 500 and sum(acked) > 500 and checkpoints > 5

    try:
        await wait_for(enough, timeout_s=30, message=f"too few reads {reads}, adds {acked} or checkpoints")
    finally:
        stop.set()
        await asyncio.gather(*tasks)  # a reader that missed an entry fails here
        await bookie.close()
