"""One half of DbLedgerStorage's double-buffered write cache: entries not yet in an entry log.

:class:`~bookie.storage.single_directory.SingleDirectoryDbLedgerStorage` keeps two halves:
the *active* one receives the adds that the journal made durable, the other one is being
flushed (sorted by ledger, then entry) into the entry logs. They swap at each flush.

Invariants:
- only the event loop mutates a half (:meth:`put`, :meth:`put_run`, :meth:`clear`); read threads only
  :meth:`get`, and the flush thread only iterates a half that no longer receives adds. Each
  dict operation is atomic under the GIL, so a reader sees an entry or its absence, never a
  torn state;
- ``size_bytes`` counts payloads plus :data:`ENTRY_OVERHEAD_BYTES` per entry, so that many
  tiny entries are bounded too. The bound itself is enforced at admission (before the journal
  write), because an entry the journal made durable must never be refused here;
- a second put of the same (ledger, entry) replaces the first (an idempotent retry, or ledger
  recovery re-writing the same bytes).
"""

from __future__ import annotations

from collections.abc import Iterator

ENTRY_OVERHEAD_BYTES = 64
"""What one cached entry costs besides its payload (dict slot, key, bytes object header)."""


class WriteCache:
    __slots__ = ("_ledgers", "count", "size_bytes")

    def __init__(self) -> None:
        self._ledgers: dict[int, dict[int, bytes]] = {}
        """ledger id → entry id → payload. Per ledger, so that range reads and the sorted
        flush need no tuple keys and entries of a ledger sort in (mostly) append order."""
        self.size_bytes = 0
        self.count = 0

    def put(self, ledger_id: int, entry_id: int, payload: bytes) -> None:
        entries = self._ledgers.get(ledger_id)
        if entries is None:
            entries = self._ledgers[ledger_id] = {}
        previous = entries.get(entry_id)
        entries[entry_id] = payload
        if previous is None:
            self.count += 1
            self.size_bytes += len(payload) + ENTRY_OVERHEAD_BYTES
        else:
            self.size_bytes += len(payload) - len(previous)

    def put_run(self, ledger_id: int, entry_ids: list[int], payloads: list[bytes]) -> None:
        """:meth:`put` for a run of one ledger's entries, in one ``dict.update`` when none of
        them is here yet (the usual case: each entry is added once)."""
        entries = self._ledgers.get(ledger_id)
        if entries is None:
            entries = self._ledgers[ledger_id] = {}
        if not entries.keys().isdisjoint(entry_ids):  # re-added entries: replace them one by one
            for entry_id, payload in zip(entry_ids, payloads):
                self.put(ledger_id, entry_id, payload)
            return
        before = len(entries)
        entries.update(zip(entry_ids, payloads))
        added = len(entries) - before
        if added == len(entry_ids):
            self.size_bytes += sum(map(len, payloads)) + ENTRY_OVERHEAD_BYTES * added
        else:  # an entry twice in the run: the last payload stays
            self.size_bytes += sum(len(entries[entry_id]) for entry_id in set(entry_ids)) + ENTRY_OVERHEAD_BYTES * added
        self.count += added

    def get(self, ledger_id: int, entry_id: int) -> bytes | None:
        entries = self._ledgers.get(ledger_id)
        return None if entries is None else entries.get(entry_id)

    def entries_of(self, ledger_id: int) -> dict[int, bytes] | None:
        """The ledger's entries (do not mutate), None if it has none here."""
        return self._ledgers.get(ledger_id)

    def ledger_ids(self) -> list[int]:
        return list(self._ledgers)

    def sorted_entries(self) -> Iterator[tuple[int, int, bytes]]:
        """Every ``(ledger_id, entry_id, payload)`` in (ledger, entry) order: the flush order."""
        ledgers = self._ledgers
        for ledger_id in sorted(ledgers):
            entries = ledgers[ledger_id]
            for entry_id in sorted(entries):
                yield ledger_id, entry_id, entries[entry_id]

    def delete_ledger(self, ledger_id: int) -> None:
        """Drop the ledger's entries (garbage collection; the loop, on the active half only)."""
        entries = self._ledgers.pop(ledger_id, None)
        if entries:
            self.count -= len(entries)
            self.size_bytes -= sum(len(p) for p in entries.values()) + ENTRY_OVERHEAD_BYTES * len(entries)

    def clear(self) -> None:
        # A new dict, not dict.clear(): a reader thread may still be iterating the old one.
        self._ledgers = {}
        self.size_bytes = 0
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0
