"""Reads entry payloads back out of journal segments with ``pread``, on a thread pool.

Each read also re-reads the record header and checks its CRC and ids, so a payload handed
to a reader is exactly the one the journal wrote for that (ledger, entry).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bookie.journal_format import RECORD_HEADER, RECORD_HEADER_SIZE, EntryLocation
from minipulsar.errors import UnknownServerError

log = logging.getLogger(__name__)


class CorruptEntryError(UnknownServerError):
    """An entry read back from disk does not match its record header."""


def _corrupt(message: str) -> CorruptEntryError:
    log.error("%s", message)
    return CorruptEntryError(message)


class JournalReader:
    """Segment file descriptors (opened lazily, kept open) and a pool of read threads."""

    def __init__(self, segment_path: Callable[[int, int], Path], threads: int) -> None:
        self._segment_path = segment_path
        self._fds: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="bookie-read")

    async def read(self, ledger_id: int, entries: Sequence[tuple[int, EntryLocation]]) -> list[tuple[int, bytes]]:
        """The payloads of ``entries`` (``(entry_id, location)``), read on the pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._read_all, ledger_id, entries)

    def _read_all(self, ledger_id: int, entries: Sequence[tuple[int, EntryLocation]]) -> list[tuple[int, bytes]]:
        return [(entry_id, self._read_one(ledger_id, entry_id, location)) for entry_id, location in entries]

    def _read_one(self, ledger_id: int, entry_id: int, location: EntryLocation) -> bytes:
        fd = self._fd(location.journal_index, location.segment_id)
        size = RECORD_HEADER_SIZE + location.length
        data = os.pread(fd, size, location.offset - RECORD_HEADER_SIZE)
        if len(data) != size:
            raise _corrupt(f"entry {ledger_id}:{entry_id}: short read at {location}")
        crc, length, _, got_ledger, got_entry, _ = RECORD_HEADER.unpack_from(data)
        payload = data[RECORD_HEADER_SIZE:]
        if (length, got_ledger, got_entry) != (location.length, ledger_id, entry_id) or \
                zlib.crc32(payload, zlib.crc32(data[4:RECORD_HEADER_SIZE])) != crc:
            raise _corrupt(f"entry {ledger_id}:{entry_id}: checksum or header mismatch at {location}")
        return payload

    def _fd(self, journal_index: int, segment_id: int) -> int:
        key = (journal_index, segment_id)
        fd = self._fds.get(key)
        if fd is None:
            with self._lock:
                fd = self._fds.get(key)
                if fd is None:
                    fd = self._fds[key] = os.open(self._segment_path(journal_index, segment_id), os.O_RDONLY)
        return fd

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
