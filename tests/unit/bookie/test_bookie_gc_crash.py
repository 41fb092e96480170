"""A crash in the middle of garbage collection loses nothing. Each test stops a forced GC round
right after one of its steps (the next step raises), takes a crash image (a copy of every dir:
what a SIGKILL at that instant leaves, see ``crash_image``), and starts a bookie on it: every
live entry reads back byte-identical, and the next GC round finishes the job and gives the
space back.

Steps, in order: deleted ledgers leave memory | their index rows go || compaction: copies
written and fsynced | the index points at the copies | the old log's usage rows go | its file
goes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from minipulsar.bookie.storage.single_directory import SingleDirectoryDbLedgerStorage
from tests.support.bookie_gc import (
    FakeLedgers,
    assert_ledgers_gone,
    assert_ledgers_intact,
    entry_log_bytes,
    gc_bookie,
    the_dir,
    usages,
    write_and_checkpoint,
)
from tests.support.bookie_storage import crash_image, storage


class SimulatedCrash(OSError):
    """What the step that follows the one under test raises: an I/O error stops a GC step."""


STOPS = {
    # the step that raises: so the image holds everything up to the step before it
    "after the deleted ledgers left memory": "delete_ledgers_from_index",
    "after the copies were written": "commit_compacted",
    "after the index moved the entries": "forget_entry_log",
    "after the old log's usage rows went": "remove_entry_log",
}

LEDGERS = range(24)
LIVE = [i for i in LEDGERS if i % 3 == 0]


@pytest.mark.expect_error_log(r"major compaction failed")
@pytest.mark.parametrize("stop", list(STOPS), ids=[STOPS[s] for s in STOPS])
async def test_a_crash_between_gc_steps_loses_nothing(tmp_path: Path, stop: str) -> None:
    root = tmp_path / "bookie"
    bookie = await gc_bookie(root)
    await write_and_checkpoint(bookie, LEDGERS, 20)
    await write_and_checkpoint(bookie, [100], 70)
    ledgers = FakeLedgers([*LIVE, 100])
    before = entry_log_bytes(root)
    directory = the_dir(bookie)
    _raise_on(directory, STOPS[stop])
    bookie.start_gc(ledgers)
    result = await bookie.gc.force()
    assert any("SimulatedCrash" in error for error in result.errors), result
    image = crash_image(root)
    await bookie.close()

    restarted = await gc_bookie(image)
    try:
        await assert_ledgers_intact(restarted, LIVE, 20)
        await assert_ledgers_intact(restarted, [100], 70)
        restarted.start_gc(ledgers)
        finished = await restarted.gc.force()
        assert not finished.errors, finished
        await assert_ledgers_gone(restarted, set(LEDGERS) - set(LIVE))
        await assert_ledgers_intact(restarted, LIVE, 20)
        await assert_ledgers_intact(restarted, [100], 70)
        assert all(u.usage >= 0.5 for u in await usages(restarted)), "no dead or sparse log left behind"
        assert entry_log_bytes(image) < before * 0.6
        current = await storage(restarted).run_exclusive(the_dir(restarted).current_entry_log_id)
        rows = await asyncio.to_thread(_usage_row_logs, the_dir(restarted))
        on_disk = {int(p.stem, 16) for p in the_dir(restarted).directory.glob("*.log")}
        assert {log_id for log_id in rows if log_id < current} <= on_disk, "no usage rows of deleted logs"
    finally:
        await restarted.close()


def _raise_on(directory: SingleDirectoryDbLedgerStorage, method: str) -> None:
    """Make ``directory.<method>`` raise — once compaction copied something, for the steps that
    deleting a dead log shares with compaction (so that the stop lands inside a compaction)."""
    original, write_compacted = getattr(directory, method), directory.write_compacted
    copied: list[int] = []

    def counting_write_compacted(entries):
        copied.append(len(entries))
        return write_compacted(entries)

    def crash(*args, **kwargs):
        if method in ("forget_entry_log", "remove_entry_log") and not copied:
            return original(*args, **kwargs)
        raise SimulatedCrash(method)

    directory.write_compacted = counting_write_compacted
    setattr(directory, method, crash)


def _usage_row_logs(directory: SingleDirectoryDbLedgerStorage) -> set[int]:
    return {row[0] for row in directory._db.reader().execute("SELECT DISTINCT log_id FROM entry_log_ledgers")}
