"""Checkpoints and the lastMark file: round trip, max over dirs, atomic replacement."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bookie.journal_format import LogMark
from bookie.storage import checkpoint as checkpoint_module
from bookie.storage.checkpoint import EMPTY_CHECKPOINT, Checkpoint, LastMarkFile, read_last_mark


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

    monkeypatch.setattr(checkpoint_module.os, "replace", crash)
    with pytest.raises(OSError):
        file.write(Checkpoint((LogMark(2, 200),)))
    assert (tmp_path / "lastMark.tmp").exists()
    assert file.read() == old
    monkeypatch.undo()
    file.write(Checkpoint((LogMark(3, 300),)))
    assert file.read() == Checkpoint((LogMark(3, 300),))
    assert not (tmp_path / "lastMark.tmp").exists()


def test_a_garbage_file_means_no_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "lastMark").write_bytes(os.urandom(40))
    assert LastMarkFile(tmp_path).read() == EMPTY_CHECKPOINT


def test_max_is_per_journal() -> None:
    a = Checkpoint((LogMark(1, 50), None))
    b = Checkpoint((LogMark(1, 40), LogMark(2, 16), LogMark(3, 16)))
    assert a.max(b) == Checkpoint((LogMark(1, 50), LogMark(2, 16), LogMark(3, 16)))
