"""Appending to a file with ``O_DIRECT``: the bytes go from our buffer to the device, not
through the page cache (BookKeeper's direct-I/O entry logger, BP-47, does this for entry logs).

Why: a buffered append copies every byte into a fresh page-cache page, and on our VMs a fresh
page is a host page fault; the kernel then writes those pages back in bursts (a flush's
``fsync`` of tens of MiB), and the journal's synced writes queue behind the burst. Direct
writes cost one copy into an aligned buffer, keep no page cache, and reach the device as they
are made. Measured with two such streams on one disk (journal groups of 2 MiB synced each,
entry-log writes of 1 MiB): ~830 MB/s each direct, ~750 MB/s buffered.

``O_DIRECT`` wants the file offset, the length and the buffer's address aligned to the
device's block. :class:`DirectAppender` keeps the file's partial last block in memory and
writes it again, with the new bytes after it and zeros up to the next block boundary, on every
append — the bytes already there are rewritten unchanged, as the page cache would write back
the page holding them. So the file's format does not change: the bytes after the end of the
data up to the block boundary are zeros (beyond it, whatever the file held: the zeros of a
preallocated journal segment, the old bytes of a reused one), and a file written this way can
be appended to buffered, and the other way round.

Blocking I/O: call it from the thread that owns the file, never the event loop.
"""

from __future__ import annotations

import concurrent.futures
import errno
import logging
import mmap
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from minipulsar.durable_file import sync_data

log = logging.getLogger(__name__)

BLOCK_BYTES = 4096
"""Offsets, lengths and buffer addresses of direct writes are multiples of this: 4 KiB fits
every logical block size Linux devices have (512 or 4096)."""
STAGING_BYTES = 8 * 1024 * 1024
"""Synchronous mode: the aligned buffer appends are copied into; a bigger append goes out in
several writes, then one fdatasync."""
BACKGROUND_CHUNK_BYTES = 1024 * 1024
"""Background mode: whole blocks are handed to the writers once this much piled up: big
enough to stream, small enough that a journal write queued behind it on the device waits
little (4 MiB chunks made the journal's synced writes ~30 % slower beside them here)."""
BACKGROUND_BUFFERS = 4
BACKGROUND_BUFFER_BYTES = 2 * 1024 * 1024
"""Background mode: staging buffers (8 MiB in all), each written by one of
:data:`BACKGROUND_WRITERS` threads; the appender fills the next one meanwhile."""
BACKGROUND_WRITERS = 2
"""Two writes in flight: with one, the device idled while the flush thread checksummed the
next chunk and the writer waited to be handed it (~7 % fewer 64 KiB adds/s here)."""
HUGE_PAGE_BYTES = 2 * 1024 * 1024
"""Staging buffers of whole multiples of this get ``MADV_HUGEPAGE`` (see :class:`StagingBuffers`)."""
_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", 0)
_MAP_PRIVATE = getattr(mmap, "MAP_PRIVATE", 0) or mmap.MAP_SHARED
_O_DIRECT = getattr(os, "O_DIRECT", 0)
_RWF_DSYNC = getattr(os, "RWF_DSYNC", 0)
_ZEROS = bytes(BLOCK_BYTES)
JOIN_BELOW_BYTES = 4096
"""Buffers smaller than this on average are joined before being copied (see :meth:`DirectAppender.append`)."""


def open_direct(path: Path | str) -> int:
    """An ``O_DIRECT`` write descriptor for an existing file, or -1 where the platform or the
    file system (tmpfs, some FUSE mounts) does not do direct I/O: the caller stays buffered."""
    if not _O_DIRECT:
        return -1
    try:
        return os.open(path, os.O_WRONLY | _O_DIRECT)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
            log.info("%s: the file system refuses O_DIRECT (%s); writing through the page cache", path, exc)
            return -1
        raise


