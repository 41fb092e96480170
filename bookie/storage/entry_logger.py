"""The entry logs of one ledger dir: appended to by the flush, read with ``pread`` by readers.

Blocking file I/O only; never called on the event loop.

Invariants:
- :class:`EntryLogWriter` is used by one thread at a time: the checkpoint's flush of its dir
  (the flush thread or a dir-flush thread) or, between checkpoints, garbage collection's
  compaction on the flush thread. After a restart it never appends to an existing log (its
  tail may hold a torn record of a flush cut short): it starts a new log with a higher id. A
  new log's header and directory entry are fsynced before any record that the index could
  point at; a log whose creation failed half-way is removed (or its id skipped);
- a log is rolled (synced, closed, and a new one started) before a record would take it past
  ``logSizeLimit``; a record bigger than the limit gets a log of its own;
- :meth:`EntryLogWriter.flush` writes and fsyncs everything appended: only after it returns
  may the index reference those locations;
- with ``cache_window_bytes`` >= 0, the synced part of the log being written is dropped from
  the page cache (``posix_fadvise(DONTNEED)``) except its last ``cache_window_bytes``, and a
  log is dropped whole when it rolls: recent entries stay cached for readers close behind the
  writers, and the page cache does not grow by every byte flushed (each new page is a fresh
  allocation, on our VMs a host page fault: see :mod:`bookie.journal.segment`). Older
  entries are read from the disk, as BookKeeper's direct-I/O entry logger always does;
- :class:`EntryLogReader` is thread-safe and checks every record it returns against its CRC
  and the (ledger, entry) asked for;
- garbage collection deletes a log only once nothing in the index points into it; the reader
  then retires the log's fd (:meth:`EntryLogReader.retire`), closed once the reads using
  it are done (a read that started on the old file finishes on it). A read that looked up a
  location in a log deleted since gets :class:`EntryLogMissingError`: the entry moved, and
  the caller looks it up again.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import os
import threading
from pathlib import Path

from minipulsar import diagnostics
from minipulsar.bookie.direct_io import (
    BACKGROUND_BUFFERS,
    BACKGROUND_WRITERS,
    DirectAppender,
    StagingBuffers,
    open_direct,
)
from minipulsar.bookie.journal.segment import DROP_CACHE_STEP_BYTES, IOV_MAX, PAGE_BYTES, drop_from_page_cache
from minipulsar.bookie.storage.entry_log import (
    LOG_HEADER_SIZE,
    RECORD_HEADER_SIZE,
    decode_record_header,
    encode_log_header,
    encode_record_header,
    encode_record_headers,
    log_file_name,
    make_location,
    parse_log_file_name,
    record_ok,
    split_location,
)
from minipulsar.durable_file import fsync_directory, sync_data
from minipulsar.errors import UnknownServerError

log = logging.getLogger(__name__)

WRITE_BUFFER_BYTES = 1024 * 1024
"""Appends are gathered up to this size per ``write`` (BookKeeper: writeBufferSizeBytes 64 KiB;
bigger buffers mean fewer syscalls holding the GIL)."""
FIRST_READ_BYTES = 4096
"""A read asks for the header and this much payload at once: one pread for small entries."""
READ_AHEAD_CHUNK_BYTES = 256 * 1024


class CorruptEntryError(UnknownServerError):
    """An entry read back from an entry log does not match its record header or CRC."""


class EntryLogMissingError(CorruptEntryError):
    """The entry log is not there (any more): garbage collection deleted it after the index
    moved its entries elsewhere, or it was lost."""


def list_entry_logs(directory: Path) -> list[int]:
    """Entry-log ids in ``directory``, oldest first."""
    ids = (parse_log_file_name(name) for name in os.listdir(directory))
    return sorted(i for i in ids if i is not None)


def entry_log_path(directory: Path, log_id: int) -> Path:
    return directory / log_file_name(log_id)


def delete_entry_log(directory: Path, log_id: int) -> None:
    """Unlink the log durably (garbage collection; nothing may point into it any more)."""
    try:
        os.unlink(entry_log_path(directory, log_id))
    except FileNotFoundError:
        return
    fsync_directory(directory)


class EntryLogWriter:
    def __init__(
        self,
        directory: Path,
        log_size_limit: int,
        next_log_id: int,
        sync_every_bytes: int = 0,
        cache_window_bytes: int = -1,
        direct_io: bool = False,
    ) -> None:
        """``sync_every_bytes``: flushEntrylogBytes — fdatasync along the way, so a big flush
        never leaves more dirty pages than that to the kernel (0: only in :meth:`flush`).
        ``cache_window_bytes``: how much of the synced log stays in the page cache (negative:
        all of it; see the module docstring).
        ``direct_io``: dbStorage_directIOEntryLogger — write with ``O_DIRECT``
        (:mod:`bookie.direct_io`) where the file system allows it: nothing reaches the page
        cache, so ``cache_window_bytes`` has nothing to keep."""
        self.directory = directory
        self.log_size_limit = log_size_limit
        self.sync_every_bytes = sync_every_bytes
        self.cache_window_bytes = cache_window_bytes
        self.direct_io = direct_io
        self._direct: DirectAppender | None = None
        self._staging = StagingBuffers(keep=BACKGROUND_BUFFERS)
        """The direct writes' staging buffers, handed from each log to the next."""
        self._writers: concurrent.futures.ThreadPoolExecutor | None = None
        """The direct writes' threads, shared by the logs (started with the first one)."""
        self._dropped = 0
        """The current log's pages below this offset were dropped from the page cache."""
        self.log_id = next_log_id - 1
        """The log being appended to (once one was created)."""
        self._fd = -1
        self._position = 0
        """End of the current log, counting ``_pending``."""
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._unsynced = False
        self._unsynced_bytes = 0
        self.logs_created: list[int] = []

    def append(self, ledger_id: int, entry_id: int, payload: bytes) -> int:
        """Buffer one record; returns its location (valid once :meth:`flush` returned)."""
        size = RECORD_HEADER_SIZE + len(payload)
        if self._fd < 0:
            self._create(self.log_id + 1)
        elif self._position + size > self.log_size_limit and self._position > LOG_HEADER_SIZE:
            self._roll()
        location = make_location(self.log_id, self._position)
        self._pending.append(encode_record_header(ledger_id, entry_id, payload))
        self._pending.append(payload)
        self._pending_bytes += size
        self._position += size
        if self._pending_bytes >= WRITE_BUFFER_BYTES:
            self._write_pending()
        return location

    def append_entries(self, ledger_id: int, entry_ids: list[int], payloads: list[bytes]) -> list[int]:
        """:meth:`append` for one ledger's entries in order; returns their locations. The
        flush's inner loop, one call per ledger: headers, offsets and buffers are built in C
        per ~:data:`WRITE_BUFFER_BYTES` slice (written as it fills, as :meth:`append` does),
        with no object per entry besides its header, since the flush thread holds the GIL
        that the event loop and the journal thread wait for."""
        count = len(entry_ids)
        if not count:
            return []
        run_bytes = RECORD_HEADER_SIZE * count + sum(map(len, payloads))
        per_slice = max(1, count * WRITE_BUFFER_BYTES // run_bytes)
        locations: list[int] = []
        for first in range(0, count, per_slice):
            ids, chunk = entry_ids[first : first + per_slice], payloads[first : first + per_slice]
            chunk_bytes = RECORD_HEADER_SIZE * len(chunk) + sum(map(len, chunk))
            if self._fd >= 0 and self._position + chunk_bytes <= self.log_size_limit:
                locations += self._append_whole_run(ledger_id, ids, chunk, chunk_bytes)
            else:  # a new log, or a roll inside the slice: entry by entry
                locations += map(self.append, itertools.repeat(ledger_id), ids, chunk)
        return locations

    def _append_whole_run(
        self, ledger_id: int, entry_ids: list[int], payloads: list[bytes], run_bytes: int
    ) -> list[int]:
        """A run that fits in the current log: headers, offsets and buffers built in C."""
        start = self._position
        records = [b""] * (2 * len(payloads))
        records[0::2] = encode_record_headers(ledger_id, entry_ids, payloads)
        records[1::2] = payloads
        offsets = itertools.accumulate(map(RECORD_HEADER_SIZE.__add__, map(len, payloads)), initial=start)
        locations = list(map((self.log_id << 32).__or__, itertools.islice(offsets, len(payloads))))
        self._pending += records
        self._pending_bytes += run_bytes
        self._position = start + run_bytes
        if self._pending_bytes >= WRITE_BUFFER_BYTES:
            self._write_pending()
        return locations

    def flush(self) -> None:
        """Write and fsync every record appended so far."""
        self._write_pending()
        if self._direct is not None:
            self._direct.flush(sync=False)  # the fsync below makes it durable, with the file's size
        if self._unsynced:
            os.fsync(self._fd)
            self._unsynced = False
            self._unsynced_bytes = 0
            self._drop_synced(self._position - self.cache_window_bytes)

    def _write_pending(self) -> None:
        pending, size = self._pending, self._pending_bytes
        if not pending:
            return
        self._pending, self._pending_bytes = [], 0
        if self._direct is not None:
            self._direct.append(pending)
        else:
            _writev_all(self._fd, pending)  # no joined copy of the records (64 KiB entries: ~5 µs each)
        self._unsynced = True
        self._unsynced_bytes += size
        if self.sync_every_bytes and self._unsynced_bytes >= self.sync_every_bytes:
            if self._direct is not None:
                self._direct.flush(sync=False)
            sync_data(self._fd)
            self._unsynced_bytes = 0
            self._drop_synced(self._position - self.cache_window_bytes)

    def _drop_synced(self, end: int) -> None:
        """Drop the current log's whole pages below ``end`` (synced) from the page cache."""
        if self.cache_window_bytes < 0 or self._direct is not None:
            return
        end -= end % PAGE_BYTES
        if end - self._dropped >= DROP_CACHE_STEP_BYTES:
            drop_from_page_cache(self._fd, self._dropped, end - self._dropped)
            self._dropped = end

    def _roll(self) -> None:
        diagnostics.record("entry_log_roll", log_id=self.log_id)
        self.flush()
        if self.cache_window_bytes >= 0 and self._direct is None:
            drop_from_page_cache(self._fd, 0, 0)  # the whole log: the window moves to the next one
        self._close_log()
        self._create(self.log_id + 1)

    def _create(self, log_id: int) -> None:
        path = entry_log_path(self.directory, log_id)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        direct_fd = -1
        try:
            os.write(fd, encode_log_header(log_id))
            os.fsync(fd)
            fsync_directory(self.directory)
            if self.direct_io and (direct_fd := open_direct(path)) >= 0:
                if self._writers is None:
                    self._writers = concurrent.futures.ThreadPoolExecutor(
                        BACKGROUND_WRITERS, thread_name_prefix=f"entry-log-writer-{self.directory.parent.name}"
                    )
                self._direct = DirectAppender(
                    direct_fd, LOG_HEADER_SIZE, fd, background_writes=True, staging=self._staging, writers=self._writers
                )
        except BaseException:
            os.close(fd)
            if direct_fd >= 0 and self._direct is None:
                os.close(direct_fd)
            self._forget_failed_log(path, log_id)
            raise
        self._fd, self.log_id, self._position = fd, log_id, LOG_HEADER_SIZE
        self._dropped = 0
        self.logs_created.append(log_id)
        log.debug("entry log %s created", path)

    def _forget_failed_log(self, path: Path, log_id: int) -> None:
        """A log whose creation failed half-way (its header or an fsync: a full disk) holds
        nothing: remove it, or the next attempt, with the same id and ``O_EXCL``, would fail
        with EEXIST long after the disk has room again. If it cannot be removed, its id is
        skipped (log ids need not be contiguous); never another writer's file."""
        try:
            os.unlink(path)
        except OSError as exc:
            log.warning(
                "entry log %s: its creation failed and it cannot be removed (%s); skipping id %d", path, exc, log_id
            )
            self.log_id = max(self.log_id, log_id)

    @property
    def current_log_id(self) -> int:
        """The log the next append goes to (unless it rolls): the open one, else the next id."""
        return self.log_id if self._fd >= 0 else self.log_id + 1

    def abandon(self) -> None:
        """After a failed append or flush: forget the current log (what reached it is
        unreferenced garbage); the next append starts a new log."""
        self._pending.clear()
        self._pending_bytes = 0
        self._unsynced = False
        self._unsynced_bytes = 0
        try:
            self._close_log()
        except OSError:
            self._fd = -1

    def close(self) -> None:
        """Close the current log and stop the writer threads."""
        self._close_log()
        if self._writers is not None:
            self._writers.shutdown(wait=True)
            self._writers = None
        self._staging.close()

    def _close_log(self) -> None:
        if self._direct is not None:
            self._direct.close()
            self._direct = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _writev_all(fd: int, buffers: list[bytes]) -> None:
    """Append every buffer: ``writev`` in :data:`IOV_MAX` slices, finishing a short write."""
    for first in range(0, len(buffers), IOV_MAX):
        chunk = buffers[first : first + IOV_MAX]
        written = os.writev(fd, chunk)
        if written < sum(map(len, chunk)):
            view = memoryview(b"".join(chunk))[written:]
            while view:
                view = view[os.write(fd, view) :]


class _OpenLog:
    """An fd shared by the reads of one log; closed when retired and no read uses it."""

    __slots__ = ("fd", "retired", "users")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.users = 0
        self.retired = False


class EntryLogReader:
    """Reads entries back; one read-only fd per log, opened on first use and kept until the
    log is retired (deleted by garbage collection) or the reader closed."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._logs: dict[int, _OpenLog] = {}
        self._lock = threading.Lock()
        self._closed = False

    def read(self, location: int, ledger_id: int, entry_id: int) -> tuple[bytes, int]:
        """The payload at ``location``, and the location right after its record.

        Raises:
            EntryLogMissingError: the log is gone (see the module docstring).
            CorruptEntryError: the record there is not (``ledger_id``, ``entry_id``) or fails its CRC.
        """
        log_id, offset = split_location(location)
        handle = self._acquire(log_id)
        try:
            fd = handle.fd
            data = os.pread(fd, RECORD_HEADER_SIZE + FIRST_READ_BYTES, offset)
            header = decode_record_header(data)
            if header is None or (header.ledger_id, header.entry_id) != (ledger_id, entry_id):
                raise self._corrupt(f"entry {ledger_id}:{entry_id}: no such record at log {log_id:x} offset {offset}")
            end = RECORD_HEADER_SIZE + header.length
            if len(data) >= end:
                payload = data[RECORD_HEADER_SIZE:end]
            else:
                payload = data[RECORD_HEADER_SIZE:] + os.pread(fd, end - len(data), offset + len(data))
        finally:
            self._release(handle)
        if not record_ok(header, payload):
            raise self._corrupt(f"entry {ledger_id}:{entry_id}: checksum mismatch at log {log_id:x} offset {offset}")
        return payload, location + end

    def read_ahead(
        self, location: int, ledger_id: int, first_entry_id: int, entries_max: int, bytes_max: int
    ) -> list[tuple[int, bytes]]:
        """The records from ``location`` on while they are ``ledger_id``'s entries
        ``first_entry_id``, ``first_entry_id + 1``, ... with valid CRCs: at most ``entries_max``
        of them, stopping once their payloads reach ``bytes_max`` (negative: no byte cap), at
        another ledger, a gap, the end of the log or anything unreadable (a deleted log too)."""
        log_id, offset = split_location(location)
        try:
            handle = self._acquire(log_id)
        except EntryLogMissingError:
            return []
        try:
            return self._read_ahead(handle.fd, offset, ledger_id, first_entry_id, entries_max, bytes_max)
        finally:
            self._release(handle)

    @staticmethod
    def _read_ahead(
        fd: int, offset: int, ledger_id: int, first_entry_id: int, entries_max: int, bytes_max: int
    ) -> list[tuple[int, bytes]]:
        found: list[tuple[int, bytes]] = []
        buffer, buffer_start, total, expected = b"", offset, 0, first_entry_id
        while len(found) < entries_max and (bytes_max < 0 or total < bytes_max):
            at = offset - buffer_start
            header = decode_record_header(buffer, at)
            if header is None or at + RECORD_HEADER_SIZE + header.length > len(buffer):
                length = header.length if header is not None else 0
                buffer = os.pread(fd, max(READ_AHEAD_CHUNK_BYTES, RECORD_HEADER_SIZE + length), offset)
                buffer_start, at = offset, 0
                header = decode_record_header(buffer)
                if header is None or RECORD_HEADER_SIZE + header.length > len(buffer):
                    break
            if header.ledger_id != ledger_id or header.entry_id != expected:
                break
            payload = buffer[at + RECORD_HEADER_SIZE : at + RECORD_HEADER_SIZE + header.length]
            if not record_ok(header, payload):
                break
            found.append((expected, payload))
            total += header.length
            expected += 1
            offset += RECORD_HEADER_SIZE + header.length
        return found

    def _acquire(self, log_id: int) -> _OpenLog:
        with self._lock:
            if self._closed:
                raise UnknownServerError("the entry logs are closed")
            handle = self._logs.get(log_id)
            if handle is None:
                try:
                    fd = os.open(entry_log_path(self.directory, log_id), os.O_RDONLY)
                except FileNotFoundError:
                    raise EntryLogMissingError(f"entry log {log_id:x} is not in {self.directory}") from None
                handle = self._logs[log_id] = _OpenLog(fd)
            handle.users += 1
            return handle

    def _release(self, handle: _OpenLog) -> None:
        with self._lock:
            handle.users -= 1
            if handle.retired and handle.users == 0:
                os.close(handle.fd)

    def retire(self, log_id: int) -> None:
        """The log was deleted: close its fd once the reads using it are done; later reads
        of it get :class:`EntryLogMissingError`."""
        with self._lock:
            handle = self._logs.pop(log_id, None)
            if handle is not None:
                handle.retired = True
                if handle.users == 0:
                    os.close(handle.fd)

    def _corrupt(self, message: str) -> CorruptEntryError:
        log.error("%s: %s", self.directory, message)
        return CorruptEntryError(message)

    def close(self) -> None:
        """Close every fd; callers make sure no read is running (see the storage's read gate)."""
        with self._lock:
            self._closed = True
            for handle in self._logs.values():
                os.close(handle.fd)
            self._logs.clear()
