"""Checkpoints and the lastMark file: round trip, max over dirs, atomic replacement."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minipulsar import durable_file
from minipulsar.bookie.journal.format import LogMark
from minipulsar.bookie.storage.checkpoint import EMPTY_CHECKPOINT, Checkpoint, LastMarkFile, read_last_mark


def test_a_checkpoint_reads_back_as_written(tmp_path: Path) -> None:
    file = LastMarkFile(tmp_path)
    assert file.read() == EMPTY_CHECKPOINT
    written = Checkpoint((LogMark(3, 4096), None, LogMark(1, 16)))
    file.write(written)
    assert file.read() == written
    assert written.mark(1) is None and written.mark(7) is None


def test_the_latest_mark_per_journal_wins_across_ledger_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for directory in dirs:
        directory.mkdir()
    LastMarkFile(dirs[0]).write(Checkpoint((LogMark(2, 100), LogMark(5, 16))))
    LastMarkFile(dirs[1]).write(Checkpoint((LogMark(2, 900), LogMark(4, 5000), LogMark(1, 20))))
    assert read_last_mark(dirs) == Checkpoint((LogMark(2, 900), LogMark(5, 16), LogMark(1, 20)))


def test_a_crash_while_writing_leaves_the_previous_checkpoint(tmp_path: Path, monkeypatch) -> None:
    """Goal: the file is replaced atomically. Method: fail the rename (as a crash right before
    it would); the old checkpoint is still read, and the next write succeeds."""
    file = LastMarkFile(tmp_path)
    old = Checkpoint((LogMark(1, 100),))
    file.write(old)

    def crash(src, dst):
        raise OSError("killed before the rename")

    monkeypatch.setattr(durable_file.os, "replace", crash)
    with pytest.raises(OSError):
        file.write(Checkpoint((LogMark(2, 200),)))
    assert (tmp_path / "lastMark.tmp").exists()
    assert file.read() == old
    monkeypatch.undo()
    file.write(Checkpoint((LogMark(3, 300),)))
    assert file.read() == Checkpoint((LogMark(3, 300),))
    assert not (tmp_path / "lastMark.tmp").exists()


@pytest.mark.expect_error_log(r"lastMark is unreadable")
def test_a_garbage_file_means_no_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "lastMark").write_bytes(os.urandom(40))
    assert LastMarkFile(tmp_path).read() == EMPTY_CHECKPOINT


def test_max_is_per_journal() -> None:
    a = Checkpoint((LogMark(1, 50), None))
    b = Checkpoint((LogMark(1, 40), LogMark(2, 16), LogMark(3, 16)))
    assert a.max(b) == Checkpoint((LogMark(1, 50), LogMark(2, 16), LogMark(3, 16)))


async def test_under_load_the_last_mark_is_written_at_most_every_interval_and_always_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: flushes the write cache asks for (a half full) write the lastMark files at most
    every LAST_MARK_MIN_INTERVAL_S; an explicit checkpoint always writes them, and nothing is
    lost either way. Method: a 1 MB write cache filled many times over within the interval
    (made long), counting lastMark writes; then checkpoint() and a restart."""
    from minipulsar.bookie.storage import db_ledger_storage
    from minipulsar.bookie.storage.single_directory import SingleDirectoryDbLedgerStorage
    from tests.support.bookie_storage import add_many, crash_image, read_all, started_bookie, storage

    monkeypatch.setattr(db_ledger_storage, "LAST_MARK_MIN_INTERVAL_S", 3600.0)
    writes: list[Checkpoint] = []
    original = SingleDirectoryDbLedgerStorage.write_last_mark

    def counting(self, checkpoint):
        writes.append(checkpoint)
        original(self, checkpoint)

    monkeypatch.setattr(SingleDirectoryDbLedgerStorage, "write_last_mark", counting)
    root = tmp_path / "bookie"
    bookie = await started_bookie(root, dbStorage_writeCacheMaxSizeMb=2)
    try:
        flushes = checkpoints_completed()
        await add_many(bookie, [0, 1], range(400), size=10_000)  # ~8 MB: several flushes of full halves
        assert checkpoints_completed() - flushes >= 3
        assert len(writes) <= 2, "the first flush may write it (nothing persisted yet): then none within the interval"
        before = len(writes)
        completed = await storage(bookie).checkpoint()
        assert len(writes) > before and writes[-1] == completed
        image = crash_image(root)
    finally:
        await bookie.close()
    restarted = await started_bookie(image)
    try:
        for ledger_id in (0, 1):
            assert [e for e, _ in await read_all(restarted, ledger_id, 0, 400)] == list(range(400))
    finally:
        await restarted.close()


def checkpoints_completed() -> int:
    from minipulsar.bookie.storage import metrics as storage_metrics

    return int(storage_metrics.CHECKPOINTS._value.get())
