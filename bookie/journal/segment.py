"""One journal segment file: scanning it, appending to it (:class:`SegmentWriter`), preparing
it ahead of the writer (:class:`Preallocator`), and the recycled files reused as segments.

Blocking file I/O only: every function here runs on the journal's writer thread, its helper
threads or, at start, a worker thread, never on the event loop.

Invariants of :class:`SegmentWriter`:
- ``position`` is the end of the valid records; every byte from ``position`` to the end of
  the file reads as zero (preallocated, or truncated and preallocated again when the segment
  is reopened after a crash), so a replay stops exactly at ``position`` — except in a reused
  file (journalReuseFiles, :func:`take_recycled`), where the previous use's bytes follow and
  the grouped format (:mod:`bookie.journal.format`) is what stops the replay there;
- with ``direct_io`` the groups go through an ``O_DIRECT`` descriptor
  (:class:`bookie.direct_io.DirectAppender`), which rewrites the partial last block with
  every write, exactly as the page cache would write back the page holding it;
- the file is preallocated (and synced) ahead of ``position`` in ``prealloc_bytes`` steps
  (journalPreAllocSizeMB), so that an fdatasync of a group never has to change the file's
  size. Preallocation runs on a background thread (:class:`Preallocator`) while the writer
  still has at least half a step ahead: inline, it stalled the group that crossed a step.
  The writer never writes past ``allocated`` (what the background thread has finished), and
  the background thread never touches bytes below it; the writer waits for an extension only
  when it catches up with it (and extends inline a group bigger than what the extension
  prepared). Preallocation works through a descriptor of its own: its whole-file fdatasync
  would otherwise be the one told of a failed writeback of the writer's pages (the kernel
  reports such an error once per open file), and the writer's synced write then succeed;
- a new segment file and its directory entry are fsynced before the first record goes in
  (the next segment is created ahead of time on the background thread: it is then a valid,
  empty segment on disk, which a replay reads as such);
- with ``drop_cache`` (journalRemoveFromPageCache), the whole pages of synced groups are
  dropped from the page cache (``posix_fadvise(DONTNEED)``, in steps of
  :data:`DROP_CACHE_STEP_BYTES`): only a replay reads them again. Keeping them made the page
  cache grow by every byte journaled, and each new page then cost a fresh allocation — on our
  VMs a host page fault (~13 µs per 4 KiB page once the guest's free memory had been handed
  back to the host), which was most of the bookie's CPU at 64 KiB adds. Dropped pages are
  reused, still mapped, by the next writes (here and in the entry logs).
"""

from __future__ import annotations

import concurrent.futures
import errno
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minipulsar.bookie.direct_io import DirectAppender, StagingBuffers, open_direct
from minipulsar.bookie.journal.format import (
    FLAG_REUSED,
    GROUPED_VERSIONS,
    RECORD_CRC_BY_VERSION,
    SEGMENT_HEADER_SIZE,
    SEGMENT_VERSION,
    GroupCut,
    ScanEnd,
    ScannedRecord,
    encode_end,
    encode_segment_header,
    read_segment_header,
    scan_records,
    segment_file_name,
)
from minipulsar.durable_file import fsync_directory, sync_data

log = logging.getLogger("minipulsar.bookie.journal")  # one name for the whole journal's log lines

_ZEROS = bytes(1024 * 1024)
_READ_BUFFER_BYTES = 1024 * 1024
IOV_MAX = 1024
"""Linux's limit on the buffers of one ``pwritev``."""
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
DROP_CACHE_STEP_BYTES = 1024 * 1024
"""Synced bytes dropped from the page cache per ``posix_fadvise`` call (fewer syscalls)."""
_FADV_DONTNEED = getattr(os, "POSIX_FADV_DONTNEED", None)
_RWF_DSYNC = getattr(os, "RWF_DSYNC", 0)
"""Per-write O_DSYNC (Linux >= 4.7): the write returns once its data is durable, as write +
fdatasync would."""


def segment_path(directory: Path, segment_id: int) -> Path:
    return directory / segment_file_name(segment_id)


