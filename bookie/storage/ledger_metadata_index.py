"""The ledgers of one ledger dir: fenced flag, master key, LAC and last entry, in memory and in
``index.db`` (BookKeeper's ``LedgerData{exists, fenced, masterKey}``).

As BookKeeper's ``LedgerMetadataIndex`` does, every ledger's state is held in memory (loaded
at start): the add path checks the fence and moves the LAC without any I/O, and READ_LAC is
answered at once. That memory grows with the number of ledgers (a few dozen bytes each),
never with entries; deleting a ledger (GC) removes its state.

Invariants:
- the in-memory state changes only on the event loop (or on the replay thread before the
  bookie serves);
- a flush persists a snapshot taken on the loop when the write-cache halves are swapped: every
  ledger with entries in the half being flushed, and every ledger fenced or given its master
  key since the previous snapshot. So once a checkpoint is written, the fence of every FENCE
  record and the key of every LEDGER_KEY record before its mark are in the ``ledgers`` table,
  and the journal segments holding those records may go;
- rows are merged with ``max`` (``fenced`` is sticky, the first master key stays), so persisting an older snapshot after
  a newer one, or replaying the journal over a loaded state, never moves anything backwards.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from minipulsar.bookie.storage.index_db import IndexDb
from minipulsar.bookie.storage.ledger_state import LedgerState, LedgerStates

LedgerRow = tuple[int, int, int, int, bytes | None]
"""``(ledger_id, fenced, lac, last_entry_id, master_key)`` as persisted."""


class LedgerMetadataIndex:
    def __init__(self, db: IndexDb) -> None:
        self.db = db
        self.states = LedgerStates()
        self._changed_since_snapshot: set[int] = set()
        """Ledgers fenced or given their master key since the last snapshot."""

    def load(self) -> None:
        """Read every ledger's persisted state (blocking, at start)."""
        rows = self.db.writer.execute("SELECT ledger_id, fenced, lac, last_entry_id, master_key FROM ledgers")
        for ledger_id, fenced, lac, last_entry_id, master_key in rows:
            self.states.put(LedgerState(ledger_id, last_entry_id, lac, bool(fenced), master_key))

    def get(self, ledger_id: int) -> LedgerState | None:
        return self.states.get(ledger_id)

    def fence(self, ledger_id: int) -> bool:
        """Fence the ledger (creating it if unknown); True if it was not fenced before."""
        state = self.states.get_or_create(ledger_id)
        if state.fenced:
            return False
        state.fenced = True
        self._changed_since_snapshot.add(ledger_id)
        return True

    def set_master_key(self, ledger_id: int, master_key: bytes) -> bool:
        """Record the ledger's master key (creating it if unknown) unless it has one; True if it had none."""
        state = self.states.get_or_create(ledger_id)
        if state.master_key is not None:
            return False
        state.master_key = master_key
        self._changed_since_snapshot.add(ledger_id)
        return True

    @property
    def has_unpersisted_changes(self) -> bool:
        """Fences or master keys not in a snapshot yet."""
        return bool(self._changed_since_snapshot)

    def snapshot(self, ledgers_with_entries: Iterable[int]) -> list[LedgerRow]:
        """On the loop, at a swap: the rows the coming flush must persist."""
        ids = set(ledgers_with_entries)
        ids |= self._changed_since_snapshot
        self._changed_since_snapshot = set()
        rows: list[LedgerRow] = []
        for ledger_id in ids:
            state = self.states.get(ledger_id)
            if state is not None:
                rows.append((ledger_id, int(state.fenced), state.lac, state.last_entry_id, state.master_key))
        return rows

    @staticmethod
    def persist(cursor: sqlite3.Cursor, rows: list[LedgerRow]) -> None:
        """Merge ``rows`` into the ``ledgers`` table, inside the flush transaction."""
        cursor.executemany(
            "INSERT INTO ledgers (ledger_id, fenced, lac, last_entry_id, master_key) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(ledger_id) DO UPDATE SET fenced = max(fenced, excluded.fenced), "
            "lac = max(lac, excluded.lac), last_entry_id = max(last_entry_id, excluded.last_entry_id), "
            "master_key = coalesce(master_key, excluded.master_key)",
            rows,
        )

    def __len__(self) -> int:
        return len(self.states)

    # -- garbage collection ---------------------------------------------------------------------

    def forget(self, ledger_id: int) -> None:
        """On the loop: the ledger was deleted; its persisted rows go with :meth:`delete`."""
        self.states.remove(ledger_id)
        self._changed_since_snapshot.discard(ledger_id)

    @staticmethod
    def delete(cursor: sqlite3.Cursor, ledger_ids: Iterable[int]) -> None:
        cursor.executemany("DELETE FROM ledgers WHERE ledger_id = ?", [(i,) for i in ledger_ids])

    def persisted_ids(self) -> list[int]:
        """Every ledger id in the ``ledgers`` table (blocking; any thread)."""
        return [row[0] for row in self.db.reader().execute("SELECT ledger_id FROM ledgers")]
