"""faultfs's durability model on a plain temp dir (no FUSE): what a power cut keeps.

tests/faults/test_faultfs.py checks the same through a real mount."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.support.faultfs import damage
from tests.support.faultfs.model import GRAVEYARD, DurabilityModel


@pytest.fixture
def model(tmp_path: Path) -> DurabilityModel:
    backing = tmp_path / "backing"
    backing.mkdir()
    return DurabilityModel(str(backing))


def open_new(model: DurabilityModel, path: str, dir_synced: bool = True) -> int:
    """Create ``path`` as the FUSE layer does (and fsync its directory when ``dir_synced``)."""
    fd = os.open(model.real(path), os.O_RDWR | os.O_CREAT, 0o644)
    model.created(path)
    if dir_synced:
        model.fsyncdir(os.path.dirname(path))
    return fd


def test_a_write_not_synced_is_gone_after_a_cut_and_a_synced_one_stays(model: DurabilityModel) -> None:
    fd = open_new(model, "/f")
    model.write(fd, b"durable", 0)
    model.fsync(fd)
    model.write(fd, b"-lost", 7)
    model.write(fd, b"D", 0)  # an overwrite of synced bytes, not synced
    report = model.power_cut()
    os.close(fd)
    assert Path(model.real("/f")).read_bytes() == b"durable"
    assert (report.files_reverted, report.bytes_restored, report.bytes_dropped) == (1, 1, 5)


def test_overlapping_unsynced_writes_revert_to_the_synced_bytes(model: DurabilityModel) -> None:
    fd = open_new(model, "/f")
    model.write(fd, bytes(range(100)), 0)
    model.fsync(fd)
    for offset in (10, 15, 5, 90):
        model.write(fd, b"x" * 20, offset)
    model.truncate(fd, 50)
    model.truncate(fd, 200)
    model.power_cut()
    os.close(fd)
    assert Path(model.real("/f")).read_bytes() == bytes(range(100))


def test_a_truncate_is_durable_once_synced(model: DurabilityModel) -> None:
    fd = open_new(model, "/f")
    model.write(fd, b"0123456789", 0)
    model.fsync(fd)
    model.truncate(fd, 4)
    model.fsync(fd)
    model.power_cut()
    os.close(fd)
    assert Path(model.real("/f")).read_bytes() == b"0123"


def test_a_created_file_needs_its_directory_synced(model: DurabilityModel) -> None:
    fd = open_new(model, "/kept")
    os.close(fd)
    fd = open_new(model, "/lost", dir_synced=False)
    model.write(fd, b"data synced, name not", 0)
    model.fsync(fd)  # a file's fsync does not make its name durable
    os.close(fd)
    model.power_cut()
    assert sorted(os.listdir(model.root)) == ["kept"]


def test_a_new_directory_needs_its_parent_synced(model: DurabilityModel) -> None:
    os.mkdir(model.real("/d"))
    model.created("/d", "mkdir")
    fd = open_new(model, "/d/f")  # /d's own entries are synced, / is not
    os.close(fd)
    model.power_cut()
    assert os.listdir(model.root) == []


def test_an_unlink_not_synced_comes_back_with_its_durable_data(model: DurabilityModel) -> None:
    fd = open_new(model, "/f")
    model.write(fd, b"durable", 0)
    model.fsync(fd)
    model.write(fd, b"+lost", 7)
    model.unlink("/f")
    assert not os.path.exists(model.real("/f"))
    model.write(fd, b"++", 12)  # still open: writes go to the unlinked inode
    model.power_cut()
    os.close(fd)
    assert Path(model.real("/f")).read_bytes() == b"durable"
    assert not os.path.exists(os.path.join(model.root, GRAVEYARD))


def test_a_synced_unlink_stays(model: DurabilityModel) -> None:
    os.close(open_new(model, "/f"))
    model.unlink("/f")
    model.fsyncdir("/")
    assert os.listdir(model.graveyard) == []
    model.power_cut()
    assert os.listdir(model.root) == []


def test_a_rename_over_a_file_reverts_until_the_directory_is_synced(model: DurabilityModel) -> None:
    for name, body in (("/old", b"old"), ("/new.tmp", b"new")):
        fd = open_new(model, name)
        model.write(fd, body, 0)
        model.fsync(fd)
        os.close(fd)
    model.rename("/new.tmp", "/old")
    assert Path(model.real("/old")).read_bytes() == b"new"
    model.power_cut()
    assert Path(model.real("/old")).read_bytes() == b"old"
    assert Path(model.real("/new.tmp")).read_bytes() == b"new"


def test_a_rename_is_durable_once_both_directories_are_synced(model: DurabilityModel) -> None:
    for path in ("/a", "/b"):
        os.mkdir(model.real(path))
        model.created(path, "mkdir")
    model.fsyncdir("/")
    os.close(open_new(model, "/a/f"))
    model.rename("/a/f", "/b/f")
    model.fsyncdir("/b")
    assert model.pending()["entries"] == 1  # /a still holds the old name after a cut
    model.fsyncdir("/a")
    model.power_cut()
    assert (os.listdir(model.real("/a")), os.listdir(model.real("/b"))) == ([], ["f"])


def test_changes_revert_newest_first(model: DurabilityModel) -> None:
    fd = open_new(model, "/x")
    model.write(fd, b"x", 0)
    model.fsync(fd)
    os.close(fd)
    model.rename("/x", "/y")
    os.close(open_new(model, "/x", dir_synced=False))
    model.unlink("/y")
    report = model.power_cut()
    assert report.unrevertible == []
    assert sorted(os.listdir(model.root)) == ["x"]
    assert Path(model.real("/x")).read_bytes() == b"x"


def test_tear_and_flip_act_on_the_end_of_the_data(tmp_path: Path) -> None:
    preallocated = tmp_path / "segment"
    preallocated.write_bytes(b"a" * 100 + bytes(1000))
    assert damage.data_end(preallocated) == 100
    assert damage.tear_tail(preallocated, 30) == (70, 100)
    assert preallocated.read_bytes() == b"a" * 70 + bytes(1030)
    grown = tmp_path / "log"
    grown.write_bytes(b"b" * 100)
    damage.tear_tail(grown, 30)
    assert grown.read_bytes() == b"b" * 70
    [offset] = damage.flip_bits(grown, random.Random(1), count=1, window_bytes=10)
    assert 60 <= offset < 70 and grown.read_bytes()[offset] != ord("b")


def test_a_partial_cut_keeps_each_unsynced_page_whole_or_not_at_all(model: DurabilityModel) -> None:
    page = 4096
    fd = open_new(model, "/f")
    model.write(fd, b"o" * (8 * page), 0)
    model.fsync(fd)
    for number in range(8):  # overwrite every page, then grow by 8 more
        model.write(fd, b"n" * page, number * page)
    model.write(fd, b"g" * (8 * page), 8 * page)
    report = model.power_cut(keep_probability=0.5, rng=random.Random(3))
    os.close(fd)
    data = Path(model.real("/f")).read_bytes()
    pages = [data[i : i + page] for i in range(0, len(data), page)]
    assert all(p in (b"o" * page, b"n" * page) for p in pages[:8])
    assert all(p in (b"g" * page, bytes(page)) for p in pages[8:])
    assert len(data) % page == 0 and 8 * page <= len(data) <= 16 * page
    assert 0 < sum(p == b"n" * page for p in pages[:8]) < 8, "seed 3 keeps some pages, not all"
    assert report.files_reverted == 1


def test_a_partial_cut_keeps_a_prefix_of_the_entry_changes(model: DurabilityModel) -> None:
    for name in "abcdef":
        os.close(open_new(model, f"/{name}", dir_synced=False))
    model.power_cut(keep_probability=0.6, rng=random.Random(5))
    names = sorted(os.listdir(model.root))
    assert names == sorted("abcdef"[: len(names)]), "kept changes are a prefix"
