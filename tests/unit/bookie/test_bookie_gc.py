"""Garbage collection under a whole in-process BookieImpl (real journals, entry logs, index): deleted
ledgers leave memory, index and disk; the scan never deletes a ledger created or written while
it runs; dead entry logs go but never the current one; compaction moves live entries, updates
the index and spares what moved meanwhile; a read that raced the move still succeeds.

The metadata store is a fake :class:`LedgerMetadataSource` whose listing the tests can hold up
or make stale. Compaction happens through ``bookie.gc.force()`` (the ``PUT /api/v1/bookie/gc``
path); the real metadata store and processes are in tests/cluster/test_bookie_gc.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from minipulsar.bookie.storage import metrics
from minipulsar.bookie.storage.compaction import logs_to_compact
from minipulsar.bookie.storage.entry_log import RECORD_HEADER_SIZE, split_location
from minipulsar.bookie.storage.entry_logger import entry_log_path
from minipulsar.bookie.storage.single_directory import SingleDirectoryDbLedgerStorage
from tests.support.bookie_gc import (
    ENTRY_BYTES,
    FakeLedgers,
    assert_ledgers_gone,
    assert_ledgers_intact,
    entry_log_bytes,
    gc_bookie,
    log_ids_on_disk,
    the_dir,
    usages,
    write_and_checkpoint,
)
from tests.support.bookie_storage import add, add_many, read_all, storage
from tests.support.entries import payload_for


async def test_ledgers_deleted_from_metadata_leave_memory_index_and_disk(tmp_path: Path) -> None:
    """Goal: the GC scenario of tests/cluster/test_bookie_gc.py in small.
    Method: 30 ledgers x 20 entries in ~10 entry logs,
    metadata kept for every third ledger, forced GC: the others are gone from memory, index and
    disk, entry-log bytes shrink by more than half, the live ledgers read back byte-identical,
    also after a restart."""
    root = tmp_path / "bookie"
    bookie = await gc_bookie(root)
    ledgers, live = range(30), [i for i in range(30) if i % 3 == 0]
    await write_and_checkpoint(bookie, ledgers, 20)
    await write_and_checkpoint(bookie, [100], 70)  # rolls the log: every ledger above is in a closed one
    live.append(100)
    before, deleted_before = entry_log_bytes(root), metrics.DELETED_LEDGER_TOTAL._value.get()
    bookie.start_gc(FakeLedgers(live))

    result = await bookie.gc.force()
    assert result.deleted_ledgers == 20 and not result.errors
    assert metrics.DELETED_LEDGER_TOTAL._value.get() - deleted_before == 20
    assert result.compacted_entry_logs > 0 and result.reclaimed_compaction_bytes > 0
    assert entry_log_bytes(root) < before * 0.55, (before, entry_log_bytes(root))
    await assert_ledgers_gone(bookie, set(ledgers) - set(live))
    await assert_ledgers_intact(bookie, live[:-1], 20)
    assert bookie.storage.entry_count == 10 * 20 + 70
    await bookie.close()

    restarted = await gc_bookie(root)
    try:
        await assert_ledgers_gone(restarted, set(ledgers) - set(live))
        await assert_ledgers_intact(restarted, live[:-1], 20)
        await assert_ledgers_intact(restarted, [100], 70)
    finally:
        await restarted.close()


async def test_a_ledger_created_while_the_metadata_is_listed_is_not_deleted(tmp_path: Path) -> None:
    """Goal: the scan-and-compare race. Method: the listing is taken, then (before it returns)
    ledger 7 is created — metadata and entries — so the listing the GC compares with lacks a
    ledger that exists locally by then. Ledger 8 exists but a listing cut short omits it. Both
    survive; ledger 9, really deleted, goes."""
    bookie = await gc_bookie(tmp_path / "bookie")
    await write_and_checkpoint(bookie, [8, 9], 5)
    ledgers = FakeLedgers([8])
    ledgers.hidden = {8}

    async def create_ledger_7() -> None:
        ledgers.ids.add(7)
        await add_many(bookie, [7], range(5), ENTRY_BYTES)

    ledgers.during_listing = create_ledger_7
    bookie.start_gc(ledgers)

    result = await bookie.gc.force()
    assert result.deleted_ledgers == 1
    await assert_ledgers_intact(bookie, [7, 8], 5)
    await assert_ledgers_gone(bookie, [9])
    await bookie.close()


async def test_a_ledger_written_during_the_scan_is_kept_until_a_later_round(tmp_path: Path) -> None:
    """A ledger without metadata that gets an entry after the local snapshot is being written
    right now: this round keeps it, the next one (no more writes) deletes it."""
    bookie = await gc_bookie(tmp_path / "bookie")
    await write_and_checkpoint(bookie, [5], 5)
    ledgers = FakeLedgers([])

    async def write_to_ledger_5() -> None:
        await add(bookie, 5, 5, payload_for(5, 5, ENTRY_BYTES))

    ledgers.during_listing = write_to_ledger_5
    bookie.start_gc(ledgers)

    assert (await bookie.gc.force()).deleted_ledgers == 0
    await assert_ledgers_intact(bookie, [5], 6)
    ledgers.during_listing = None
    assert (await bookie.gc.force()).deleted_ledgers == 1
    await assert_ledgers_gone(bookie, [5])
    await bookie.close()


async def test_a_deleted_ledgers_entries_leave_the_write_cache_too(tmp_path: Path) -> None:
    """Entries not flushed yet (in the active write-cache half) go with the ledger, and the next
    checkpoint indexes nothing of it."""
    bookie = await gc_bookie(tmp_path / "bookie")
    await add_many(bookie, [3, 4], range(10), ENTRY_BYTES)
    directory = the_dir(bookie)
    assert directory.write_cache_count == 20
    bookie.start_gc(FakeLedgers([4]))

    assert (await bookie.gc.force()).deleted_ledgers == 1
    assert directory.write_cache_count == 10
    await storage(bookie).checkpoint()
    assert set(await asyncio.to_thread(directory.persisted_ledger_ids)) == {4}
    assert bookie.storage.entry_count == 10
    await assert_ledgers_intact(bookie, [4], 10)
    await bookie.close()


async def test_an_unreachable_metadata_store_deletes_nothing(tmp_path: Path) -> None:
    bookie = await gc_bookie(tmp_path / "bookie")
    await write_and_checkpoint(bookie, [1, 2], 5)
    ledgers = FakeLedgers([])
    ledgers.fail = ConnectionError("metadata store down")
    bookie.start_gc(ledgers)

    result = await bookie.gc.force()
    assert result.deleted_ledgers == 0 and "metadata store down" in result.errors[0]
    await assert_ledgers_intact(bookie, [1, 2], 5)
    await bookie.close()


async def test_dead_entry_logs_are_deleted_but_never_the_current_one(tmp_path: Path) -> None:
    """Goal: logs whose live bytes fall to 0 are deleted without compaction; the log flushes
    append to is kept even when all it holds is dead, until it is no longer current (here: a
    restart, after which flushes start a new log)."""
    root = tmp_path / "bookie"
    bookie = await gc_bookie(root, majorCompactionThreshold=0, minorCompactionThreshold=0)  # compacts nothing
    await write_and_checkpoint(bookie, [1], 200)  # ~4 logs
    await write_and_checkpoint(bookie, [2], 10)  # in the last (current) log
    logs = log_ids_on_disk(bookie)
    current = await storage(bookie).run_exclusive(the_dir(bookie).current_entry_log_id)
    assert len(logs) >= 4 and current == max(logs)
    bookie.start_gc(FakeLedgers([]))

    result = await bookie.gc.force()
    assert result.deleted_ledgers == 2 and result.compacted_entry_logs == 0
    assert result.deleted_entry_logs == len(logs) - 1
    assert log_ids_on_disk(bookie) == {current}, "the current log stays"
    await bookie.close()

    restarted = await gc_bookie(root)
    try:
        restarted.start_gc(FakeLedgers([]))
        assert (await restarted.gc.force()).deleted_entry_logs == 1
        assert log_ids_on_disk(restarted) == set()
    finally:
        await restarted.close()


async def test_compaction_moves_live_entries_and_updates_the_index(tmp_path: Path) -> None:
    """Goal: a compacted log's live entries are copied into newer logs, the index points at the
    copies, the usage rows follow them, the old logs are gone. Method: 24 ledgers interleaved
    in ~8 logs, every third kept (usage ~1/3), forced major compaction (threshold 0.5)."""
    root = tmp_path / "bookie"
    bookie = await gc_bookie(root)
    ledgers, live = range(24), [i for i in range(24) if i % 3 == 0]
    await write_and_checkpoint(bookie, ledgers, 20)
    await write_and_checkpoint(bookie, [100], 70)
    live.append(100)
    directory = the_dir(bookie)
    first_new_log = await storage(bookie).run_exclusive(directory.current_entry_log_id)
    before = {ledger_id: await asyncio.to_thread(_locations_of, directory, ledger_id) for ledger_id in live}
    bookie.start_gc(FakeLedgers(live))

    result = await bookie.gc.force()
    assert result.compaction == "major" and result.compacted_entry_logs >= 4 and not result.errors
    remaining = log_ids_on_disk(bookie)
    moved = 0
    for ledger_id in live:
        after = await asyncio.to_thread(_locations_of, directory, ledger_id)
        for old, new in zip(before[ledger_id], after, strict=True):
            if old >> 32 in remaining:
                assert new == old, f"ledger {ledger_id}: an entry of a log not compacted moved"
            else:
                assert new >> 32 >= first_new_log, f"ledger {ledger_id}: an entry was not moved to a new log"
                moved += 1
    assert moved == result.compacted_entries >= 160
    assert not {
        log_id
        for log_id in remaining
        if log_id < first_new_log and log_id not in {old >> 32 for locations in before.values() for old in locations}
    }, "dead logs are gone"
    await assert_ledgers_intact(bookie, live[:-1], 20)
    await assert_ledgers_intact(bookie, [100], 70)
    assert all(u.usage >= 0.5 for u in await usages(bookie)), "nothing left below the threshold"
    rows = await asyncio.to_thread(directory._log_metadata.live_bytes_by_log)
    assert all(log_id in remaining for log_id in rows), "the old logs' usage rows went with them"
    await bookie.close()


@pytest.mark.expect_error_log(r"checksum mismatch")
async def test_a_log_with_a_damaged_record_is_left_and_the_others_are_compacted(tmp_path: Path) -> None:
    """Goal: a live record failing its CRC in one log keeps that log (it must not go) but not
    the others: they are compacted in the same round (one damaged record stopped every later
    compaction of every dir, round after round). Method: as above; one payload byte of a live
    entry in the emptiest log flipped before a forced major compaction."""
    bookie = await gc_bookie(tmp_path / "bookie")
    await write_and_checkpoint(bookie, range(24), 20)
    await write_and_checkpoint(bookie, [100], 70)
    live = [i for i in range(24) if i % 3 == 0] + [100]
    bookie.start_gc(FakeLedgers(live))
    await bookie.gc.force(force_major=False)  # the other ledgers go; nothing is below the minor threshold
    candidates = logs_to_compact(await usages(bookie), 0.5)
    assert len(candidates) >= 4
    directory = the_dir(bookie)
    damaged = candidates[0].log_id
    ledger_id, _entry_id, location = (await asyncio.to_thread(directory.live_entries, damaged))[0]
    offset = split_location(location)[1] + RECORD_HEADER_SIZE + 10
    with open(entry_log_path(directory.directory, damaged), "r+b") as log_file:
        log_file.seek(offset)
        byte = log_file.read(1)
        log_file.seek(offset)
        log_file.write(bytes([byte[0] ^ 0xFF]))

    result = await bookie.gc.force()
    assert result.compacted_entry_logs == len(candidates) - 1
    assert len(result.errors) == 1 and f"entry log {damaged:x}: " in result.errors[0]
    assert damaged in log_ids_on_disk(bookie)
    intact = [ledger for ledger in live if ledger != ledger_id]
    await assert_ledgers_intact(bookie, [ledger for ledger in intact if ledger != 100], 20)
    await bookie.close()


def _locations_of(directory: SingleDirectoryDbLedgerStorage, ledger_id: int) -> list[int]:
    rows = directory._db.reader().execute("SELECT location FROM locations WHERE ledger_id = ?", (ledger_id,))
    return [row[0] for row in rows]


async def test_only_logs_below_the_due_thresholds_are_compacted(tmp_path: Path) -> None:
    """Logs about a third live: a forced minor compaction (threshold 0.2) leaves them, a forced
    major one (0.5) compacts them; logs above 0.5 stay in any case."""
    bookie = await gc_bookie(tmp_path / "bookie")
    await write_and_checkpoint(bookie, range(24), 20)
    await write_and_checkpoint(bookie, [100], 70)
    bookie.start_gc(FakeLedgers([i for i in range(24) if i % 3 == 0] + [100]))
    minor = await bookie.gc.force(force_major=False)
    assert minor.compaction == "minor" and minor.deleted_ledgers == 16
    before = await usages(bookie)
    third = [u.log_id for u in before if 0.2 <= u.usage < 0.5]
    assert len(third) >= 4 and minor.compacted_entry_logs == len([u for u in before if u.usage < 0.2]) == 0

    major = await bookie.gc.force()
    assert major.compaction == "major" and major.compacted_entry_logs == len(third)
    assert not set(third) & log_ids_on_disk(bookie)
    assert major.reclaimed_compaction_bytes > 0
    await bookie.close()


async def test_compaction_spares_an_entry_rewritten_meanwhile(tmp_path: Path) -> None:
    """The index update is a compare-and-set: an entry re-added (ledger recovery rewriting it)
    between compaction's read and its commit keeps the newer copy."""
    bookie = await gc_bookie(tmp_path / "bookie")
    await write_and_checkpoint(bookie, [1, 2], 40)
    await write_and_checkpoint(bookie, [100], 70)
    directory, db_storage = the_dir(bookie), storage(bookie)
    [old_log, *_] = sorted(log_ids_on_disk(bookie))
    live = await asyncio.to_thread(directory.live_entries, old_log)
    chunk = [
        (ledger_id, entry_id, location, await asyncio.to_thread(directory.read_at, location, ledger_id, entry_id))
        for ledger_id, entry_id, location in live[:5]
    ]
    rewritten = chunk[0]
    await add(bookie, rewritten[0], rewritten[1], b"rewritten by recovery", recovery=True)
    await db_storage.checkpoint()

    new_locations = await db_storage.run_exclusive(directory.write_compacted, chunk)
    moved, _ = await db_storage.run_exclusive(directory.commit_compacted, old_log, chunk, new_locations)
    assert moved == 4
    [(_, payload)] = await read_all(bookie, rewritten[0], rewritten[1], 1)
    assert payload == b"rewritten by recovery"
    await bookie.close()


