"""Goal: every data sync goes through :func:`minipulsar.durable_file.sync_data`, which makes an
``fdatasync`` where the platform has one and an ``fsync`` where it has none (macOS).

Method: record the calls ``sync_data`` makes with ``os.fdatasync`` present and removed; walk
the sources with ``ast`` for any other ``os.fdatasync`` call. Likewise every directory the
bookie creates goes through :func:`~minipulsar.durable_file.make_dirs`, which fsyncs each new
one into its parent."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from minipulsar import durable_file
from minipulsar.durable_file import sync_data

ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("minipulsar", "bookie", "broker", "client", "bench")
"""Where production and bench code lives (``minipulsar/bookie`` etc. are links to the folders)."""


def record(monkeypatch: pytest.MonkeyPatch, name: str, calls: list[tuple[str, int]]) -> None:
    """Replace ``os.<name>`` by a wrapper that appends ``(name, fd)`` to ``calls``."""
    real = getattr(os, name)

    def wrapper(fd: int) -> None:
        calls.append((name, fd))
        real(fd)

    monkeypatch.setattr(os, name, wrapper)


def test_sync_data_makes_an_fdatasync_where_there_is_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not hasattr(os, "fdatasync"):
        pytest.skip("this platform has no fdatasync")
    calls: list[tuple[str, int]] = []
    record(monkeypatch, "fdatasync", calls)
    record(monkeypatch, "fsync", calls)
    fd = os.open(tmp_path / "data", os.O_WRONLY | os.O_CREAT)
    try:
        os.write(fd, b"entry")
        sync_data(fd)
    finally:
        os.close(fd)
    assert calls == [("fdatasync", fd)]


def test_sync_data_makes_an_fsync_where_there_is_no_fdatasync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int]] = []
    monkeypatch.delattr(os, "fdatasync", raising=False)
    record(monkeypatch, "fsync", calls)
    fd = os.open(tmp_path / "data", os.O_WRONLY | os.O_CREAT)
    try:
        os.write(fd, b"entry")
        sync_data(fd)
    finally:
        os.close(fd)
    assert calls == [("fsync", fd)]


def fdatasync_calls(path: Path) -> list[int]:
    """Line numbers of ``os.fdatasync`` references in the file at ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "fdatasync"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    ]


def test_no_code_but_sync_data_calls_os_fdatasync() -> None:
    own = ROOT / "minipulsar" / "durable_file.py"
    found = {
        f"{path.relative_to(ROOT)}:{line}"
        for folder in SOURCE_DIRS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.resolve() == path and path != own  # each file once, from its real folder
        for line in fdatasync_calls(path)
    }
    assert not found, f"call minipulsar.durable_file.sync_data instead of os.fdatasync at {sorted(found)}"


def test_make_dirs_syncs_each_new_directory_into_its_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[Path] = []
    monkeypatch.setattr(durable_file, "fsync_directory", synced.append)
    (tmp_path / "a").mkdir()
    durable_file.make_dirs(tmp_path / "a" / "b" / "c")
    assert (tmp_path / "a" / "b" / "c").is_dir()
    assert synced == [tmp_path / "a", tmp_path / "a" / "b"], "parents first, each once; existing dirs untouched"
    durable_file.make_dirs(tmp_path / "a" / "b" / "c")
    assert len(synced) == 2, "nothing to create, nothing to sync"


def mkdir_calls(path: Path) -> list[int]:
    """Line numbers of ``<path>.mkdir(...)``, ``os.mkdir`` and ``os.makedirs`` calls in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("mkdir", "makedirs")
    ]


def test_the_bookie_makes_its_directories_durably() -> None:
    """A directory whose entry was never fsynced into its parent is lost with everything in
    it on power loss (tests/faults/test_power_loss.py found the bookie's whole tree gone):
    the bookie creates directories with make_dirs only."""
    found = {
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "bookie").rglob("*.py"))
        for line in mkdir_calls(path)
    }
    assert not found, f"use minipulsar.durable_file.make_dirs at {sorted(found)}"