class StagingBuffers:
    """Page-aligned staging buffers handed from one :class:`DirectAppender` to the next: the
    segments of one journal, or the entry logs of one ledger dir, one after another, write
    through the same pages.

    Why: a fresh anonymous page costs a page fault the first time it is touched (on our VMs
    often a host page fault too). With a new 8 MiB buffer per 256 MiB journal segment and
    new 2 MiB ones per entry log, a bookie taking 64 KiB adds at ~600 MB/s took ~5,000 faults/s
    on its journal thread and as many on its flush thread, inside the copies the adds wait
    for; reusing them removed nearly all of those and gave +5–10 % (see bench/README.md).

    The buffers are private anonymous mappings with ``MADV_HUGEPAGE`` (sizes in whole 2 MiB
    pages): with transparent huge pages in ``madvise`` mode, as on our VMs, each 2 MiB is one
    physically contiguous page, so a multi-MiB direct write pins a few pages instead of
    hundreds and reaches the device as one request instead of being split at the queue's
    ``max_segments`` (254 × 4 KiB here): block splits during a 64 KiB run went from ~1,000–2,600
    to ~100 per 5 s. Where THP is off the advice is ignored and the buffers are as before.

    Thread-safe: a journal's next segment is created on its preallocation thread.
    """

    def __init__(self, keep: int) -> None:
        """``keep``: free buffers kept per size; more given back are unmapped (0: none kept)."""
        self._keep = keep
        self._free: dict[int, list[mmap.mmap]] = {}
        self._lock = threading.Lock()
        self.mapped = 0
        """Buffers mapped so far: stays at one appender's worth (two for a journal, whose next
        segment is created ahead of time) while appenders follow one another."""

    def take(self, size: int) -> mmap.mmap:
        """A buffer of ``size`` bytes (a multiple of the page size): a kept one, else a new one."""
        with self._lock:
            free = self._free.get(size)
            if free:
                return free.pop()
            self.mapped += 1
        buffer = mmap.mmap(-1, size, flags=_MAP_PRIVATE)  # page-aligned, as O_DIRECT wants
        if _MADV_HUGEPAGE and size % HUGE_PAGE_BYTES == 0:
            buffer.madvise(_MADV_HUGEPAGE)
        return buffer

    def give(self, buffer: mmap.mmap) -> None:
        """Take ``buffer`` back for the next :meth:`take`, or unmap it beyond ``keep``."""
        with self._lock:
            free = self._free.setdefault(len(buffer), [])
            if len(free) < self._keep:
                free.append(buffer)
                return
        try:
            buffer.close()
        except BufferError:  # a slice still referenced (by a failed write's traceback): freed with it
            pass

    def close(self) -> None:
        """Unmap the kept buffers."""
        with self._lock:
            kept, self._free = self._free, {}
        for buffers in kept.values():
            for buffer in buffers:
                try:
                    buffer.close()
                except BufferError:  # a slice still referenced (by a failed write's traceback): freed with it
                    pass


