"""A bookie's config (``bookkeeper.conf``, BookKeeper's key names)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from minipulsar.config.settings import Alias, setting


@dataclass(frozen=True, slots=True, kw_only=True)
class BookieConfig:
    """A bookie; keys follow BookKeeper's bk_server.conf and Pulsar's bookkeeper.conf."""

    bind_address: str = setting(
        "bindAddress",
        "127.0.0.1",
        doc="Address the bookie listens on.",
        upstream="minipulsar's own key; BookKeeper listens on every interface (or on listeningInterface).",
    )
    advertised_address: str | None = setting(
        "advertisedAddress",
        None,
        doc="Host part of the bookie id that clients connect to; empty: bindAddress.",
        upstream="BookKeeper's default: the address of listeningInterface.",
    )
    port: int = setting(
        "bookiePort", 3181, doc="Port brokers connect to; 0 picks a free one.", min_value=0, max_value=65535
    )
    http_port: int = setting(
        "httpServerPort",
        8000,
        doc="Port of the HTTP server: /metrics and the /api/v1/bookie endpoints; 0 picks a free one.",
        upstream="BookKeeper's default: 8080; Pulsar's bookkeeper.conf: 8000.",
        min_value=0,
        max_value=65535,
    )
    metadata_url: str = setting(
        "metadataServiceUri",
        "metastore://127.0.0.1:6680",
        doc="Where bookies register: metastore://h:p, zk+hierarchical://h:p[;h:p]/ledgers, zk:h:p[/chroot].",
        upstream="BookKeeper's bk_server.conf: zk+hierarchical://localhost:2181/ledgers (ZooKeeper).",
    )
    session_timeout_ms: int = setting(
        "zkTimeout",
        30_000,
        doc="Metadata session timeout (ms): a bookie silent this long loses its registration.",
        upstream="BookKeeper's default: 10000; Pulsar's bookkeeper.conf: 30000.",
        min_value=100,
    )
    journal_dirs: tuple[str, ...] = setting(
        "journalDirectories",
        ("data/bookkeeper/journal",),
        doc="Journal directories, comma-separated: one journal each; put them on a fast-syncing disk.",
        aliases=(Alias("journalDirectory"),),
    )
    """BookKeeper still reads its single-directory ``journalDirectory``, which Pulsar's
    bookkeeper.conf sets."""
    ledger_dirs: tuple[str, ...] = setting(
        "ledgerDirectories",
        ("data/bookkeeper/ledgers",),
        doc="Ledger storage directories, comma-separated: entry logs and indexes.",
    )
    journal_sync_data: bool = setting(
        "journalSyncData", True, doc="Sync each journal group to the disk before acknowledging its adds."
    )
    journal_max_group_wait_ms: float = setting(
        "journalMaxGroupWaitMSec",
        1.0,
        doc="Longest an add waits (ms) for others to share its journal write and sync.",
        upstream="BookKeeper's default: 2; Pulsar's bookkeeper.conf: 1.",
        min_value=0,
    )
    journal_buffered_writes_threshold: int = setting(
        "journalBufferedWritesThreshold",
        512 * 1024,
        doc="Bytes after which a journal group is written without waiting longer.",
        min_value=1,
    )
    journal_buffered_entries_threshold: int = setting(
        "journalBufferedEntriesThreshold",
        0,
        doc="Adds after which a journal group is written without waiting longer; 0: no such limit.",
        min_value=0,
    )
    journal_flush_when_queue_empty: bool = setting(
        "journalFlushWhenQueueEmpty", False, doc="Write a journal group as soon as no further add is queued."
    )
    journal_max_size_mb: int = setting(
        "journalMaxSizeMB", 2048, doc="Size (MB) at which a journal file is closed and a new one begun.", min_value=1
    )
    journal_prealloc_size_mb: int = setting(
        "journalPreAllocSizeMB",
        16,
        doc="Journal files grow by allocations of this size (MB); 0: with each write.",
        min_value=0,
    )
    journal_queue_size: int = setting(
        "journalQueueSize",
        10_000,
        doc="Adds queued in one journal and not yet durable; past it, adds wait.",
        min_value=1,
    )
    journal_max_memory_size_mb: int = setting(
        "journalMaxMemorySizeMb",
        64,
        doc="Bytes (MB) queued in one journal and not yet durable; past it, adds wait.",
        upstream="BookKeeper's default: 5% of the direct memory.",
        min_value=1,
    )
    journal_remove_from_page_cache: bool = setting(
        "journalRemoveFromPageCache", True, doc="Drop journal pages from the page cache once they are synced."
    )
    """Journal pages are never read again except by a replay, and a page cache that grows at the
    journal's write rate makes every new page cost a fresh allocation (``posix_fadvise(DONTNEED)``,
    bookie/journal_segment.py)."""
    journal_direct_io: bool = setting(
        "minipulsarJournalDirectIO",
        True,
        doc="Write journal groups with O_DIRECT, past the page cache, where the file system allows it.",
        upstream="minipulsar's own key (BookKeeper's journal has no direct I/O).",
    )
    """Groups are appended from an aligned buffer (bookie/direct_io.py); journalRemoveFromPageCache
    then has nothing to drop."""
    journal_reuse_files: bool = setting(
        "journalReuseFiles",
        True,
        doc="Write new journal files over trimmed ones instead of deleting those.",
        upstream="BookKeeper's default: false.",
    )
    """On here: writing into never-written blocks costs an allocation per group commit, and on a
    disk mounted with ``discard`` every deleted file is handed back to the device first; measured
    here, 64 KiB adds went ~18 % faster with reuse. Up to two trimmed files are kept (each up to
    journalMaxSizeMB)."""
    journal_adaptive_group_writes: bool = setting(
        "journalAdaptiveGroupWrites",
        True,
        doc="A journal group takes every add queued by the time it is due, in one write and one sync.",
    )
    """False: a group stops at journalBufferedWritesThreshold / journalBufferedEntriesThreshold and
    the rest waits for the next sync (bookie/group_commit.py)."""
    # -- ledger storage (DbLedgerStorage, bookie/storage/) --
    db_storage_write_cache_max_size_mb: int = setting(
        "dbStorage_writeCacheMaxSizeMb",
        64,
        doc="Write cache (MB, both halves), split across the ledger directories.",
        upstream="BookKeeper's default: 25% of the direct memory.",
        min_value=1,
    )
    """64 MB suits a laptop running three bookies; one half fills in ~0.3 s at 100 MB/s, which
    keeps flushes large and sequential."""
    db_storage_max_throttle_time_ms: int = setting(
        "dbStorage_maxThrottleTimeMs",
        10_000,
        doc="Longest an add waits (ms) for room in a full write cache before it is refused.",
        min_value=1,
    )
    """The refusal is TooManyRequests, as BookKeeper's OperationRejectedException (counted in
    bookie_rejected_write_requests). Such an add has not reached the journal: refusing it loses
    nothing acknowledged."""
    db_storage_read_ahead_cache_max_size_mb: int = setting(
        "dbStorage_readAheadCacheMaxSizeMb",
        32,
        doc="Read-ahead cache (MB), split across the ledger directories.",
        upstream="BookKeeper's default: 25% of the direct memory.",
        min_value=1,
    )
    db_storage_read_ahead_cache_batch_size: int = setting(
        "dbStorage_readAheadCacheBatchSize",
        100,
        doc="Entries read ahead after a cache miss, from the same entry log and ledger.",
        upstream="Pulsar's bookkeeper.conf: 1000 (BookKeeper's default: 100).",
        min_value=0,
    )
    db_storage_read_ahead_cache_batch_bytes_size: int = setting(
        "dbStorage_readAheadCacheBatchBytesSize",
        -1,
        doc="Byte cap on one read-ahead batch; -1: none.",
        min_value=-1,
    )
    flush_interval_ms: int = setting(
        "flushInterval",
        10_000,
        doc="Checkpoint at least this often (ms): flush the write cache and trim the journal.",
        upstream="Pulsar's bookkeeper.conf: 60000 (BookKeeper's default: 10000).",
        min_value=1,
    )
    """A checkpoint flushes the write cache, persists the journal mark and deletes the journal
    files before it; Pulsar's 60 s would mean up to a minute of journal to replay at restart."""
    log_size_limit: int = setting(
        "logSizeLimit",
        256 * 1024 * 1024,
        doc="Bytes after which an entry log is closed and a new one begun.",
        upstream="BookKeeper's default: 1073741824 (1 GiB).",
        min_value=64 * 1024,
        max_value=(1 << 32) - 16 * 1024 * 1024,
    )
    """256 MiB here: on a laptop disk, compaction rewrites whole logs, and smaller logs let GC give
    space back sooner. Capped below 4 GiB because a location keeps the offset in 32 bits."""
    db_storage_direct_io_entry_logger: bool = setting(
        "dbStorage_directIOEntryLogger",
        True,
        doc="Write entry logs with O_DIRECT, past the page cache, where the file system allows it.",
        upstream="BookKeeper's default: false.",
    )
    """Writes go from an aligned buffer (bookie/direct_io.py says why it is on here). Reads still
    go through the page cache; the read-ahead cache serves readers close behind the writers."""
    flush_entrylog_bytes: int = setting(
        "flushEntrylogBytes",
        0,
        doc="Sync an entry log every this many bytes written during a flush; 0: only at its end.",
        upstream="Pulsar's bookkeeper.conf: 33554432 (32 MiB; BookKeeper's default: 0).",
        min_value=0,
    )
    """With dbStorage_directIOEntryLogger (the default here) no dirty pages pile up, so 0 costs
    nothing; with page-cache entry logs set it to a few MiB: a whole write-cache half of dirty
    pages at once makes the kernel throttle every writer of the disk, the journal first."""
    num_read_worker_threads: int = setting(
        "numReadWorkerThreads", 8, doc="Threads that read entries from ledger storage.", min_value=1
    )
    max_pending_read_requests_per_thread: int = setting(
        "maxPendingReadRequestsPerThread",
        2500,
        doc="Reads queued on one read thread; past it, a read is answered TooManyRequests.",
        upstream="BookKeeper's default: 10000; Pulsar's bookkeeper.conf: 2500.",
        min_value=1,
    )
    max_reads_in_progress_limit: int = setting(
        "maxReadsInProgressLimit",
        0,
        doc="Reads in progress at once in the bookie; past it a read waits, its connection unread; 0: unlimited.",
        min_value=0,
    )
    """A read holds its place from arrival until answered; one that finds none free is blocked
    (``bookkeeper_server_READ_ENTRY_BLOCKED``), never refused (bookie/read_permits.py)."""
    wait_timeout_on_response_backpressure_ms: int = setting(
        "waitTimeoutOnResponseBackpressureMs",
        -1,
        doc="How long (ms) a connection may leave its responses untaken before its reads are dropped; -1: never.",
        min_value=-1,
    )
    """A connection whose unsent bytes are above the high-water mark gets no answer to a read
    until it takes them: its waiting reads are dropped, unanswered, and give their read-thread
    places back (0: at once; in BookKeeper every response is dropped, here adds are still
    answered). Off, such reads wait for the peer, or for the keep-alive to close it."""
    close_channel_on_response_timeout: bool = setting(
        "closeChannelOnResponseTimeout",
        False,
        doc="When waitTimeoutOnResponseBackpressureMs expires, close the connection instead.",
    )
    disk_usage_threshold: float = setting(
        "diskUsageThreshold",
        0.95,
        doc="Used fraction above which a ledger directory is full.",
        min_value=0.0,
        max_value=1.0,
    )
    disk_usage_warn_threshold: float = setting(
        "diskUsageWarnThreshold",
        0.90,
        doc='Used fraction above which a ledger directory is "almost full" (logged).',
        min_value=0.0,
        max_value=1.0,
    )
    disk_usage_lwm_threshold: float = setting(
        "diskUsageLwmThreshold",
        0.90,
        doc="Total used fraction below which a read-only bookie turns writable again.",
        upstream="BookKeeper's default: diskUsageThreshold (0.95).",
        min_value=0.0,
        max_value=1.0,
    )
    """BookKeeper's default leaves no hysteresis band: a bookie hovering at the threshold would
    move its registration on every check. 0.90 gives a 5-point band."""
    disk_check_interval_ms: int = setting(
        "diskCheckInterval", 10_000, doc="How often (ms) the ledger directories' usage is checked.", min_value=10
    )
    read_only_mode_enabled: bool = setting(
        "readOnlyModeEnabled",
        True,
        doc="With every ledger directory full or a journal failed: turn read-only (true) or shut down.",
    )
    """BookKeeper always shuts down on a journal failure."""
    persist_bookie_status_enabled: bool = setting(
        "persistBookieStatusEnabled",
        False,
        doc="Keep an operator's read-only choice across restarts, in every ledger directory.",
    )
    """The choice is made with PUT /api/v1/bookie/state/readonly and kept in a BOOKIE_STATUS
    file; BookKeeper keeps every transition."""
    force_read_only_bookie: bool = setting(
        "forceReadOnlyBookie",
        False,
        doc="Start read-only and stay so: reads only, no new ledgers here; needs readOnlyModeEnabled.",
    )
    disk_usage_override_file: str | None = setting(
        "minipulsarDiskUsageOverrideFile",
        None,
        doc="TEST ONLY: read every ledger directory's used fraction from this file instead of the disk.",
        upstream="minipulsar's own key.",
    )
    """The file holds a number in [0, 1]; a missing or unreadable file falls back to statvfs."""
    simulated_disk_model: str | None = setting(
        "minipulsarSimulatedDiskModel",
        None,
        doc="BENCH ONLY: a simulated slow disk for journal and entry-log writes, e.g. hdd:fsync_ms=8.",
        upstream="minipulsar's own key.",
    )
    """e.g. ``hdd`` or ``hdd:fsync_ms=8,mb_s=120`` (bookie/disk_model.py)."""
    add_error_above_adds_per_s: float = setting(
        "minipulsarAddErrorAboveAddsPerSecond",
        0.0,
        doc="LAB FAULT: refuse adds beyond this many a second with TooManyRequests (overload); 0: off.",
        upstream="minipulsar's own key.",
        min_value=0.0,
    )
    """A token bucket of one second's worth; refused adds take no token (bookie/add_fault.py)."""
    # -- garbage collection and compaction (bookie/storage/gc.py) --
    gc_wait_time_ms: int = setting(
        "gcWaitTime",
        900_000,
        doc="Garbage collection runs every this many ms.",
        upstream="BookKeeper's default: 600000; Pulsar's bookkeeper.conf: 900000.",
        min_value=1,
    )
    """A round drops the ledgers deleted from metadata, deletes the entry logs left without live
    data, and compacts when an interval is due."""
    minor_compaction_threshold: float = setting(
        "minorCompactionThreshold",
        0.2,
        doc="Minor compaction rewrites entry logs whose live fraction is below this; 0: off.",
        min_value=0.0,
        max_value=1.0,
    )
    minor_compaction_interval_s: int = setting(
        "minorCompactionInterval", 3600, doc="Seconds between minor compactions; 0: off.", min_value=0
    )
    major_compaction_threshold: float = setting(
        "majorCompactionThreshold",
        0.5,
        doc="Major compaction rewrites entry logs whose live fraction is below this; 0: off.",
        upstream="BookKeeper's default: 0.8; Pulsar's bookkeeper.conf: 0.5.",
        min_value=0.0,
        max_value=1.0,
    )
    major_compaction_interval_s: int = setting(
        "majorCompactionInterval", 86_400, doc="Seconds between major compactions; 0: off.", min_value=0
    )
    minor_compaction_max_time_ms: int = setting(
        "minorCompactionMaxTimeMillis",
        -1,
        doc="A minor compaction starts no new work after this long (ms); -1: no bound.",
        min_value=-1,
    )
    major_compaction_max_time_ms: int = setting(
        "majorCompactionMaxTimeMillis",
        -1,
        doc="A major compaction starts no new work after this long (ms); -1: no bound.",
        min_value=-1,
    )
    is_throttle_by_bytes: bool = setting(
        "isThrottleByBytes", False, doc="Throttle compaction by compactionRateByBytes, not compactionRateByEntries."
    )
    compaction_rate_by_entries: int = setting(
        "compactionRateByEntries",
        1000,
        doc="Entries per second compaction may copy.",
        aliases=(Alias("compactionRate"),),
        min_value=1,
    )
    compaction_rate_by_bytes: int = setting(
        "compactionRateByBytes",
        1_000_000,
        doc="Bytes per second compaction may copy, with isThrottleByBytes.",
        min_value=1,
    )
    is_force_gc_allow_when_no_space: bool = setting(
        "isForceGCAllowWhenNoSpace",
        False,
        doc="With ledger directories (almost) full, keep compacting to win space back instead of pausing.",
    )
    """False: major compaction is suspended above diskUsageWarnThreshold, minor as well above
    diskUsageThreshold, so that copying does not fill the disk further."""
    max_frame_size: int = setting(
        "nettyMaxFrameSizeBytes",
        5 * 1024 * 1024 + 64 * 1024,
        doc="Largest frame (bytes) the bookie accepts: an entry of maxMessageSize plus its headers.",
        upstream="BookKeeper's default: 5242880; Pulsar's bookkeeper.conf: 5253120 (5 MiB + 10 KiB).",
        min_value=1024,
    )

    # -- AutoRecovery (minipulsar/bookkeeper/replication/) --
    auto_recovery_daemon_enabled: bool = setting(
        "autoRecoveryDaemonEnabled",
        True,
        doc="Run AutoRecovery (the auditor election and a replication worker) inside the bookie.",
        upstream="BookKeeper's default: false; Pulsar's bookkeeper.conf: true.",
    )
    lost_bookie_recovery_delay_s: int = setting(
        "lostBookieRecoveryDelay",
        0,
        doc="Seconds the auditor waits after a bookie goes before it marks that bookie's ledgers.",
        min_value=0,
    )
    """The value under /ledgers/underreplication/lostBookieRecoveryDelay, when an operator set
    one (``minipulsar admin bookies lost-bookie-recovery-delay``), wins."""
    auditor_periodic_check_interval_s: int = setting(
        "auditorPeriodicCheckInterval",
        604_800,
        doc="Seconds between the auditor's checks of every ledger's fragments on their bookies; 0: off.",
        min_value=0,
    )
    auditor_periodic_bookie_check_interval_s: int = setting(
        "auditorPeriodicBookieCheckInterval",
        86_400,
        doc="Seconds between the auditor's audits of the bookies, besides one per registration change; 0: off.",
        min_value=0,
    )
    rereplication_entry_batch_size: int = setting(
        "rereplicationEntryBatchSize",
        10,
        doc="Entries a replication worker reads, then writes, in one batch.",
        min_value=1,
    )
    open_ledger_rereplication_grace_period_ms: int = setting(
        "openLedgerRereplicationGracePeriod",
        30_000,
        doc="How long (ms) an open ledger's writer may replace a lost bookie before the worker fences the ledger.",
        min_value=0,
    )
    lock_release_of_failed_ledger_grace_period_ms: int = setting(
        "lockReleaseOfFailedLedgerGracePeriod",
        300_000,
        doc="Longest (ms) a ledger whose re-replication failed is put aside before it is tried again.",
        min_value=0,
    )

    diagnostics_file: str | None = setting(
        "minipulsarDiagnosticsFile",
        None,
        doc="BENCH ONLY: append stall events (GC, event-loop lag, flushes, rolls) to this JSONL file.",
        upstream="minipulsar's own key.",
    )
    """minipulsar/diagnostics.py; empty (the default): not recorded. Several processes may share a file."""

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
