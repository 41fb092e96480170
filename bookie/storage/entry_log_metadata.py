"""Per entry log: how many bytes each ledger holds in it (BookKeeper's ``EntryLogMetadata``).

What garbage collection needs: a log's live fraction is the bytes of its ledgers that still
exist over its total. Recorded in ``index.db`` (``entry_log_ledgers``) in the same transaction
as the locations, so it always describes exactly what the index points at; a flush whose
transaction was lost to a crash left only unreferenced bytes behind (dead from the start).
Bytes count whole records (header + payload), as BookKeeper counts them.

Garbage collection keeps the table in step: a deleted ledger's rows go with its locations,
compaction moves an entry's bytes from the old log's row to the new log's, and a deleted log's
rows go before its file. A row never counts less than the live records it covers (an entry
re-added elsewhere stays counted in its old log too), so a log whose rows sum to 0 holds
nothing the index points at.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from minipulsar.bookie.storage.index_db import IndexDb

LAST_LOG_ID_KEY = "last_entry_log_id"
"""meta: the highest entry-log id ever indexed (ids are never reused, even once GC deleted a log)."""


class EntryLogMetadataIndex:
    def __init__(self, db: IndexDb) -> None:
        self.db = db

    @staticmethod
    def add_usage(cursor: sqlite3.Cursor, usage: dict[tuple[int, int], int]) -> None:
        """Add ``{(log_id, ledger_id): bytes}`` of one flush (or compaction: negative for the
        log moved from), inside its transaction."""
        cursor.executemany(
            "INSERT INTO entry_log_ledgers (log_id, ledger_id, bytes) VALUES (?, ?, ?) "
            "ON CONFLICT(log_id, ledger_id) DO UPDATE SET bytes = bytes + excluded.bytes",
            [(log_id, ledger_id, size) for (log_id, ledger_id), size in usage.items()],
        )
        if usage:
            IndexDb.max_meta(cursor, LAST_LOG_ID_KEY, max(log_id for log_id, _ in usage))

    def usage(self, log_id: int) -> dict[int, int]:
        """ledger id → bytes in entry log ``log_id`` (blocking; any thread)."""
        rows = self.db.reader().execute("SELECT ledger_id, bytes FROM entry_log_ledgers WHERE log_id = ?", (log_id,))
        return dict(rows.fetchall())

    def log_ids(self) -> list[int]:
        rows = self.db.reader().execute("SELECT DISTINCT log_id FROM entry_log_ledgers ORDER BY log_id")
        return [row[0] for row in rows]

    def last_log_id(self) -> int:
        return self.db.get_meta(LAST_LOG_ID_KEY, 0)

    def live_bytes_by_log(self) -> dict[int, int]:
        """log id → bytes of ledgers that still exist in it (blocking; any thread)."""
        rows = self.db.reader().execute("SELECT log_id, SUM(bytes) FROM entry_log_ledgers GROUP BY log_id")
        return dict(rows.fetchall())

    @staticmethod
    def delete_ledgers(cursor: sqlite3.Cursor, ledger_ids: Iterable[int]) -> None:
        cursor.executemany("DELETE FROM entry_log_ledgers WHERE ledger_id = ?", [(i,) for i in ledger_ids])

    @staticmethod
    def delete_log(cursor: sqlite3.Cursor, log_id: int) -> None:
        cursor.execute("DELETE FROM entry_log_ledgers WHERE log_id = ?", (log_id,))
