"""Goal: each ledger dir is writable, full or failed as BookKeeper's LedgerDirsManager keeps
them (bookie/storage/ledger_dirs_manager.py): ENOSPC is full (until a flush succeeds and the
monitor agrees), any other I/O error failed for good, and the listener hears each flip of
"some dir writable" once."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from minipulsar.bookie.storage.ledger_dirs_manager import LedgerDirsManager, is_out_of_space
from minipulsar.cli.supervisor import describe_exit

A, B = Path("/a"), Path("/b")


def manager_with_flips() -> tuple[LedgerDirsManager, list[bool]]:
    manager = LedgerDirsManager([A, B])
    flips: list[bool] = []
    manager.listener = flips.append
    return manager, flips


@pytest.mark.expect_error_log(r"is out of space")
def test_out_of_space_is_full_until_a_flush_succeeds_and_the_monitor_agrees() -> None:
    manager, flips = manager_with_flips()
    manager.out_of_space(0, OSError(errno.ENOSPC, "No space left on device"))
    assert manager.writable_flags == [False, True] and manager.full == {A} and manager.writable
    manager.set_full([])  # the monitor misjudges the disk: still full
    assert manager.full == {A}
    manager.flushed(0)
    assert manager.writable_flags == [True, True] and manager.full == frozenset()
    manager.set_full([A])  # the monitor's own verdict
    manager.flushed(0)
    assert manager.full == {A}, "a flush does not overrule the monitor"
    assert flips == []


@pytest.mark.expect_error_log(r"ledger dir \S+ failed")
def test_a_failed_dir_stays_failed_and_no_writable_dir_is_told_once() -> None:
    manager, flips = manager_with_flips()
    failures: list[tuple[Path, str]] = []
    manager.failure_listener = lambda directory, why: failures.append((directory, why))
    manager.dir_failed(1, OSError(errno.EIO, "Input/output error"))
    manager.dir_failed(1, OSError(errno.EIO, "Input/output error"))  # once
    assert manager.state(B) == "failed" and manager.healthy_dirs == [A]
    manager.set_full([A])
    assert not manager.writable and flips == [False]
    manager.set_full([])
    manager.flushed(1)
    assert manager.writable_flags == [True, False] and flips == [False, True]
    assert [d for d, _ in failures] == [B] and "Input/output" in failures[0][1]
    assert manager.states() == {str(A): "writable", str(B): "failed"}


def test_out_of_space_is_told_apart_from_other_failures() -> None:
    assert is_out_of_space(OSError(errno.ENOSPC, "full"))
    assert is_out_of_space(OSError(errno.EDQUOT, "quota"))
    assert not is_out_of_space(OSError(errno.EIO, "eio"))
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = 13  # type: ignore[attr-defined]
    io = sqlite3.OperationalError("disk I/O error")
    io.sqlite_errorcode = 778  # type: ignore[attr-defined]  # SQLITE_IOERR_WRITE
    assert is_out_of_space(full) and not is_out_of_space(io)


def test_the_standalone_report_names_bookkeepers_exit_code() -> None:
    assert "BOOKIE_EXCEPTION" in describe_exit(5)
