"""The read-ahead cache: entries read from entry logs ahead of the reader (BookKeeper's ``ReadCache``).

On a miss, the storage reads the entry and up to ``dbStorage_readAheadCacheBatchSize`` of the
ledger's following entries from the same entry log, and keeps the followers here, so a
catch-up reader going through a ledger hits this cache instead of the index and the disk.

Invariants:
- bounded: ``size_bytes`` (payloads + :data:`ENTRY_OVERHEAD_BYTES` each) never exceeds
  ``max_bytes`` after a :meth:`put_all`; the oldest insertions go first (BookKeeper evicts
  whole ring segments, also oldest first);
- thread-safe: every read thread shares one instance; one lock, held only for dict work.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

ENTRY_OVERHEAD_BYTES = 96


class ReadCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[int, int], bytes] = OrderedDict()
        self._lock = threading.Lock()
        self.size_bytes = 0

    def get(self, ledger_id: int, entry_id: int) -> bytes | None:
        return self._entries.get((ledger_id, entry_id))  # a single dict lookup: atomic, no lock

    def put_all(self, ledger_id: int, entries: Sequence[tuple[int, bytes]]) -> None:
        with self._lock:
            cache = self._entries
            for entry_id, payload in entries:
                key = (ledger_id, entry_id)
                previous = cache.pop(key, None)
                if previous is not None:
                    self.size_bytes -= len(previous) + ENTRY_OVERHEAD_BYTES
                cache[key] = payload
                self.size_bytes += len(payload) + ENTRY_OVERHEAD_BYTES
            while self.size_bytes > self.max_bytes and cache:
                _, evicted = cache.popitem(last=False)
                self.size_bytes -= len(evicted) + ENTRY_OVERHEAD_BYTES

    def delete_ledgers(self, ledger_ids: set[int]) -> None:
        """Drop these ledgers' entries (garbage collection: they were deleted). One pass."""
        with self._lock:
            for key in [k for k in self._entries if k[0] in ledger_ids]:
                self.size_bytes -= len(self._entries.pop(key)) + ENTRY_OVERHEAD_BYTES

    def __len__(self) -> int:
        return len(self._entries)
