"""DirectAppender: O_DIRECT appends keep the file's bytes exactly as buffered appends would."""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from minipulsar.bookie.direct_io import BLOCK_BYTES, HUGE_PAGE_BYTES, DirectAppender, StagingBuffers, open_direct


@contextlib.contextmanager
def _direct_appender(path: Path, position: int, **kwargs) -> Iterator[DirectAppender]:
    """An appender at ``position`` of ``path`` (skips where the file system refuses O_DIRECT)."""
    read_fd = os.open(path, os.O_RDWR)
    direct_fd = open_direct(path)
    if direct_fd < 0:
        os.close(read_fd)
        pytest.skip(f"{path.parent} does not do O_DIRECT")
    appender = DirectAppender(direct_fd, position, read_fd, **kwargs)
    try:
        yield appender
    finally:
        appender.close()
        os.close(read_fd)


def _chunks(seed: int, count: int, largest: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(rng.randint(1, largest)) for _ in range(count)]


@pytest.mark.parametrize("sync", [False, True])
def test_synchronous_appends_leave_exactly_the_bytes_then_zeros_to_the_block_end(tmp_path: Path, sync: bool) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"HEADER-16-BYTES!")
    expected = bytearray(b"HEADER-16-BYTES!")
    with _direct_appender(path, 16) as appender:
        for chunk in _chunks(1, 60, 9000):  # odd sizes: most appends rewrite a partial block
            appender.append([chunk[: len(chunk) // 2], chunk[len(chunk) // 2 :]], sync=sync)
            expected += chunk
            assert appender.position == len(expected)
    data = path.read_bytes()
    assert data[: len(expected)] == expected
    assert len(data) % BLOCK_BYTES == 0 and data[len(expected) :] == bytes(len(data) - len(expected))


def test_an_append_bigger_than_the_staging_buffer_goes_out_in_several_writes(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"x" * 100)
    big = os.urandom(70_000)
    with _direct_appender(path, 100, staging_bytes=16 * 1024) as appender:
        appender.append([big[:30_000], big[30_000:]], sync=True)
        appender.append([b"tail"], sync=True)
        assert path.read_bytes()[: 100 + 70_004] == b"x" * 100 + big + b"tail"


def test_appending_resumes_after_bytes_written_through_the_page_cache(tmp_path: Path) -> None:
    """The partial last block is read back, so an existing file (written buffered) goes on."""
    path = tmp_path / "log"
    existing = os.urandom(3 * BLOCK_BYTES + 123)
    path.write_bytes(existing)
    with _direct_appender(path, len(existing)) as appender:
        appender.append([b"more"], sync=True)
        assert path.read_bytes()[: len(existing) + 4] == existing + b"more"


def test_background_writes_hand_whole_chunks_to_the_writers_and_flush_writes_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"H" * 16)
    expected = bytearray(b"H" * 16)
    with _direct_appender(path, 16, background_writes=True, name="test-writer") as appender:
        for round_ in range(3):  # several flushes, each followed by more appends
            for chunk in _chunks(round_, 200, 70_000):
                appender.append([chunk])
                expected += chunk
            assert os.path.getsize(path) > 16, "chunks went out before the flush"
            appender.flush()
            assert path.read_bytes()[: len(expected)] == expected


def test_a_failed_background_write_is_raised_by_the_flush(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"")
    probe = open_direct(path)
    if probe < 0:
        pytest.skip("no O_DIRECT here")
    os.close(probe)
    read_fd = os.open(path, os.O_RDONLY)
    bad_fd = os.open(path, os.O_RDONLY | os.O_DIRECT)  # writes fail with EBADF
    appender = DirectAppender(bad_fd, 0, read_fd, background_writes=True, name="test-writer")
    try:
        appender.append([os.urandom(3 * 1024 * 1024)])
        with pytest.raises(OSError):
            appender.flush()
    finally:
        appender.close()
        os.close(read_fd)


def test_open_direct_answers_minus_one_where_the_file_system_refuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tmpfs and some FUSE mounts refuse O_DIRECT with EINVAL: the caller then stays buffered."""
    import errno

    def refuse(path, flags, *args):
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(os, "open", refuse)
    assert open_direct(tmp_path / "log") == -1


def test_the_next_appender_writes_through_the_buffer_the_last_one_gave_back(tmp_path: Path) -> None:
    """Goal: appenders that follow one another (a journal's segments, a ledger dir's entry
    logs) reuse one staging buffer, and what the previous file left in it never reaches the
    next file. Method: three files appended in turn through one StagingBuffers; each file
    must hold exactly its own bytes, then zeros to the block end."""
    staging = StagingBuffers(keep=1)
    for index, fill in enumerate([b"a", b"b", b"c"]):
        path = tmp_path / f"log-{index}"
        path.write_bytes(b"H" * 10)
        data = fill * (30_000 - 9_000 * index)  # each shorter than the last: stale bytes would show
        with _direct_appender(path, 10, staging_bytes=64 * 1024, staging=staging) as appender:
            appender.append([data], sync=True)
        written = path.read_bytes()
        assert written[: 10 + len(data)] == b"H" * 10 + data
        assert len(written) % BLOCK_BYTES == 0 and written[10 + len(data) :] == bytes(len(written) - 10 - len(data))
    assert staging.mapped == 1


def test_buffers_given_back_beyond_keep_are_unmapped(tmp_path: Path) -> None:
    staging = StagingBuffers(keep=1)
    first, second = staging.take(BLOCK_BYTES), staging.take(BLOCK_BYTES)
    staging.give(first)
    staging.give(second)
    assert second.closed and not first.closed
    assert staging.take(BLOCK_BYTES) is first and staging.mapped == 2
    staging.give(first)
    staging.close()
    assert first.closed


@pytest.mark.skipif(not hasattr(mmap, "MADV_HUGEPAGE"), reason="no transparent huge pages here")
def test_staging_buffers_of_whole_huge_pages_are_private_and_advised_huge() -> None:
    """Goal: staging buffers of whole 2 MiB pages may be backed by transparent huge pages (one
    request per multi-MiB direct write), smaller ones stay plain. Method: the kernel's flags of
    each buffer's mapping (/proc/self/smaps VmFlags: ``hg`` = MADV_HUGEPAGE, ``sh`` = shared)."""
    staging = StagingBuffers(keep=0)
    huge, small = staging.take(HUGE_PAGE_BYTES), staging.take(16 * BLOCK_BYTES)
    try:
        huge_flags, small_flags = _vm_flags(huge), _vm_flags(small)
        assert "hg" in huge_flags and "sh" not in huge_flags
        assert "hg" not in small_flags
    finally:
        staging.give(huge)
        staging.give(small)


def _vm_flags(buffer: mmap.mmap) -> set[str]:
    """The VmFlags of the mapping holding ``buffer``'s first byte."""
    address = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and ":" not in head:
            start, end = (int(part, 16) for part in head.split("-"))
            inside = start <= address < end
        elif inside and head == "VmFlags:":
            return set(line.split()[1:])
    raise AssertionError(f"no mapping holds {address:#x}")
