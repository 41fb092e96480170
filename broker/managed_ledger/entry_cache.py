"""The broker's entry cache: recently added entries, so tailing consumers never read bookies.

First cut of Pulsar's ``EntryCacheManager``: one cache for the broker, keyed by position
(ledger ids are unique across topics), bounded by ``managedLedgerCacheSizeMB`` and evicted
oldest-first. Entries are immutable, so a cached entry never goes stale.
"""

from __future__ import annotations

from collections import OrderedDict

from broker.managed_ledger.position import Entry, Position


class EntryCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size_bytes = 0
        self._entries: OrderedDict[Position, Entry] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def insert(self, entry: Entry) -> None:
        if self.max_bytes <= 0 or entry.position in self._entries:
            return
        self._entries[entry.position] = entry
        self.size_bytes += len(entry.payload)
        while self.size_bytes > self.max_bytes and self._entries:
            _, evicted = self._entries.popitem(last=False)
            self.size_bytes -= len(evicted.payload)
            self.evictions += 1

    def get(self, position: Position) -> Entry | None:
        entry = self._entries.get(position)
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry

    def invalidate_ledger(self, ledger_id: int) -> None:
        for position in [p for p in self._entries if p.ledger_id == ledger_id]:
            self.size_bytes -= len(self._entries.pop(position).payload)

    def __len__(self) -> int:
        return len(self._entries)
