"""First-cut ledger storage: the journal segments ARE the entry store.

An add is durable once its journal group is synced, so this storage only remembers where the
journal put each payload (:class:`EntryIndex`, rebuilt by replaying every journal segment at
start) and reads payloads back with ``pread`` on a thread pool. Nothing is ever deleted.

What issue 3 replaces (DbLedgerStorage): a write cache flushed into entry logs in the ledger
directories, a persistent location index, checkpoints that let old journal segments be
deleted (here they are kept forever and fully replayed at every start), a read-ahead cache,
and GC/compaction of deleted ledgers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from bookie.journal_format import EntryLocation
from bookie.storage.base import LedgerStorage
from bookie.storage.entry_index import EntryIndex
from bookie.storage.journal_reader import JournalReader
from bookie.storage.ledger_state import LedgerState, LedgerStates
from minipulsar.errors import NoSuchEntryError, NoSuchLedgerError


class JournalLedgerStorage(LedgerStorage):
    def __init__(self, segment_path: Callable[[int, int], Path], read_threads: int = 8) -> None:
        self._ledgers = LedgerStates()
        self._index = EntryIndex()
        self._reader = JournalReader(segment_path, read_threads)

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        await asyncio.to_thread(self._reader.close)  # waits for reads in flight

    def add_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes,
                  location: EntryLocation) -> None:
        is_new = self._index.put(ledger_id, entry_id, location)
        self._ledgers.get_or_create(ledger_id).entry_added(entry_id, lac, is_new)

    def fence(self, ledger_id: int) -> bool:
        state = self._ledgers.get_or_create(ledger_id)
        was_fenced, state.fenced = state.fenced, True
        return not was_fenced

    def ledger(self, ledger_id: int) -> LedgerState | None:
        return self._ledgers.get(ledger_id)

    async def read_entries(self, ledger_id: int, first_entry_id: int, count: int,
                           max_bytes: int) -> list[tuple[int, bytes]]:
        if self._ledgers.get(ledger_id) is None:
            raise NoSuchLedgerError(f"ledger {ledger_id} is not on this bookie")
        locations = self._index.consecutive(ledger_id, first_entry_id, count, max_bytes)
        if not locations:
            raise NoSuchEntryError(f"entry {ledger_id}:{first_entry_id} is not on this bookie")
        return await self._reader.read(ledger_id, locations)

    @property
    def ledger_count(self) -> int:
        return len(self._ledgers)

    @property
    def entry_count(self) -> int:
        return self._index.entries
