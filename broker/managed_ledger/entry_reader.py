"""Reading a managed ledger's entries: from the entry cache first, the rest from the bookies
within the broker's reads-in-flight bound; hits and misses counted per managed ledger and per
cursor, split into tailing reads (within ``managedLedgerCursorBackloggedThreshold`` entries of
the tail) and catch-up reads.

Entries read from the bookies are not inserted in the cache (Pulsar's default: caching for
backlogged cursors is opt-in there): the cache holds what was added while someone read near the tail.

Invariants:

- a read returns consecutive entries of one ledger, from ``start``, at least one when there is one;
- every entry read counts once, as a hit or a miss, tailing or catch-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from minipulsar import entry_format
from minipulsar.broker.managed_ledger.entry_cache import EntryCache, LedgerCache
from minipulsar.broker.managed_ledger.ledger_list import LedgerList
from minipulsar.broker.managed_ledger.position import Entry, Position

if TYPE_CHECKING:
    from minipulsar.bookkeeper.ledger_handle import LedgerHandle
    from minipulsar.broker.managed_ledger.ledger_client import LedgerClient

DEFAULT_ENTRY_SIZE_BYTES = 1024
"""Estimate of an entry's size before the topic has any (sizes bookie reads in advance)."""


class CursorReadCounters(Protocol):
    """A cursor's own count of its reads, split as :class:`ReadCounters` (a ManagedCursor)."""

    cache_hits_tailing: int
    cache_hits_catch_up: int
    cache_misses_tailing: int
    cache_misses_catch_up: int


@dataclass(slots=True)
class ReadCounters:
    """Entries served from the cache (hits) or the bookies (misses). A cursor carries the same
    four fields as ``cache_hits_tailing`` … attributes."""

    hits_tailing: int = 0
    hits_catch_up: int = 0
    misses_tailing: int = 0
    misses_catch_up: int = 0

    @property
    def hits(self) -> int:
        return self.hits_tailing + self.hits_catch_up

    @property
    def misses(self) -> int:
        return self.misses_tailing + self.misses_catch_up


