"""A bookie's config (``bookkeeper.conf``, BookKeeper's key names)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from minipulsar.config.settings import Alias, setting


@dataclass(frozen=True, slots=True, kw_only=True)
class BookieConfig:
    bind_address: str = setting("bindAddress", "127.0.0.1")
    advertised_address: str | None = setting("advertisedAddress", None)
    """Host part of the bookie id; defaults to bindAddress."""
    port: int = setting("bookiePort", 3181, min_value=0, max_value=65535)
    http_port: int = setting("httpServerPort", 8000, min_value=0, max_value=65535)
    metadata_url: str = setting("metadataServiceUri", "metastore://127.0.0.1:6680")
    session_timeout_ms: int = setting("zkTimeout", 30_000, min_value=100)
    journal_dirs: tuple[str, ...] = setting(
        "journalDirectories", ("data/bookkeeper/journal",), aliases=(Alias("journalDirectory"),)
    )
    """BookKeeper still reads its single-directory ``journalDirectory``, which Pulsar's
    bookkeeper.conf sets."""
    ledger_dirs: tuple[str, ...] = setting("ledgerDirectories", ("data/bookkeeper/ledgers",))
    journal_sync_data: bool = setting("journalSyncData", True)
    journal_max_group_wait_ms: float = setting("journalMaxGroupWaitMSec", 1.0, min_value=0)
    journal_buffered_writes_threshold: int = setting("journalBufferedWritesThreshold", 512 * 1024, min_value=1)
    journal_buffered_entries_threshold: int = setting("journalBufferedEntriesThreshold", 0, min_value=0)
    journal_flush_when_queue_empty: bool = setting("journalFlushWhenQueueEmpty", False)
    journal_max_size_mb: int = setting("journalMaxSizeMB", 2048, min_value=1)
    journal_prealloc_size_mb: int = setting("journalPreAllocSizeMB", 16, min_value=0)
    journal_queue_size: int = setting("journalQueueSize", 10_000, min_value=1)
    """Records queued in one journal and not yet durable; past it adds wait (BookKeeper: 10 000)."""
    journal_max_memory_size_mb: int = setting("journalMaxMemorySizeMb", 64, min_value=1)
    """Bytes queued in one journal and not yet durable (BookKeeper: 5% of direct memory)."""
    journal_remove_from_page_cache: bool = setting("journalRemoveFromPageCache", True)
    """True (BookKeeper's default): once a group is synced, its pages are dropped from the page
    cache (``posix_fadvise(DONTNEED)``): journal pages are never read again except by a replay,
    and a page cache that grows at the journal's write rate makes every new page cost a fresh
    allocation (bookie/journal_segment.py)."""
    journal_direct_io: bool = setting("minipulsarJournalDirectIO", True)
    """minipulsar's own key (BookKeeper's journal has no direct I/O): append journal groups with
    ``O_DIRECT`` from an aligned buffer instead of through the page cache, where the file system
    allows it (bookie/direct_io.py). journalRemoveFromPageCache then has nothing to drop."""
    journal_reuse_files: bool = setting("journalReuseFiles", True)
    """Write new journal segments over trimmed ones instead of deleting them (BookKeeper's key;
    false there). On here: writing into never-written blocks costs an allocation per group
    commit, and on a disk mounted with ``discard`` every deleted segment is handed back to
    the device first; measured here, 64 KiB adds went ~18 % faster with reuse. Up to two
    trimmed segments are kept (each up to journalMaxSizeMB)."""
    journal_adaptive_group_writes: bool = setting("journalAdaptiveGroupWrites", True)
    """True (BookKeeper's default): a group commit takes everything queued by the time it is
    due, in one write and one fsync; false: a group stops at journalBufferedWritesThreshold /
    journalBufferedEntriesThreshold and the rest waits for the next fsync (bookie/group_commit.py)."""
    # -- ledger storage (DbLedgerStorage, bookie/storage/) --
    db_storage_write_cache_max_size_mb: int = setting("dbStorage_writeCacheMaxSizeMb", 64, min_value=1)
    """Both halves of the write cache, split across the ledger dirs (BookKeeper: 25% of direct
    memory, e.g. 1 GiB on a 4 GiB heap+direct bookie). 64 MB suits a laptop running three
    bookies; one half fills in ~0.3 s at 100 MB/s, which keeps flushes large and sequential."""
    db_storage_max_throttle_time_ms: int = setting("dbStorage_maxThrottleTimeMs", 10_000, min_value=1)
    """How long an add may wait for room in a full write cache (its flush running, or failing)
    before it is refused with TooManyRequests (BookKeeper: 10 000, then
    OperationRejectedException → ETOOMANYREQUESTS; counted in bookie_rejected_write_requests).
    Such an add has not reached the journal: refusing it loses nothing acknowledged."""
    db_storage_read_ahead_cache_max_size_mb: int = setting("dbStorage_readAheadCacheMaxSizeMb", 32, min_value=1)
    """Read-ahead cache, split across the ledger dirs (BookKeeper: 25% of direct memory); 32 MB for a laptop."""
    db_storage_read_ahead_cache_batch_size: int = setting("dbStorage_readAheadCacheBatchSize", 100, min_value=0)
    """Entries read ahead after a cache miss, from the same entry log and ledger (BookKeeper: 100)."""
    db_storage_read_ahead_cache_batch_bytes_size: int = setting(
        "dbStorage_readAheadCacheBatchBytesSize", -1, min_value=-1
    )
    """Byte cap on one read-ahead batch; -1 = none (BookKeeper: -1)."""
    flush_interval_ms: int = setting("flushInterval", 10_000, min_value=1)
    """Checkpoint at least this often (ms): flush the write cache, persist the journal mark and
    delete the journal segments before it (BookKeeper's code default 10 000; Pulsar's
    bookkeeper.conf says 60 000, which means up to a minute of journal to replay at restart)."""
    log_size_limit: int = setting(
        "logSizeLimit", 256 * 1024 * 1024, min_value=64 * 1024, max_value=(1 << 32) - 16 * 1024 * 1024
    )
    """Roll to a new entry log past this many bytes (BookKeeper: 1 GiB). 256 MiB here: on a laptop
    disk, compaction rewrites whole logs, and smaller logs let GC give space back sooner.
    Capped below 4 GiB because a location keeps the offset in 32 bits."""
    db_storage_direct_io_entry_logger: bool = setting("dbStorage_directIOEntryLogger", True)
    """Write entry logs with ``O_DIRECT`` from an aligned buffer, bypassing the page cache, where
    the file system allows it (BookKeeper 4.16's key, false there; bookie/direct_io.py says why
    it is on here). Reads still go through the page cache; the read-ahead cache serves readers
    close behind the writers."""
    flush_entrylog_bytes: int = setting("flushEntrylogBytes", 0, min_value=0)
    """fdatasync an entry log every this many bytes written during a flush, 0 = only at the end
    (BookKeeper: 0; Pulsar's bookkeeper.conf: 256 MiB). With dbStorage_directIOEntryLogger (the
    default here) no dirty pages pile up, so 0 costs nothing; with page-cache entry logs set it
    to a few MiB: a whole write-cache half of dirty pages at once makes the kernel throttle
    every writer of the disk, the journal first."""
    num_read_worker_threads: int = setting("numReadWorkerThreads", 8, min_value=1)
    max_pending_read_requests_per_thread: int = setting("maxPendingReadRequestsPerThread", 2500, min_value=1)
    """Reads queued on one read thread; past it a read is answered TooManyRequests (BookKeeper:
    10 000; Pulsar's bookkeeper.conf: 2500)."""
    wait_timeout_on_response_backpressure_ms: int = setting("waitTimeoutOnResponseBackpressureMs", -1, min_value=-1)
    """A connection that has not taken its responses for this long (its unsent bytes above the
    high-water mark) gets no answer to a read until it does: its waiting reads are dropped,
    unanswered, and give their read-thread places back (BookKeeper: -1, off; 0 = at once; there
    every response is dropped, here adds are still answered). Off, such reads wait for the
    peer, or for the keep-alive to close it."""
    close_channel_on_response_timeout: bool = setting("closeChannelOnResponseTimeout", False)
    """When waitTimeoutOnResponseBackpressureMs expires, close the connection instead of only
    dropping its responses (BookKeeper: false)."""
    disk_usage_threshold: float = setting("diskUsageThreshold", 0.95, min_value=0.0, max_value=1.0)
    """A ledger dir whose used fraction is above this is full (BookKeeper: 0.95)."""
    disk_usage_warn_threshold: float = setting("diskUsageWarnThreshold", 0.90, min_value=0.0, max_value=1.0)
    """Above this a ledger dir is "almost full": logged (BookKeeper: 0.90)."""
    disk_usage_lwm_threshold: float = setting("diskUsageLwmThreshold", 0.90, min_value=0.0, max_value=1.0)
    """A read-only bookie turns writable again once total usage is below this. BookKeeper's
    default equals diskUsageThreshold, which leaves no hysteresis band: a bookie hovering at
    the threshold would move its registration on every check. 0.90 gives a 5-point band."""
    disk_check_interval_ms: int = setting("diskCheckInterval", 10_000, min_value=10)
    read_only_mode_enabled: bool = setting("readOnlyModeEnabled", True)
    """With every ledger dir full, or a journal that failed to write: turn read-only (true), or
    shut the bookie down (false; BookKeeper always shuts down on a journal failure)."""
    persist_bookie_status_enabled: bool = setting("persistBookieStatusEnabled", False)
    """Keep an operator's read-only choice (PUT /api/v1/bookie/state/readonly) across restarts,
    in a BOOKIE_STATUS file in every ledger dir (BookKeeper: false; there every transition is kept)."""
    force_read_only_bookie: bool = setting("forceReadOnlyBookie", False)
    """Start read-only and stay so: reads only, no new ledgers placed here (BookKeeper: false;
    it needs readOnlyModeEnabled)."""
    disk_usage_override_file: str | None = setting("minipulsarDiskUsageOverrideFile", None)
    """TEST ONLY (not a BookKeeper key): when set, the disk monitor reads every ledger dir's used
    fraction (a number in [0, 1]) from this file instead of from statvfs; a missing or unreadable
    file falls back to statvfs."""
    simulated_disk_model: str | None = setting("minipulsarSimulatedDiskModel", None)
    """BENCH ONLY (not a BookKeeper key): a SIMULATED slow disk for the journal and entry-log
    writers, e.g. ``hdd`` or ``hdd:fsync_ms=8,mb_s=120`` (bookie/disk_model.py). Unset: none."""
    # -- garbage collection and compaction (bookie/storage/gc.py) --
    gc_wait_time_ms: int = setting("gcWaitTime", 900_000, min_value=1)
    """A GC round every this many ms: drop the ledgers deleted from metadata, delete the entry
    logs left without live data, compact when an interval is due (BookKeeper code: 600 000;
    Pulsar's bookkeeper.conf: 900 000)."""
    minor_compaction_threshold: float = setting("minorCompactionThreshold", 0.2, min_value=0.0, max_value=1.0)
    """Minor compaction rewrites entry logs whose live fraction is below this (0: minor off)."""
    minor_compaction_interval_s: int = setting("minorCompactionInterval", 3600, min_value=0)
    """Seconds between minor compactions (0: minor off)."""
    major_compaction_threshold: float = setting("majorCompactionThreshold", 0.5, min_value=0.0, max_value=1.0)
    """Major compaction rewrites entry logs whose live fraction is below this (0: major off;
    BookKeeper code: 0.8, Pulsar's bookkeeper.conf: 0.5)."""
    major_compaction_interval_s: int = setting("majorCompactionInterval", 86_400, min_value=0)
    """Seconds between major compactions (0: major off)."""
    minor_compaction_max_time_ms: int = setting("minorCompactionMaxTimeMillis", -1, min_value=-1)
    """A minor compaction stops starting new work after this long (-1: no bound)."""
    major_compaction_max_time_ms: int = setting("majorCompactionMaxTimeMillis", -1, min_value=-1)
    """A major compaction stops starting new work after this long (-1: no bound)."""
    is_throttle_by_bytes: bool = setting("isThrottleByBytes", False)
    """Throttle compaction by compactionRateByBytes instead of compactionRateByEntries."""
    compaction_rate_by_entries: int = setting(
        "compactionRateByEntries", 1000, aliases=(Alias("compactionRate"),), min_value=1
    )
    """Entries per second compaction may copy."""
    compaction_rate_by_bytes: int = setting("compactionRateByBytes", 1_000_000, min_value=1)
    """Bytes per second compaction may copy (with isThrottleByBytes)."""
    is_force_gc_allow_when_no_space: bool = setting("isForceGCAllowWhenNoSpace", False)
    """Ledger dirs almost full or full: run compaction at once to win space back (true), or
    suspend it so that copying does not fill the disk further (false: major above
    diskUsageWarnThreshold, minor as well above diskUsageThreshold)."""
    max_frame_size: int = setting("nettyMaxFrameSizeBytes", 5 * 1024 * 1024 + 64 * 1024, min_value=1024)

    def __post_init__(self) -> None:
        if not self.journal_dirs:
            raise ValueError("journalDirectories must name at least one directory")
        if not self.ledger_dirs:
            raise ValueError("ledgerDirectories must name at least one directory")
        named = [os.path.normpath(os.path.abspath(d)) for d in (*self.journal_dirs, *self.ledger_dirs)]
        if len(set(named)) < len(named):
            twice = sorted({d for d in named if named.count(d) > 1})
            raise ValueError(
                f"each journal and ledger directory must be its own: {', '.join(twice)} is named twice "
                f"(journalDirectories={','.join(self.journal_dirs)} "
                f"ledgerDirectories={','.join(self.ledger_dirs)})"
            )
        if self.force_read_only_bookie and not self.read_only_mode_enabled:
            raise ValueError("forceReadOnlyBookie=true needs readOnlyModeEnabled=true")
        if self.minor_compaction_threshold > self.major_compaction_threshold:
            raise ValueError(
                f"minorCompactionThreshold ({self.minor_compaction_threshold}) must not exceed "
                f"majorCompactionThreshold ({self.major_compaction_threshold})"
            )
        if not 0 < self.disk_usage_threshold < 1:  # as BookKeeper's DiskChecker.validateThreshold
            raise ValueError(f"diskUsageThreshold ({self.disk_usage_threshold}) must be above 0 and below 1")
        if self.disk_usage_warn_threshold > self.disk_usage_threshold:
            raise ValueError(
                f"diskUsageWarnThreshold ({self.disk_usage_warn_threshold}) must not exceed "
                f"diskUsageThreshold ({self.disk_usage_threshold}); lowering diskUsageThreshold "
                f"below 0.9 needs diskUsageWarnThreshold and diskUsageLwmThreshold set too"
            )
        if not self.disk_usage_lwm_threshold <= self.disk_usage_threshold:
            raise ValueError(
                f"diskUsageLwmThreshold ({self.disk_usage_lwm_threshold}) must not exceed "
                f"diskUsageThreshold ({self.disk_usage_threshold}); lowering "
                f"diskUsageThreshold below 0.9 needs diskUsageLwmThreshold set too"
            )

    @property
    def bookie_id(self) -> str:
        """``host:port``, BookKeeper's default bookie id (valid once the port is known)."""
        return f"{self.advertised_address or self.bind_address}:{self.port}"