@dataclass(slots=True)
class SegmentScan:
    """The outcome of replaying one segment."""

    segment_id: int
    end_offset: int
    """End of the valid records: where an append must go."""
    end: ScanEnd
    records: int
    header_ok: bool
    version: int = SEGMENT_VERSION
    """The segment's format version (its records' checksum)."""
    reused: bool = False
    """The file had a previous use (journalReuseFiles): its data ends in that use's bytes."""

    @property
    def empty(self) -> bool:
        """A valid segment without any record (created ahead of time, or never written)."""
        return self.header_ok and self.end.clean and self.end_offset <= SEGMENT_HEADER_SIZE


def scan_segment(path: Path, segment_id: int, visit, start_offset: int = SEGMENT_HEADER_SIZE) -> SegmentScan:
    """Call ``visit(scanned_record)`` for each valid record of one segment from ``start_offset``
    (a record boundary: the header's end, or a checkpoint mark), in order."""
    with open(path, "rb", buffering=_READ_BUFFER_BYTES) as stream:
        header = read_segment_header(stream.read(SEGMENT_HEADER_SIZE))
        if header is None or header.segment_id != segment_id:
            return SegmentScan(segment_id, 0, ScanEnd.CORRUPT, 0, header_ok=False)
        start_offset = max(start_offset, SEGMENT_HEADER_SIZE)
        stream.seek(start_offset)
        offset, records = start_offset, 0
        grouped = segment_id if header.version in GROUPED_VERSIONS else None
        for item in scan_records(stream, start_offset, RECORD_CRC_BY_VERSION[header.version], grouped, header.reused):
            if isinstance(item, ScannedRecord):
                visit(item)
                offset = item.payload_offset + len(item.payload)
                records += 1
            elif isinstance(item, GroupCut):
                offset = item.offset
            else:
                return SegmentScan(
                    segment_id, offset, item, records, header_ok=True, version=header.version, reused=header.reused
                )
    raise AssertionError("scan_records always ends with a ScanEnd")


class Preallocator:
    """The journal's background thread for file preparation: zero-filling ahead of the writer
    and creating the next segment. One job at a time, in order."""

    def __init__(self, name: str) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future:
        return self._executor.submit(fn, *args)

    def close(self) -> None:
        """Wait for the job in progress (its file is then complete) and stop the thread."""
        self._executor.shutdown(wait=True, cancel_futures=True)


