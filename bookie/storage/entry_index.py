"""In-memory entry index of the first-cut storage: (ledger, entry) → where the journal holds it.

Rebuilt from the journal replay at every start; never persisted (issue 3 replaces it with an
on-disk index written at checkpoints). About 150 bytes per entry: fine for a first cut, not
for a bookie holding hundreds of millions of entries.
"""

from __future__ import annotations

from bookie.journal_format import EntryLocation

ENTRY_OVERHEAD_BYTES = 16
"""What one ``[entry_id, payload]`` pair costs in a READ_ENTRY_RESPONSE beyond its payload."""


class EntryIndex:
    __slots__ = ("_ledgers", "entries")

    def __init__(self) -> None:
        self._ledgers: dict[int, dict[int, EntryLocation]] = {}
        self.entries = 0

    def put(self, ledger_id: int, entry_id: int, location: EntryLocation) -> bool:
        """Record where an entry is; True if it was not indexed before."""
        entries = self._ledgers.get(ledger_id)
        if entries is None:
            entries = self._ledgers[ledger_id] = {}
        is_new = entry_id not in entries
        entries[entry_id] = location
        self.entries += is_new
        return is_new

    def get(self, ledger_id: int, entry_id: int) -> EntryLocation | None:
        entries = self._ledgers.get(ledger_id)
        return None if entries is None else entries.get(entry_id)

    def consecutive(self, ledger_id: int, first_entry_id: int, count: int,
                    max_bytes: int) -> list[tuple[int, EntryLocation]]:
        """Locations of up to ``count`` consecutive entries from ``first_entry_id``.

        Stops at the first gap and before the payloads (plus per-entry overhead) pass
        ``max_bytes``; the first entry, when present, is always included.
        """
        entries = self._ledgers.get(ledger_id)
        if entries is None:
            return []
        found: list[tuple[int, EntryLocation]] = []
        total = 0
        for entry_id in range(first_entry_id, first_entry_id + count):
            location = entries.get(entry_id)
            if location is None:
                break
            total += location.length + ENTRY_OVERHEAD_BYTES
            if found and total > max_bytes:
                break
            found.append((entry_id, location))
        return found