class EntryReader:
    def __init__(
        self,
        ledgers: LedgerList,
        ledger_cache: LedgerCache,
        cache: EntryCache,
        bookkeeper: LedgerClient,
        backlogged_threshold: int,
    ) -> None:
        self._ledgers = ledgers
        self._ledger_cache = ledger_cache
        self._cache = cache
        self._bk = bookkeeper
        self._backlogged_threshold = backlogged_threshold
        self._handles: dict[int, LedgerHandle] = {}
        """Read handles of closed ledgers (the current one is read through its write handle)."""
        self.counters = ReadCounters()

    def add_handle(self, handle: LedgerHandle) -> None:
        self._handles[handle.ledger_id] = handle

    def forget(self, ledger_id: int) -> None:
        self._handles.pop(ledger_id, None)

    async def read(
        self, start: Position, max_entries: int, max_bytes: int | None, cursor: CursorReadCounters | None = None
    ) -> list[Entry]:
        """Up to ``max_entries`` consecutive entries from ``start`` within one ledger, at most
        ``max_bytes`` (but always one when there is one); counted here and on ``cursor``."""
        ledgers = self._ledgers
        start = ledgers.normalize(start)
        info = ledgers.get(start.ledger_id)
        if info is None:
            return []
        last = min(ledgers.last_entry_of(info), start.entry_id + max_entries - 1)
        if last < start.entry_id:
            return []
        threshold = self._backlogged_threshold
        tailing = ledgers.entries_from(start, threshold) < threshold
        entries, size, budget_spent = self._cached_run(start, last, max_bytes)
        hits, hit_bytes = len(entries), size
        next_id = start.entry_id + hits
        if next_id <= last and not budget_spent:
            remaining = None if max_bytes is None else max_bytes - size
            for entry in await self._read_from_bookies(start.ledger_id, next_id, last, remaining):
                if max_bytes is not None and entries and size + len(entry.payload) > max_bytes:
                    break
                entries.append(entry)
                size += len(entry.payload)
        self._count(cursor, tailing, hits, hit_bytes, len(entries) - hits, size - hit_bytes)
        return entries

    def _cached_run(self, start: Position, last: int, max_bytes: int | None) -> tuple[list[Entry], int, bool]:
        """The cached entries from ``start`` on, up to the first one not cached; and whether
        ``max_bytes`` stopped the run."""
        entries: list[Entry] = []
        size = 0
        get = self._ledger_cache.get
        for entry_id in range(start.entry_id, last + 1):
            entry = get(Position(start.ledger_id, entry_id))
            if entry is None:
                return entries, size, False
            if max_bytes is not None and entries and size + len(entry.payload) > max_bytes:
                return entries, size, True
            entries.append(entry)
            size += len(entry.payload)
        return entries, size, max_bytes is not None and size >= max_bytes

    async def _read_from_bookies(self, ledger_id: int, first: int, last: int, max_bytes: int | None) -> list[Entry]:
        """One range read, sized in advance by the average entry size (for ``max_bytes`` and the
        reads-in-flight bound, which counts the estimate until the read completes)."""
        average = self._average_entry_size()
        if max_bytes is not None:
            last = min(last, first + max(1, max_bytes // average) - 1)
        limiter = self._cache.reads_in_flight
        granted = await limiter.acquire((last - first + 1) * average)
        try:
            handle = await self._handle(ledger_id)
            read = await handle.read(first, last)
        finally:
            limiter.release(granted)
        return [
            Entry(Position(ledger_id, entry_id), payload, entry_format.num_messages(payload))
            for entry_id, payload in read
        ]

    def _average_entry_size(self) -> int:
        entries = self._ledgers.total_entries()
        return max(1, self._ledgers.total_size_bytes() // entries) if entries else DEFAULT_ENTRY_SIZE_BYTES

    async def _handle(self, ledger_id: int) -> LedgerHandle:
        current = self._ledgers.current
        if current is not None and current.ledger_id == ledger_id:
            return current
        handle = self._handles.get(ledger_id)
        if handle is None:
            handle = await self._bk.open_ledger(ledger_id, recovery=True)
            self._handles[ledger_id] = handle
        return handle

    def _count(
        self, cursor: CursorReadCounters | None, tailing: bool, hits: int, hit_bytes: int, misses: int, miss_bytes: int
    ) -> None:
        cache = self._cache
        cache.hits += hits
        cache.hit_bytes += hit_bytes
        cache.misses += misses
        cache.miss_bytes += miss_bytes
        counters = self.counters
        if tailing:
            counters.hits_tailing += hits
            counters.misses_tailing += misses
            if cursor is not None:
                cursor.cache_hits_tailing += hits
                cursor.cache_misses_tailing += misses
        else:
            counters.hits_catch_up += hits
            counters.misses_catch_up += misses
            if cursor is not None:
                cursor.cache_hits_catch_up += hits
                cursor.cache_misses_catch_up += misses

    # -- search ---------------------------------------------------------------------------------

    async def find_by_publish_time(self, publish_time_ms: int) -> Position:
        """The first entry published at or after ``publish_time_ms``, or the position past the
        tail: a binary search over the ledgers by their last entry, then over the entries of one,
        reading only batch headers. Assumes publish times grow along the log, as Pulsar does."""
        ledgers = self._ledgers
        candidates = [(info.ledger_id, last) for info in ledgers.infos if (last := ledgers.last_entry_of(info)) >= 0]
        low, high = 0, len(candidates)
        while low < high:
            middle = (low + high) // 2
            if await self._publish_time_at(Position(*candidates[middle])) >= publish_time_ms:
                high = middle
            else:
                low = middle + 1
        if low == len(candidates):
            return ledgers.next_position(ledgers.last_confirmed)
        ledger_id, entry_low, entry_high = candidates[low][0], 0, candidates[low][1]
        while entry_low < entry_high:
            middle = (entry_low + entry_high) // 2
            if await self._publish_time_at(Position(ledger_id, middle)) >= publish_time_ms:
                entry_high = middle
            else:
                entry_low = middle + 1
        return Position(ledger_id, entry_low)

    async def _publish_time_at(self, position: Position) -> int:
        """Read without counting: a search is not a consumer's cache hit or miss."""
        entry = self._ledger_cache.get(position)
        if entry is None:
            read = await self._read_from_bookies(position.ledger_id, position.entry_id, position.entry_id, None)
            entry = read[0] if read else None
        publish_time = entry_format.publish_time_ms(entry.payload) if entry is not None else None
        return -1 if publish_time is None else publish_time
