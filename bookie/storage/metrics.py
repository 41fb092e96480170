"""DbLedgerStorage metrics under BookKeeper's names (``bookie_`` + the stat name
with ``-`` turned into ``_``).

Latencies are histograms in milliseconds (BookKeeper exports OpStats summaries in ms); counters
whose exact name matters are monotonic Gauges, as in :mod:`bookie.metrics`. The size gauges
sum over every open storage of the process (tests may run several bookies in one process).
"""

from __future__ import annotations

import weakref

from prometheus_client import Gauge, Histogram

from minipulsar.bookie.metrics import LATENCY_BUCKETS_MS

SIZE_BUCKETS_BYTES = (4096, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30)
BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)

STORAGES: weakref.WeakSet = weakref.WeakSet()
"""Open :class:`~bookie.storage.single_directory.SingleDirectoryDbLedgerStorage` objects."""

# -- flush / checkpoint ---------------------------------------------------------------------------
FLUSH = Histogram(
    "bookie_flush", "Checkpoint: write-cache flush into entry logs + index + lastMark (ms)", buckets=LATENCY_BUCKETS_MS
)
FLUSH_ENTRYLOG = Histogram(
    "bookie_flush_entrylog", "Flush: appending to and fsyncing the entry logs (ms)", buckets=LATENCY_BUCKETS_MS
)
FLUSH_LOCATIONS_INDEX = Histogram(
    "bookie_flush_locations_index",
    "Flush: committing the entry-location index transaction (ms)",
    buckets=LATENCY_BUCKETS_MS,
)
FLUSH_LEDGER_INDEX = Histogram(
    "bookie_flush_ledger_index", "Flush: writing the ledgers' state (ms)", buckets=LATENCY_BUCKETS_MS
)
FLUSH_SIZE = Histogram("bookie_flush_size", "Flush: bytes of entries flushed", buckets=SIZE_BUCKETS_BYTES)
CHECKPOINTS = Gauge("bookie_checkpoints", "Checkpoints completed (monotonic; minipulsar)")

# -- write path -----------------------------------------------------------------------------------
THROTTLED_WRITE_REQUESTS = Gauge(
    "bookie_throttled_write_requests", "Adds that waited for room in the write cache (monotonic)"
)
THROTTLED_WRITE = Histogram(
    "bookie_throttled_write", "Time an add waited for room in the write cache (ms)", buckets=LATENCY_BUCKETS_MS
)
REJECTED_WRITE_REQUESTS = Gauge(
    "bookie_rejected_write_requests",
    "Adds refused (TooManyRequests) after waiting dbStorage_maxThrottleTimeMs "
    "for room in the write cache, before the journal (monotonic)",
)

WRITE_CACHE_SIZE = Gauge("bookie_write_cache_size", "Bytes in the write caches (both halves)")
WRITE_CACHE_SIZE.set_function(lambda: sum(s.write_cache_size_bytes for s in list(STORAGES)))
WRITE_CACHE_COUNT = Gauge("bookie_write_cache_count", "Entries in the write caches (both halves)")
WRITE_CACHE_COUNT.set_function(lambda: sum(s.write_cache_count for s in list(STORAGES)))
READ_CACHE_SIZE = Gauge("bookie_read_cache_size", "Bytes in the read-ahead caches")
READ_CACHE_SIZE.set_function(lambda: sum(s.read_cache.size_bytes for s in list(STORAGES)))
READ_CACHE_COUNT = Gauge("bookie_read_cache_count", "Entries in the read-ahead caches")
READ_CACHE_COUNT.set_function(lambda: sum(len(s.read_cache) for s in list(STORAGES)))

# -- read path ------------------------------------------------------------------------------------
READ_ENTRY = Histogram(
    "bookie_read_entry", "Storage read of one READ_ENTRY range, off the loop (ms)", buckets=LATENCY_BUCKETS_MS
)
READ_LOCATIONS_INDEX_TIME = Histogram(
    "bookie_read_locations_index_time", "Index lookup of one entry (ms)", buckets=LATENCY_BUCKETS_MS
)
READ_ENTRYLOG_TIME = Histogram(
    "bookie_read_entrylog_time", "Entry-log read of one entry (ms)", buckets=LATENCY_BUCKETS_MS
)
READAHEAD_TIME = Histogram("bookie_readahead_time", "Reading one read-ahead batch (ms)", buckets=LATENCY_BUCKETS_MS)
READAHEAD_BATCH_COUNT = Histogram("bookie_readahead_batch_count", "Entries per read-ahead batch", buckets=BATCH_BUCKETS)
READAHEAD_BATCH_SIZE = Histogram(
    "bookie_readahead_batch_size", "Bytes per read-ahead batch", buckets=SIZE_BUCKETS_BYTES
)
READ_CACHE_HITS = Gauge("bookie_read_cache_hits", "Entries served from the read-ahead cache (monotonic)")
READ_CACHE_MISSES = Gauge("bookie_read_cache_misses", "Entries not in the read-ahead cache (monotonic)")
WRITE_CACHE_HITS = Gauge("bookie_write_cache_hits", "Entries served from the write cache (monotonic)")
WRITE_CACHE_MISSES = Gauge("bookie_write_cache_misses", "Entries not in the write cache (monotonic)")

# -- garbage collection and compaction (bookie/storage/gc.py) -------------------------------------
# BookKeeper's GarbageCollectorStats under the ``bookie_gc_`` scope.
MAJOR_COMPACTION_TOTAL = Gauge("bookie_gc_MAJOR_COMPACTION_TOTAL", "Major compactions run (monotonic)")
MINOR_COMPACTION_TOTAL = Gauge("bookie_gc_MINOR_COMPACTION_TOTAL", "Minor compactions run (monotonic)")
RECLAIMED_COMPACTION_SPACE_BYTES = Gauge(
    "bookie_gc_RECLAIMED_COMPACTION_SPACE_BYTES",
    "Bytes freed by compaction: compacted logs' sizes minus what was copied out of them (monotonic)",
)
RECLAIMED_DELETION_SPACE_BYTES = Gauge(
    "bookie_gc_RECLAIMED_DELETION_SPACE_BYTES", "Bytes freed by deleting entry logs without live data (monotonic)"
)
DELETED_LEDGER_TOTAL = Gauge(
    "bookie_gc_DELETED_LEDGER_TOTAL", "Ledgers removed because their metadata was deleted (monotonic)"
)
COMPACTED_ENTRY_TOTAL = Gauge(
    "bookie_gc_COMPACTED_ENTRY_TOTAL", "Live entries copied by compaction into new entry logs (monotonic; minipulsar)"
)
ACTIVE_LEDGER_COUNT = Gauge("bookie_gc_ACTIVE_LEDGER_COUNT", "Ledgers on this bookie at the last GC round")
ACTIVE_ENTRY_LOG_COUNT = Gauge("bookie_gc_ACTIVE_ENTRY_LOG_COUNT", "Entry logs after the last GC round")
ACTIVE_ENTRY_LOG_SPACE_BYTES = Gauge(
    "bookie_gc_ACTIVE_ENTRY_LOG_SPACE_BYTES", "Bytes of the entry logs after the last GC round"
)
GC_THREAD_RUNTIME = Histogram(
    "bookie_gc_GC_THREAD_RUNTIME",
    "One GC round, compaction included (ms)",
    buckets=LATENCY_BUCKETS_MS + (30_000, 120_000, 600_000),
)
