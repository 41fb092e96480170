"""Goal: every data sync goes through :func:`minipulsar.durable_file.sync_data`, which makes an
``fdatasync`` where the platform has one and an ``fsync`` where it has none (macOS).

Method: record the calls ``sync_data`` makes with ``os.fdatasync`` present and removed; walk
the sources with ``ast`` for any other ``os.fdatasync`` call."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

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
