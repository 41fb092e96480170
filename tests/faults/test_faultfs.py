"""faultfs through a real FUSE mount (its own process): a power cut keeps exactly what was
synced, as tests/support/faultfs/model.py models it, and the syscalls the bookie uses to sync
(``fdatasync``, ``pwritev(RWF_DSYNC)``, a directory's ``fsync``, ``O_DIRECT`` writes) reach it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from minipulsar.durable_file import make_dirs, write_atomically
from tests.support.faultfs import FaultFs, mount, skip_unless_available


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[FaultFs]:
    skip_unless_available()
    with mount(tmp_path / "backing", tmp_path / "mnt") as mounted:
        yield mounted


def sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_unsynced_writes_are_gone_after_a_cut_synced_ones_stay(fs: FaultFs) -> None:
    mnt = fs.mountpoint
    fd = os.open(mnt / "f", os.O_RDWR | os.O_CREAT, 0o644)
    sync_dir(mnt)
    os.write(fd, b"fdatasync'd")
    os.fdatasync(fd)
    os.pwritev(fd, [b" dsync"], 11, os.RWF_DSYNC)
    os.pwrite(fd, b" lost", 17)
    report = fs.power_cut()
    with pytest.raises(OSError):
        os.listdir(mnt)
    os.close(fd)
    fs.unmount()
    assert (fs.backing / "f").read_bytes() == b"fdatasync'd dsync"
    assert report["bytes_dropped"] == 5


def test_o_direct_writes_count_once_synced(fs: FaultFs) -> None:
    path = fs.mountpoint / "direct"
    path.write_bytes(b"")
    sync_dir(fs.mountpoint)
    fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    try:
        import mmap

        block = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT wants
        block.write(b"d" * 4096)
        os.pwrite(fd, block, 0)
        os.fdatasync(fd)
        os.pwrite(fd, block, 4096)
    finally:
        os.close(fd)
    fs.power_cut()
    fs.unmount()
    assert (fs.backing / "direct").read_bytes() == b"d" * 4096


def test_a_rename_stays_only_once_its_directory_is_synced(fs: FaultFs) -> None:
    mnt = fs.mountpoint
    (mnt / "d").mkdir()
    sync_dir(mnt)
    for name in ("a", "b"):
        fd = os.open(mnt / "d" / f"{name}.tmp", os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, name.encode())
        os.fsync(fd)
        os.close(fd)
    sync_dir(mnt / "d")
    os.rename(mnt / "d" / "a.tmp", mnt / "d" / "a")
    sync_dir(mnt / "d")
    os.rename(mnt / "d" / "b.tmp", mnt / "d" / "b")
    (mnt / "d" / "a").unlink()  # not synced: comes back
    assert fs.pending()["entries"] == 2
    fs.power_cut()
    fs.unmount()
    assert sorted(p.name for p in (fs.backing / "d").iterdir()) == ["a", "b.tmp"]
    assert (fs.backing / "d" / "a").read_bytes() == b"a"


def test_a_file_created_without_a_directory_sync_is_gone(fs: FaultFs) -> None:
    fd = os.open(fs.mountpoint / "new", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"synced data, unsynced name")
    os.fsync(fd)
    os.close(fd)
    fs.power_cut()
    fs.unmount()
    assert list(fs.backing.iterdir()) == []


def test_make_dirs_survives_a_cut_where_mkdir_p_does_not(fs: FaultFs) -> None:
    """The bookie creates its dirs with make_dirs: a cut right after loses none of them (a
    plain ``mkdir -p`` lost the bookie's whole tree, cookie and journal included)."""
    make_dirs(fs.mountpoint / "durable" / "current")
    (fs.mountpoint / "plain" / "current").mkdir(parents=True)
    for directory in ("durable", "plain"):
        write_atomically(fs.mountpoint / directory / "current" / "VERSION", b"cookie")
    fs.power_cut()
    fs.unmount()
    assert [p.name for p in fs.backing.iterdir()] == ["durable"]
    assert (fs.backing / "durable" / "current" / "VERSION").read_bytes() == b"cookie"