class SegmentWriter:
    """The segment currently appended to. Owned by one thread (the journal's writer); its
    zero-filling may run on the :class:`Preallocator`'s."""

    def __init__(
        self,
        directory: Path,
        segment_id: int,
        fd: int,
        position: int,
        prealloc_bytes: int,
        preallocator: Preallocator | None = None,
        limit_bytes: int = 0,
        drop_cache: bool = False,
        direct_io: bool = False,
        staging: StagingBuffers | None = None,
    ) -> None:
        """``limit_bytes``: the segment rolls past this size (journalMaxSizeMB): zeros are not
        prepared beyond it in the background (only for a last group that crosses it).
        ``drop_cache``: journalRemoveFromPageCache (see the module docstring).
        ``direct_io``: append with ``O_DIRECT`` (:mod:`bookie.direct_io`) where the file
        system allows it; nothing then reaches the page cache, so nothing is dropped.
        ``staging``: the journal's staging buffers for direct writes, reused segment after segment."""
        self.directory = directory
        self.segment_id = segment_id
        self._fd = fd
        self.position = position
        self._prealloc_bytes = prealloc_bytes
        self._preallocator = preallocator
        self._allocated = os.fstat(fd).st_size
        """Zero-filled and synced up to here (only grows; set when an extension completed)."""
        self._allocated_cap = (
            -(-limit_bytes // prealloc_bytes) * prealloc_bytes if prealloc_bytes and limit_bytes else 0
        )
        self._extension: concurrent.futures.Future | None = None
        self._extension_target = self._allocated
        self._prealloc_fd = os.open(segment_path(directory, segment_id), os.O_RDWR) if prealloc_bytes else -1
        """Preallocation's own descriptor (see the module docstring)."""
        self._direct: DirectAppender | None = None
        if direct_io and (direct_fd := open_direct(segment_path(directory, segment_id))) >= 0:
            try:
                self._direct = DirectAppender(direct_fd, position, fd, staging=staging)
            except BaseException:
                os.close(direct_fd)
                if self._prealloc_fd >= 0:
                    os.close(self._prealloc_fd)
                raise
        self._drop_cache = drop_cache and _FADV_DONTNEED is not None and self._direct is None
        self._dropped = position - position % PAGE_BYTES
        """Pages below this offset were dropped from the page cache (page-aligned)."""

    @classmethod
    def create(
        cls,
        directory: Path,
        segment_id: int,
        prealloc_bytes: int,
        preallocator: Preallocator | None = None,
        limit_bytes: int = 0,
        drop_cache: bool = False,
        direct_io: bool = False,
        reuse: bool = False,
        staging: StagingBuffers | None = None,
    ) -> SegmentWriter:
        """A new, empty segment, durable (file and directory entry) before it is used.

        ``reuse`` (journalReuseFiles): take a recycled segment file if there is one (see
        :func:`take_recycled`); its blocks are already written, so the groups written over
        them need no block allocation and their syncs flush data only."""
        path = segment_path(directory, segment_id)

        def writer_on(fd: int) -> SegmentWriter:
            return cls(
                directory,
                segment_id,
                fd,
                SEGMENT_HEADER_SIZE,
                prealloc_bytes,
                preallocator,
                limit_bytes,
                drop_cache,
                direct_io,
                staging,
            )

        fd = take_recycled(directory, segment_id) if reuse else -1
        if fd >= 0:
            try:
                return writer_on(fd)
            except BaseException:
                os.close(fd)
                raise
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        writer = None
        try:
            os.write(fd, encode_segment_header(segment_id))
            writer = writer_on(fd)
            writer._preallocate(writer._target_for(SEGMENT_HEADER_SIZE + 1))
            writer._extension_target = writer._allocated
            os.fsync(fd)
            fsync_directory(directory)
        except BaseException:
            _close_after_failure(writer, fd)
            raise
        return writer

    @classmethod
    def reopen(
        cls,
        directory: Path,
        scan: SegmentScan,
        prealloc_bytes: int,
        preallocator: Preallocator | None = None,
        limit_bytes: int = 0,
        drop_cache: bool = False,
        direct_io: bool = False,
        staging: StagingBuffers | None = None,
    ) -> SegmentWriter:
        """Append to an existing segment (of the current version) after its last valid record.

        Whatever follows that record (a torn record, garbage, stale zeros) is cut off and the
        tail zero-filled again, so the next replay cannot read past our own records.
        """
        assert scan.header_ok and scan.version == SEGMENT_VERSION
        fd = os.open(segment_path(directory, scan.segment_id), os.O_RDWR)
        writer = None
        try:
            os.ftruncate(fd, scan.end_offset)
            writer = cls(
                directory,
                scan.segment_id,
                fd,
                scan.end_offset,
                prealloc_bytes,
                preallocator,
                limit_bytes,
                drop_cache,
                direct_io,
                staging,
            )
            writer._preallocate(writer._target_for(scan.end_offset + 1))
            writer._extension_target = writer._allocated
            os.fsync(fd)
        except BaseException:
            _close_after_failure(writer, fd)
            raise
        return writer

    def _target_for(self, needed_end: int) -> int:
        """The allocation to reach for a write ending at ``needed_end``: whole steps."""
        step = self._prealloc_bytes
        if not step:  # journalPreAllocSizeMB=0: no preallocation, the file grows with the writes
            return needed_end
        return -(-needed_end // step) * step  # file sizes stay multiples of the step

    def _preallocate(self, target: int) -> None:
        """Extend the file to ``target`` with allocated blocks that read as zeros, and sync that
        (any thread, one at a time).

        ``posix_fallocate``: extents only — no page-cache pages, no zeros written. Zero-filling
        with ``pwrite`` instead cost the journal ~40% of its 64 KiB throughput here (every byte
        went through the page cache and to the disk twice) for a ~1.4x cheaper fdatasync. A
        file system without fallocate gets zeros written (glibc emulates it, or we do)."""
        if not self._prealloc_bytes or self._allocated >= target:
            return
        try:
            os.posix_fallocate(self._prealloc_fd, self._allocated, target - self._allocated)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
            self._write_zeros(target)
        sync_data(self._prealloc_fd)  # the new size and extents: what reading the data back needs
        self._allocated = target

    def _write_zeros(self, target: int) -> None:
        offset = self._allocated
        while offset < target:
            offset += os.pwrite(self._prealloc_fd, _ZEROS[: min(len(_ZEROS), target - offset)], offset)

    def _ensure_allocated(self, end: int) -> None:
        """On the writer thread, before a write ending at ``end``: start extending the zeros in
        the background once less than half a step would be left after ``end``; wait for the
        extension (or zero-fill inline) only when ``end`` itself is not covered yet.

        Raises:
            OSError: the zero-filling failed (a full disk): the write must not happen.
        """
        step = self._prealloc_bytes
        extension = self._extension
        if extension is not None and extension.done():
            self._extension, self._extension_target = None, self._allocated
            if extension.exception() is not None:  # retried below (inline) if still needed
                log.warning(
                    "journal %s: preallocating segment %x failed: %s",
                    self.directory,
                    self.segment_id,
                    extension.exception(),
                )
            extension = None
        if extension is None:
            if end + step // 2 <= self._allocated:
                return
            target = self._target_for(end + step)
            if self._allocated_cap:
                target = max(min(target, self._allocated_cap), self._target_for(end))
            if self._preallocator is None or end > self._allocated:
                self._preallocate(target)
                self._extension_target = self._allocated
            elif target > self._allocated:
                self._extension_target = target
                self._extension = self._preallocator.submit(self._preallocate, target)
            return
        if end > self._allocated:  # caught up with the extension in progress
            try:
                extension.result()
            except OSError as exc:
                log.warning("journal %s: preallocating segment %x failed: %s", self.directory, self.segment_id, exc)
            finally:
                self._extension, self._extension_target = None, self._allocated
            if end > self._allocated:  # it failed, or this group goes beyond what it prepared
                self._preallocate(self._target_for(end))  # inline: raises if the disk is full
                self._extension_target = self._allocated

    def _prepare(self, end: int) -> None:
        """Before a write ending at ``end``: the cheap test, then :meth:`_ensure_allocated`."""
        if self._prealloc_bytes and (end > self._allocated or end + self._prealloc_bytes // 2 > self._extension_target):
            self._ensure_allocated(end)

    def append(self, buffers: list[bytes], size: int = -1) -> int:
        """Write ``buffers`` at ``position`` (no sync); returns the offset they start at.

        ``size``: their total length, when the caller knows it. One ``pwritev`` per
        :data:`IOV_MAX` buffers: no joined copy of the group.
        """
        if size < 0:
            size = sum(map(len, buffers))
        start = self.position
        self._prepare(start + size)
        if self._direct is not None:
            self._direct.append(buffers)
        else:
            _pwritev_all(self._fd, buffers, size, start)
        self.position = start + size
        return start

    def append_synced(self, buffers: list[bytes], size: int = -1) -> int:
        """:meth:`append` then :meth:`sync`, as ONE ``pwritev(RWF_DSYNC)`` when the group fits
        in one call: the journal thread then releases and re-takes the GIL once per group
        instead of twice (each re-take can wait for the busy event loop)."""
        if size < 0:
            size = sum(map(len, buffers))
        if self._direct is not None:
            start = self.position
            self._prepare(start + size)
            self._direct.append(buffers, sync=True)
            self.position = start + size
            return start
        if not _RWF_DSYNC or len(buffers) > IOV_MAX:
            start = self.append(buffers, size)
            self.sync()
            return start
        start = self.position
        self._prepare(start + size)
        written = os.pwritev(self._fd, buffers, start, _RWF_DSYNC)
        self.position = start + size
        if written < size:  # a short write (rare): the rest, then a sync of everything
            _pwrite_rest(self._fd, buffers, written, start)
            self.sync()
        elif self._drop_cache:
            self._drop_synced()
        return start

    def sync(self) -> None:
        sync_data(self._fd)
        if self._drop_cache:
            self._drop_synced()

    def end(self) -> None:
        """Write the END record (durably) before the segment is rolled over: a replay then
        knows the segment ended here, whatever follows (a reused file's old bytes)."""
        record = encode_end(self.segment_id)
        self.append_synced([record], len(record))

    def _drop_synced(self) -> None:
        """Drop the whole pages below ``position`` (synced: clean, so the kernel frees them)
        from the page cache, once at least :data:`DROP_CACHE_STEP_BYTES` of them piled up."""
        end = self.position - self.position % PAGE_BYTES
        if end - self._dropped >= DROP_CACHE_STEP_BYTES:
            drop_from_page_cache(self._fd, self._dropped, end - self._dropped)
            self._dropped = end

    def close(self) -> None:
        """Close the file, after any zero-filling in progress (it writes to this fd)."""
        extension, self._extension = self._extension, None
        if extension is not None:
            concurrent.futures.wait([extension])
        if self._direct is not None:
            self._direct.close()
            self._direct = None
        for fd in (self._fd, self._prealloc_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._prealloc_fd = -1


def _close_after_failure(writer: SegmentWriter | None, fd: int) -> None:
    """Release what a failed :meth:`SegmentWriter.create` / ``reopen`` opened."""
    if writer is not None:
        writer.close()
    else:
        os.close(fd)


def drop_from_page_cache(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to drop the file's cached pages in ``[offset, offset + length)`` (0: to
    the end); clean pages are freed at once, dirty ones are left alone. Advice only: an error
    is logged, never raised (the data it concerns is already durable)."""
    if _FADV_DONTNEED is None:
        return
    try:
        os.posix_fadvise(fd, offset, length, _FADV_DONTNEED)
    except OSError as exc:
        log.debug("posix_fadvise(DONTNEED) failed: %s", exc)


def _pwritev_all(fd: int, buffers: list[bytes], size: int, offset: int) -> None:
    """Write every buffer at ``offset``: ``pwritev`` in :data:`IOV_MAX` slices, finishing any
    short write (rare on a regular file) with plain ``pwrite``."""
    if len(buffers) <= IOV_MAX:
        written = os.pwritev(fd, buffers, offset)
        if written < size:
            _pwrite_rest(fd, buffers, written, offset)
        return
    for first in range(0, len(buffers), IOV_MAX):
        chunk = buffers[first : first + IOV_MAX]
        chunk_size = sum(map(len, chunk))
        written = os.pwritev(fd, chunk, offset)
        if written < chunk_size:
            _pwrite_rest(fd, chunk, written, offset)
        offset += chunk_size


def _pwrite_rest(fd: int, buffers: list[bytes], written: int, offset: int) -> None:
    view = memoryview(b"".join(buffers))[written:]
    offset += written
    while view:
        done = os.pwrite(fd, view, offset)
        view, offset = view[done:], offset + done


RECYCLED_SUFFIX = ".recycled"
"""A segment file kept for reuse: ``{old id:016x}.txn.recycled`` (not a segment any more)."""


def list_recycled(directory: Path) -> list[Path]:
    return sorted(directory / name for name in os.listdir(directory) if name.endswith(RECYCLED_SUFFIX))


def take_recycled(directory: Path, segment_id: int) -> int:
    """Turn a recycled file into segment ``segment_id``; returns its fd, or -1 if none.

    The new header (flagged reused) is written and synced before the rename, and the rename
    is made durable before the segment is used: a crash leaves either a recycled file or a
    valid, empty segment. One caller at a time per directory (the journal's preallocation
    thread, or its writer when that thread has not made the next segment): two racing for one
    file would both write their header into it before one rename failed."""
    for recycled in list_recycled(directory):
        try:
            fd = os.open(recycled, os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            os.pwrite(fd, encode_segment_header(segment_id, flags=FLAG_REUSED), 0)
            sync_data(fd)
            os.rename(recycled, segment_path(directory, segment_id))
        except FileNotFoundError:  # gone meanwhile: the next one
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        try:
            fsync_directory(directory)
        except BaseException:
            os.close(fd)
            raise
        log.info("journal %s: segment %x is written over recycled %s", directory, segment_id, recycled.name)
        return fd
    return -1
