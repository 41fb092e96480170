"""The entry logs of one ledger dir: appended to by the flush, read with ``pread`` by readers.

Blocking file I/O only; never called on the event loop.

Invariants:
- :class:`EntryLogWriter` belongs to the flush thread. After a restart it never appends to an
  existing log (its tail may hold a torn record of a flush cut short): it starts a new log
  with a higher id. A new log's header and directory entry are fsynced before any record
  that the index could point at;
- a log is rolled (synced, closed, and a new one started) before a record would take it past
  ``logSizeLimit``; a record bigger than the limit gets a log of its own;
- :meth:`EntryLogWriter.flush` writes and fsyncs everything appended: only after it returns
  may the index reference those locations;
- :class:`EntryLogReader` is thread-safe and checks every record it returns against its CRC
  and the (ledger, entry) asked for.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from bookie.journal_segment import fsync_directory
from bookie.storage.entry_log import (
    LOG_HEADER_SIZE,
    RECORD_HEADER_SIZE,
    decode_record_header,
    encode_log_header,
    encode_record_header,
    log_file_name,
    make_location,
    parse_log_file_name,
    record_ok,
    split_location,
)
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


def list_entry_logs(directory: Path) -> list[int]:
    """Entry-log ids in ``directory``, oldest first."""
    ids = (parse_log_file_name(name) for name in os.listdir(directory))
    return sorted(i for i in ids if i is not None)


def entry_log_path(directory: Path, log_id: int) -> Path:
    return directory / log_file_name(log_id)


class EntryLogWriter:
    def __init__(self, directory: Path, log_size_limit: int, next_log_id: int, sync_every_bytes: int = 0) -> None:
        """``sync_every_bytes``: flushEntrylogBytes — fdatasync along the way, so a big flush
        never leaves more dirty pages than that to the kernel (0: only in :meth:`flush`)."""
        self.directory = directory
        self.log_size_limit = log_size_limit
        self.sync_every_bytes = sync_every_bytes
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

    def flush(self) -> None:
        """Write and fsync every record appended so far."""
        self._write_pending()
        if self._unsynced:
            os.fsync(self._fd)
            self._unsynced = False
            self._unsynced_bytes = 0

    def _write_pending(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]
        self._unsynced = True
        self._unsynced_bytes += len(data)
        if self.sync_every_bytes and self._unsynced_bytes >= self.sync_every_bytes:
            os.fdatasync(self._fd)
            self._unsynced_bytes = 0

    def _roll(self) -> None:
        self.flush()
        os.close(self._fd)
        self._fd = -1
        self._create(self.log_id + 1)

    def _create(self, log_id: int) -> None:
        path = entry_log_path(self.directory, log_id)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, encode_log_header(log_id))
            os.fsync(fd)
            fsync_directory(self.directory)
        except BaseException:
            os.close(fd)
            raise
        self._fd, self.log_id, self._position = fd, log_id, LOG_HEADER_SIZE
        self.logs_created.append(log_id)
        log.debug("entry log %s created", path)

    def abandon(self) -> None:
        """After a failed append or flush: forget the current log (what reached it is
        unreferenced garbage); the next append starts a new log."""
        self._pending.clear()
        self._pending_bytes = 0
        self._unsynced = False
        self._unsynced_bytes = 0
        try:
            self.close()
        except OSError:
            self._fd = -1

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class EntryLogReader:
    """Reads entries back; one read-only fd per log, opened on first use and kept."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fds: dict[int, int] = {}
        self._lock = threading.Lock()
        self._closed = False

    def read(self, location: int, ledger_id: int, entry_id: int) -> tuple[bytes, int]:
        """The payload at ``location``, and the location right after its record.

        Raises:
            CorruptEntryError: the record there is not (``ledger_id``, ``entry_id``) or fails its CRC.
        """
        log_id, offset = split_location(location)
        fd = self._fd(log_id)
        data = os.pread(fd, RECORD_HEADER_SIZE + FIRST_READ_BYTES, offset)
        header = decode_record_header(data)
        if header is None or (header.ledger_id, header.entry_id) != (ledger_id, entry_id):
            raise self._corrupt(f"entry {ledger_id}:{entry_id}: no such record at log {log_id:x} offset {offset}")
        end = RECORD_HEADER_SIZE + header.length
        if len(data) >= end:
            payload = data[RECORD_HEADER_SIZE:end]
        else:
            payload = data[RECORD_HEADER_SIZE:] + os.pread(fd, end - len(data), offset + len(data))
        if not record_ok(header, payload):
            raise self._corrupt(f"entry {ledger_id}:{entry_id}: checksum mismatch at log {log_id:x} offset {offset}")
        return payload, location + end

    def read_ahead(self, location: int, ledger_id: int, first_entry_id: int, entries_max: int,
                   bytes_max: int) -> list[tuple[int, bytes]]:
        """The records from ``location`` on while they are ``ledger_id``'s entries
        ``first_entry_id``, ``first_entry_id + 1``, ... with valid CRCs: at most ``entries_max``
        of them, stopping once their payloads reach ``bytes_max`` (negative: no byte cap), at
        another ledger, a gap, the end of the log or anything unreadable."""
        log_id, offset = split_location(location)
        fd = self._fd(log_id)
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
            payload = buffer[at + RECORD_HEADER_SIZE:at + RECORD_HEADER_SIZE + header.length]
            if not record_ok(header, payload):
                break
            found.append((expected, payload))
            total += header.length
            expected += 1
            offset += RECORD_HEADER_SIZE + header.length
        return found

    def _fd(self, log_id: int) -> int:
        fd = self._fds.get(log_id)
        if fd is not None:
            return fd
        with self._lock:
            if self._closed:
                raise UnknownServerError("the entry logs are closed")
            fd = self._fds.get(log_id)
            if fd is None:
                try:
                    fd = self._fds[log_id] = os.open(entry_log_path(self.directory, log_id), os.O_RDONLY)
                except FileNotFoundError:
                    raise self._corrupt(f"entry log {log_id:x} is missing from {self.directory}") from None
            return fd

    def _corrupt(self, message: str) -> CorruptEntryError:
        log.error("%s: %s", self.directory, message)
        return CorruptEntryError(message)

    def close(self) -> None:
        """Close every fd; callers make sure no read is running (see the storage's read gate)."""
        with self._lock:
            self._closed = True
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
