"""The entry-location index: (ledger, entry) → location in an entry log, in ``index.db``.

BookKeeper's ``EntryLocationIndex`` (a RocksDB). Written once per flush, inside the flush's
transaction, after the entry logs holding those locations were fsynced; read by any thread
through its own connection. A second location for the same entry replaces the first (the
entry was added again: a retry, ledger recovery, or a journal replay of entries whose flush
was not checkpointed before a crash).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from bookie.storage.index_db import IndexDb

ENTRIES_KEY = "entries"
"""meta counter: distinct (ledger, entry) pairs indexed."""


class EntryLocationIndex:
    def __init__(self, db: IndexDb) -> None:
        self.db = db

    @staticmethod
    def add_ledger_locations(cursor: sqlite3.Cursor, ledger_id: int,
                             locations: Sequence[tuple[int, int]]) -> int:
        """Index one ledger's ``(entry_id, location)`` pairs; returns how many were new.

        Runs inside the flush transaction. New pairs are inserted in one pass; only when some
        already existed (rare) does a second pass update them.
        """
        rows = [(ledger_id, entry_id, location) for entry_id, location in locations]
        cursor.executemany("INSERT OR IGNORE INTO locations (ledger_id, entry_id, location) VALUES (?, ?, ?)", rows)
        inserted = cursor.rowcount
        if inserted < len(rows):
            cursor.executemany("UPDATE locations SET location = ? WHERE ledger_id = ? AND entry_id = ?",
                               [(location, ledger_id, entry_id) for ledger_id, entry_id, location in rows])
        return inserted

    def get(self, ledger_id: int, entry_id: int) -> int | None:
        """The entry's location, None if it is not indexed. Any thread."""
        row = self.db.reader().execute(
            "SELECT location FROM locations WHERE ledger_id = ? AND entry_id = ?", (ledger_id, entry_id)).fetchone()
        return None if row is None else row[0]

    def count(self) -> int:
        """Entries indexed (the meta counter, kept in step by every flush)."""
        return self.db.get_meta(ENTRIES_KEY)