class DirectAppender:
    """Appends to one file through an ``O_DIRECT`` descriptor.

    Two ways to use it:
    - synchronous (the journal): :meth:`append` writes what it was given before returning,
      durable with ``sync=True``;
    - with ``background_writes`` (the entry log, written by a flush that also encodes and
      checksums every record): :meth:`append` only copies, and hands each
      :data:`BACKGROUND_CHUNK_BYTES` of whole blocks to the writer threads, filling the next
      staging buffer meanwhile, so the device works while the flush thread computes;
      :meth:`flush` writes the rest and waits for everything. The chunks in flight cover
      disjoint blocks (a chunk ends at a block boundary and the partial block is carried
      over to the next one), so their order does not matter; the partial last block is
      written only by :meth:`flush`, once nothing else is in flight.
    """

    def __init__(
        self,
        fd: int,
        position: int,
        read_fd: int,
        staging_bytes: int = STAGING_BYTES,
        *,
        background_writes: bool = False,
        name: str = "direct-writer",
        staging: StagingBuffers | None = None,
        writers: concurrent.futures.Executor | None = None,
    ) -> None:
        """``fd``: from :func:`open_direct` (owned: :meth:`close` closes it). ``position``: the
        end of the data; the partial block before it is read back through ``read_fd`` (a
        buffered descriptor of the same file) so the next write can rewrite it.
        ``staging``: where the staging buffers come from and go back to on :meth:`close`
        (default: new ones, unmapped on close). ``writers``: with ``background_writes``, the
        threads that write (shared by the appenders that follow one another, left running on
        :meth:`close`; default: :data:`BACKGROUND_WRITERS` of its own, stopped on close)."""
        self._fd = fd
        if background_writes:
            staging_bytes, count = BACKGROUND_BUFFER_BYTES, BACKGROUND_BUFFERS
        else:
            count = 1
        staging_bytes = max(staging_bytes - staging_bytes % BLOCK_BYTES, 2 * BLOCK_BYTES)
        self._staging = staging if staging is not None else StagingBuffers(keep=0)
        self._maps = [self._staging.take(staging_bytes) for _ in range(count)]
        self._views = [memoryview(m) for m in self._maps]
        self._writes: list[concurrent.futures.Future | None] = [None] * count
        """Per staging buffer: its write in progress on the writer thread, if any."""
        self._index = 0
        self._view = self._views[0]
        self._owns_executor = background_writes and writers is None
        self._executor: concurrent.futures.Executor | None = None
        if background_writes:
            self._executor = writers or concurrent.futures.ThreadPoolExecutor(
                BACKGROUND_WRITERS, thread_name_prefix=name
            )
        self._base = position - position % BLOCK_BYTES
        """File offset of the current staging buffer's first byte (a block boundary)."""
        self._filled = 0
        """Bytes in the current staging buffer not written yet (starting with the partial
        last block that is already in the file)."""
        if position > self._base:
            tail = os.pread(read_fd, position - self._base, self._base)
            if len(tail) != position - self._base:
                raise OSError(errno.EIO, f"short read of the last block at {self._base}: {len(tail)} bytes")
            self._view[: len(tail)] = tail
            self._filled = len(tail)

    @property
    def position(self) -> int:
        """The end of what was appended (written or not yet)."""
        return self._base + self._filled

    def append(self, buffers: Sequence[bytes | memoryview], sync: bool = False) -> None:
        """Append ``buffers``. Synchronous: written on return, and durable with ``sync`` (one
        ``RWF_DSYNC`` write when they fit the staging buffer, else writes and an fdatasync).
        With background writes: copied, and handed to the writer thread by whole chunks."""
        capacity = len(self._view)
        wrote_before = False
        if len(buffers) > 8 and JOIN_BELOW_BYTES * len(buffers) > sum(map(len, buffers)):
            # Many small records (1 KiB adds: ~1,000 buffers a group): one join in C, then one
            # copy, instead of a Python-level slice assignment per buffer.
            buffers = (b"".join(buffers),)
        for buffer in buffers:
            size = len(buffer)
            filled = self._filled
            if filled + size <= capacity:  # the common case: one copy, no slicing
                self._view[filled : filled + size] = buffer
                self._filled = filled + size
                continue
            source, done = memoryview(buffer), 0
            while done < size:
                if self._filled == capacity:  # staging full: out whole, nothing kept back
                    self._hand_over(capacity)
                    wrote_before = True
                take = min(size - done, capacity - self._filled)
                self._view[self._filled : self._filled + take] = source[done : done + take]
                self._filled += take
                done += take
        if self._executor is None:
            self._write_out(dsync=sync and not wrote_before)
            if sync and wrote_before:
                sync_data(self._fd)
        elif self._filled >= BACKGROUND_CHUNK_BYTES:
            self._hand_over(self._filled - self._filled % BLOCK_BYTES)

    def flush(self, sync: bool = True) -> None:
        """Write everything appended (the last partial block padded with zeros) and wait for
        the writer thread; with ``sync``, fdatasync."""
        self._drain()
        self._write_out(dsync=False)
        if sync:
            sync_data(self._fd)

    def _hand_over(self, whole: int) -> None:
        """Write the current buffer's first ``whole`` bytes (whole blocks): on a writer
        thread when there are some, going on in the next staging buffer; else here."""
        view, rest = self._view, self._filled - whole
        if self._executor is None:
            self._write_exactly(view[:whole], self._base)
            if rest:
                view[:rest] = view[whole : self._filled]
        else:
            following = (self._index + 1) % len(self._views)
            self._wait(following)  # the next buffer's last write is done: it may be refilled
            if rest:
                self._views[following][:rest] = view[whole : self._filled]
            self._writes[self._index] = self._executor.submit(self._write_exactly, view[:whole], self._base)
            self._index, self._view = following, self._views[following]
        self._base += whole
        self._filled = rest

    def _write_out(self, dsync: bool) -> None:
        """Write the current buffer's bytes padded with zeros to a block boundary, here; keep
        the partial last block at the start of the buffer for the next write."""
        view, filled = self._view, self._filled
        padded = -(-filled // BLOCK_BYTES) * BLOCK_BYTES
        if padded > filled:
            view[filled:padded] = _ZEROS[: padded - filled]
        if padded:
            self._write_exactly(view[:padded], self._base, _RWF_DSYNC if dsync else 0)
            if dsync and not _RWF_DSYNC:
                sync_data(self._fd)
        whole = filled - filled % BLOCK_BYTES
        tail = filled - whole
        if whole and tail:
            view[:tail] = view[whole:filled]
        self._base += whole
        self._filled = tail

    def _write_exactly(self, data: memoryview, offset: int, flags: int = 0) -> None:
        written = os.pwritev(self._fd, [data], offset, flags)
        if written != len(data):  # a direct write is whole unless the disk filled up meanwhile
            raise OSError(errno.ENOSPC, f"short direct write: {written} of {len(data)} bytes at {offset}")

    def _wait(self, index: int) -> None:
        """Wait for buffer ``index``'s write; raise its error (the file is then unusable)."""
        write, self._writes[index] = self._writes[index], None
        if write is not None:
            write.result()

    def _drain(self) -> None:
        for index in range(len(self._writes)):
            self._wait(index)

    def sync(self) -> None:
        """fdatasync what was written, after the background writes in flight (not what is
        still only in the staging buffer: :meth:`flush` writes that)."""
        self._drain()
        sync_data(self._fd)

    def close(self) -> None:
        """Close, after any write in progress (its error, if any, is dropped: the caller is
        abandoning or has flushed the file)."""
        if self._executor is not None:
            if self._owns_executor:
                self._executor.shutdown(wait=True)
            else:  # the staging buffers go back only once nothing writes from them
                concurrent.futures.wait([write for write in self._writes if write is not None])
            self._executor = None
        self._writes = [None] * len(self._writes)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        for view, buffer in zip(self._views, self._maps):
            view.release()
            self._staging.give(buffer)
        self._views, self._maps = [], []