async def test_a_read_that_looked_up_the_old_location_just_before_the_delete_succeeds(tmp_path: Path) -> None:
    """Goal: the read/compaction race. Method: read every entry once (the reader holds the old
    log's fd), compact, then make the index hand the next lookup the *old* location — as if
    it had been looked up just before the commit — and read: the log is gone, the read looks
    the entry up again and returns the same bytes."""
    bookie = await gc_bookie(tmp_path / "bookie")
    await write_and_checkpoint(bookie, range(6), 30)
    await write_and_checkpoint(bookie, [100], 70)
    directory = the_dir(bookie)
    await assert_ledgers_intact(bookie, [0], 30)
    stale = await asyncio.to_thread(_locations_of, directory, 0)
    bookie.start_gc(FakeLedgers([0, 100]))
    result = await bookie.gc.force()
    assert result.compacted_entry_logs >= 1 and stale[0] >> 32 not in log_ids_on_disk(bookie)

    real_get = directory._locations.get
    handed_out: list[int] = []

    def get_stale_once(ledger_id: int, entry_id: int) -> int | None:
        if not handed_out:
            handed_out.append(stale[entry_id])
            return stale[entry_id]
        return real_get(ledger_id, entry_id)

    directory._locations.get = get_stale_once
    [(_, payload)] = await read_all(bookie, 0, 0, 1)
    assert handed_out and payload == payload_for(0, 0, ENTRY_BYTES)
    directory._locations.get = real_get
    await bookie.close()


async def test_gc_runs_by_itself_every_gc_wait_time(tmp_path: Path) -> None:
    from tests.support.process import wait_for

    bookie = await gc_bookie(tmp_path / "bookie", gcWaitTime=50)
    await write_and_checkpoint(bookie, [1, 2], 5)
    bookie.start_gc(FakeLedgers([2]))
    await wait_for(lambda: bookie.storage.ledger(1) is None, timeout_s=10, message="ledger 1 never collected")
    await assert_ledgers_intact(bookie, [2], 5)
    await bookie.close()
