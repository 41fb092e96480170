"""The broker's entry cache: recently added entries, so tailing readers never
read bookies.

Two levels, as Pulsar's ``EntryCacheManager`` and ``RangeEntryCacheImpl``:

- :class:`EntryCache`, one per broker: the budget (``managedLedgerCacheSizeMB``), the total
  size, the counters, the periodic eviction task and the reads-in-flight limiter;
- :class:`LedgerCache`, one per managed ledger: an ``OrderedDict`` position → entry.

Entries enter a ledger cache only when added (in add order), so its dict order is position
order and insertion-time order at once: every eviction — by size (oldest first), by age,
up to a cursor position, of trimmed ledgers — pops from the front, O(entries evicted), and a
lookup is one dict probe. Entries are immutable, so a cached entry never goes stale.

Eviction:

- by size, after an insert that takes the total over the budget: down to
  ``managedLedgerCacheEvictionWatermark`` × budget, Pulsar's policy — the largest ledger caches
  making up half the total give up bytes in proportion to their size, oldest entries first;
- periodically (``managedLedgerCacheEvictionIntervalMs``): entries older than
  ``managedLedgerCacheEvictionTimeThresholdMillis``, and each ledger's entries before the
  position its managed ledger names (what every active cursor has read — or, with
  ``cacheEvictionByMarkDeletedPosition``, acknowledged).

Invariants:

- ``size_bytes`` and ``entries`` are the sums over the ledger caches;
- after an insert the total is within the budget (a budget of 0 caches nothing);
- a ledger cache's entries are in position order, which is also insertion order.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from minipulsar.broker.managed_ledger.position import Entry, Position
from minipulsar.broker.managed_ledger.reads_limiter import ReadsInFlightLimiter
from minipulsar.supervision import Periodic

if TYPE_CHECKING:
    from minipulsar.config import BrokerConfig

log = logging.getLogger(__name__)

MIB = 1024 * 1024


class LedgerCache:
    """One managed ledger's cached entries. ``eviction_position()`` names the first position
    still wanted by an active cursor (None: no active cursor, evict by age only)."""

    __slots__ = ("_entries", "eviction_position", "manager", "name", "size_bytes")

    def __init__(self, manager: EntryCache, name: str, eviction_position: Callable[[], Position | None]) -> None:
        self.manager = manager
        self.name = name
        self.eviction_position = eviction_position
        self.size_bytes = 0
        self._entries: OrderedDict[Position, tuple[Entry, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def insert(self, entry: Entry) -> bool:
        manager = self.manager
        size = len(entry.payload)
        if manager.max_bytes <= 0 or size > manager.max_bytes:
            return False
        entries = self._entries
        if entries and next(reversed(entries)) >= entry.position:
            return False  # only appends: keeps dict order == position order
        entries[entry.position] = (entry, time.monotonic())
        self.size_bytes += size
        manager._inserted(self, size)
        return True

    def get(self, position: Position) -> Entry | None:
        item = self._entries.get(position)
        return None if item is None else item[0]

    def invalidate_before(self, position: Position) -> int:
        """Drop entries before ``position``; returns how many."""
        return self._pop_front_while(lambda key, _: key < position)

    def invalidate_older_than(self, cutoff_s: float) -> int:
        return self._pop_front_while(lambda _, inserted_s: inserted_s < cutoff_s)

    def evict_oldest(self, size_bytes: int) -> int:
        """Drop the oldest entries until ``size_bytes`` are freed; returns the bytes freed."""
        freed = count = 0
        entries = self._entries
        while entries and freed < size_bytes:
            _, (entry, _) = entries.popitem(last=False)
            freed += len(entry.payload)
            count += 1
        if count:
            self._forget(freed, count)
        return freed

    def clear(self) -> None:
        freed = self.size_bytes
        count = len(self._entries)
        self._entries.clear()
        self._forget(freed, count)

    def _pop_front_while(self, predicate: Callable[[Position, float], bool]) -> int:
        entries = self._entries
        freed = count = 0
        while entries:
            key, (entry, inserted_s) = next(iter(entries.items()))
            if not predicate(key, inserted_s):
                break
            del entries[key]
            freed += len(entry.payload)
            count += 1
        if count:
            self._forget(freed, count)
        return count

    def _forget(self, freed_bytes: int, count: int) -> None:
        self.size_bytes -= freed_bytes
        self.manager._freed(self, freed_bytes, count)


class EntryCache:
    """The broker-wide cache budget and counters (entries): ``hits``, ``misses``, ``inserted``,
    ``evictions``; ``size_bytes`` is the total held."""

    def __init__(
        self,
        max_bytes: int,
        *,
        eviction_watermark: float = 0.9,
        eviction_interval_ms: float = 10,
        eviction_time_threshold_ms: float = 1000,
        max_reads_in_flight_bytes: int = 0,
    ) -> None:
        self.max_bytes = max_bytes
        self.eviction_watermark = eviction_watermark
        self.eviction_interval_ms = eviction_interval_ms
        self.eviction_time_threshold_ms = eviction_time_threshold_ms
        self.reads_in_flight = ReadsInFlightLimiter(max_reads_in_flight_bytes)
        self.size_bytes = 0
        self.entries = 0
        self.hits = 0
        self.misses = 0
        self.hit_bytes = 0
        self.miss_bytes = 0
        self.inserted = 0
        self.evictions = 0
        self.hits_rate = 0.0
        """Hits per second over the last stats interval (:meth:`update_rates`)."""
        self.misses_rate = 0.0
        self._rated = (0, 0)
        """(hits, misses) at the previous :meth:`update_rates`."""
        self._caches: dict[LedgerCache, None] = {}
        """Ledger caches holding entries (an ordered set), the only ones the periodic task visits."""
        self._eviction = Periodic(
            "entry cache eviction",
            lambda: max(0.001, self.eviction_interval_ms / 1000),
            self._evict_if_cached,
            logger=log,
        )

    @classmethod
    def from_config(cls, config: BrokerConfig) -> EntryCache:
        """The broker's cache, sized and tuned by its ``managedLedgerCache…`` keys."""
        return cls(
            config.managed_ledger_cache_size_mb * MIB,
            eviction_watermark=config.cache_eviction_watermark,
            eviction_interval_ms=config.cache_eviction_interval_ms,
            eviction_time_threshold_ms=config.cache_eviction_time_threshold_ms,
            max_reads_in_flight_bytes=config.max_reads_in_flight_size_mb * MIB,
        )

    def for_ledger(self, name: str, eviction_position: Callable[[], Position | None]) -> LedgerCache:
        return LedgerCache(self, name, eviction_position)

    def __len__(self) -> int:
        return self.entries

    # -- accounting (called by LedgerCache) ------------------------------------------------------

    def _inserted(self, cache: LedgerCache, size_bytes: int) -> None:
        self._caches[cache] = None
        self.size_bytes += size_bytes
        self.entries += 1
        self.inserted += 1
        if self.size_bytes > self.max_bytes:
            self._evict_to_watermark()

    def _freed(self, cache: LedgerCache, size_bytes: int, count: int) -> None:
        self.size_bytes -= size_bytes
        self.entries -= count
        if not len(cache):
            self._caches.pop(cache, None)

    def _evict_to_watermark(self) -> None:
        """Pulsar's ``EntryCacheDefaultEvictionPolicy``: the largest caches that hold half the
        total each free their share of the excess, oldest entries first."""
        to_free = self.size_bytes - int(self.max_bytes * self.eviction_watermark)
        if to_free <= 0:
            return
        largest = sorted(self._caches, key=lambda cache: cache.size_bytes, reverse=True)
        chosen, chosen_bytes = [], 0
        for cache in largest:
            chosen.append(cache)
            chosen_bytes += cache.size_bytes
            if chosen_bytes >= self.size_bytes / 2:
                break
        before = self.entries
        for cache in chosen:
            cache.evict_oldest(-(-to_free * cache.size_bytes // chosen_bytes))  # ceil: never short
        self.evictions += before - self.entries

    # -- periodic eviction ------------------------------------------------------------------------

    def evict(self, now_s: float | None = None) -> int:
        """One round of periodic eviction over every ledger cache; returns the entries dropped."""
        now_s = time.monotonic() if now_s is None else now_s
        cutoff_s = now_s - self.eviction_time_threshold_ms / 1000
        dropped = 0
        for cache in list(self._caches):
            position = cache.eviction_position()
            if position is not None:
                dropped += cache.invalidate_before(position)
            dropped += cache.invalidate_older_than(cutoff_s)
        self.evictions += dropped
        return dropped

    def _evict_if_cached(self) -> None:
        if self._caches:
            self.evict()

    def start(self) -> None:
        """Start the periodic eviction (every ``managedLedgerCacheEvictionIntervalMs``)."""
        if not self._eviction.running:
            self._eviction.start()

    async def stop(self) -> None:
        await self._eviction.stop()

    # -- rates ----------------------------------------------------------------------------------

    def update_rates(self, elapsed_s: float) -> None:
        """Hits and misses per second since the previous call (the broker's stats timer)."""
        if elapsed_s <= 0:
            return
        hits, misses = self._rated
        self.hits_rate = (self.hits - hits) / elapsed_s
        self.misses_rate = (self.misses - misses) / elapsed_s
        self._rated = (self.hits, self.misses)
