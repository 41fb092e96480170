"""The entry-location index: (ledger, entry) → location in an entry log, in ``index.db``.

BookKeeper's ``EntryLocationIndex`` (a RocksDB). Written once per flush, inside the flush's
transaction, after the entry logs holding those locations were fsynced; read by any thread
through its own connection. A second location for the same entry replaces the first (the
entry was added again: a retry, ledger recovery, or a journal replay of entries whose flush
was not checkpointed before a crash).

Garbage collection deletes a ledger's rows when the ledger is deleted, and compaction moves an
entry to its copy with a compare-and-set (:meth:`EntryLocationIndex.move`): an entry re-added
meanwhile keeps its newer location.
"""

from __future__ import annotations

import functools
import itertools
import sqlite3
from collections.abc import Iterable, Sequence

from minipulsar.bookie.storage.index_db import IndexDb

ENTRIES_KEY = "entries"
"""meta counter: distinct (ledger, entry) pairs indexed."""


_ROWS_PER_INSERT = 4096
"""Rows per multi-row INSERT (3 parameters each; sqlite allows 32766): one statement step for
thousands of rows, where ``executemany`` steps — and releases and re-takes the GIL — per row
(~2x the CPU, and a GIL hand-off per entry that the event loop feels)."""


@functools.lru_cache(maxsize=64)
def _insert_rows_sql(rows: int) -> str:
    return "INSERT OR IGNORE INTO locations (ledger_id, entry_id, location) VALUES " + ",".join(["(?,?,?)"] * rows)


class EntryLocationIndex:
    def __init__(self, db: IndexDb) -> None:
        self.db = db

    @staticmethod
    def add_ledger_locations(cursor: sqlite3.Cursor, ledger_id: int, locations: Sequence[tuple[int, int]]) -> int:
        """Index one ledger's ``(entry_id, location)`` pairs; returns how many were new.

        Runs inside the flush transaction. New pairs are inserted in one pass; only when some
        already existed (rare) does a second pass update them.
        """
        inserted = 0
        for first in range(0, len(locations), _ROWS_PER_INSERT):
            chunk = locations[first : first + _ROWS_PER_INSERT]
            params: list[int] = []
            for entry_id, location in chunk:
                params += (ledger_id, entry_id, location)
            cursor.execute(_insert_rows_sql(len(chunk)), params)
            inserted += cursor.rowcount
        if inserted < len(locations):
            cursor.executemany(
                "UPDATE locations SET location = ? WHERE ledger_id = ? AND entry_id = ?",
                [(location, ledger_id, entry_id) for entry_id, location in locations],
            )
        return inserted

    @staticmethod
    def add_entry_locations(
        cursor: sqlite3.Cursor, ledger_id: int, entry_ids: Sequence[int], locations: Sequence[int]
    ) -> int:
        """:meth:`add_ledger_locations` from parallel lists (the flush's form: no pair per entry,
        the parameters flattened in C)."""
        inserted = 0
        for first in range(0, len(entry_ids), _ROWS_PER_INSERT):
            ids = entry_ids[first : first + _ROWS_PER_INSERT]
            params = list(
                itertools.chain.from_iterable(
                    zip(itertools.repeat(ledger_id), ids, locations[first : first + _ROWS_PER_INSERT])
                )
            )
            cursor.execute(_insert_rows_sql(len(ids)), params)
            inserted += cursor.rowcount
        if inserted < len(entry_ids):
            cursor.executemany(
                "UPDATE locations SET location = ? WHERE ledger_id = ? AND entry_id = ?",
                zip(locations, itertools.repeat(ledger_id), entry_ids),
            )
        return inserted

    def get(self, ledger_id: int, entry_id: int) -> int | None:
        """The entry's location, None if it is not indexed. Any thread."""
        row = (
            self.db.reader()
            .execute("SELECT location FROM locations WHERE ledger_id = ? AND entry_id = ?", (ledger_id, entry_id))
            .fetchone()
        )
        return None if row is None else row[0]

    def count(self) -> int:
        """Entries indexed (the meta counter, kept in step by every flush)."""
        return self.db.get_meta(ENTRIES_KEY)

    @staticmethod
    def move(cursor: sqlite3.Cursor, ledger_id: int, entry_id: int, old_location: int, new_location: int) -> bool:
        """Point the entry at ``new_location`` if it still points at ``old_location``."""
        cursor.execute(
            "UPDATE locations SET location = ? WHERE ledger_id = ? AND entry_id = ? AND location = ?",
            (new_location, ledger_id, entry_id, old_location),
        )
        return cursor.rowcount == 1

    @staticmethod
    def delete_ledgers(cursor: sqlite3.Cursor, ledger_ids: Iterable[int]) -> int:
        """Drop every entry of these ledgers; returns how many rows went."""
        deleted = 0
        for ledger_id in ledger_ids:
            cursor.execute("DELETE FROM locations WHERE ledger_id = ?", (ledger_id,))
            deleted += cursor.rowcount
        return deleted

    def locations_in_log(self, ledger_id: int, log_id: int) -> list[tuple[int, int]]:
        """The ledger's ``(entry_id, location)`` pairs that point into entry log ``log_id``. Any thread."""
        rows = self.db.reader().execute(
            "SELECT entry_id, location FROM locations WHERE ledger_id = ? AND location >= ? AND location < ?",
            (ledger_id, log_id << 32, (log_id + 1) << 32),
        )
        return rows.fetchall()
