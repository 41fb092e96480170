"""Typed configuration, read from Pulsar-style ``key=value`` files and overridden by CLI flags.

Each server has one frozen dataclass. A field's metadata names the key as Pulsar, BookKeeper
or ZooKeeper spell it, so ``broker.conf`` / ``bookkeeper.conf`` / ``metastore.conf`` read
like the originals. Loading rules:

- ``#`` starts a comment line; blank lines are ignored; ``key=value`` with spaces trimmed;
- a key minipulsar does not know is logged as a warning by name and otherwise ignored (a real
  ``broker.conf`` holds hundreds of keys we do not use);
- a bad value for a known key raises :class:`ConfigError` naming the key and what it accepts;
- CLI flags are applied after the file, with the same parsing and checks.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from minipulsar.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

log = logging.getLogger(__name__)

T = TypeVar("T", bound="DataclassInstance")


def setting(
    key: str,
    default: Any,
    *,
    choices: tuple[str, ...] | None = None,
    min_value: float | None = None,
    max_value: float | None = None,
) -> Any:
    """A config field read from ``key``; ``choices`` / bounds are checked at load time."""
    return field(
        default=default,
        metadata={"key": key, "choices": choices, "min": min_value, "max": max_value},
    )


def parse_config_text(text: str, source: str = "<config>") -> dict[str, str]:
    """``key=value`` lines to a dict; raises ConfigError on a line with no ``=``."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{source}:{number}: expected key=value, got {raw!r}")
        values[key.strip()] = value.strip()
    return values


def load_config(cls: type[T], path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> T:
    """Build ``cls`` from the file at ``path`` (optional), then ``overrides`` (keys as in the file).

    Raises:
        ConfigError: unreadable file, malformed line, or a bad value for a known key.
    """
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")  # not the locale's: same file, same result
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"cannot read config file {path}: not UTF-8 text ({exc.reason})") from exc
        raw.update(parse_config_text(text, str(path)))
    raw.update({k: v for k, v in (overrides or {}).items() if v is not None})
    fields_by_key = {f.metadata["key"]: f for f in dataclasses.fields(cls) if "key" in f.metadata}
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        f = fields_by_key.get(key)
        if f is None:
            log.warning("config key %r is not used by minipulsar; ignoring it", key)
            continue
        kwargs[f.name] = _convert(key, value, hints[f.name], f.metadata)
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc)) from exc


def config_keys(cls: type) -> dict[str, Any]:
    """Key → default for every setting of ``cls`` (for docs and ``--help``)."""
    return {f.metadata["key"]: f.default for f in dataclasses.fields(cls) if "key" in f.metadata}


def _convert(key: str, value: Any, hint: Any, meta: Mapping[str, Any]) -> Any:
    optional = type(None) in typing.get_args(hint)
    if optional:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
        if value is None or (isinstance(value, str) and value == ""):
            return None
    text = value if isinstance(value, str) else None
    converted: object
    try:
        if hint is bool:
            converted = parse_bool(value)
        elif hint is int:
            converted = value if isinstance(value, int) and not isinstance(value, bool) else int(str(text).strip())
        elif hint is float:
            converted = float(value)
            if not math.isfinite(converted):  # inf and nan pass every range check
                raise ValueError(value)
        elif hint is str:
            converted = str(value)
        elif typing.get_origin(hint) in (list, tuple):
            items = value if isinstance(value, (list, tuple)) else [s.strip() for s in str(value).split(",")]
            converted = tuple(str(item) for item in items if str(item))
        else:
            raise AssertionError(f"unsupported config type {hint} for {key}")
    except (ValueError, TypeError):
        raise ConfigError(f"{key}={value!r}: expected {_describe(hint)}") from None
    _check_range(key, converted, meta)
    return converted


def parse_bool(value: Any) -> bool:
    """A config-style boolean: a bool, or true/yes/1/on and false/no/0/off in any case.

    Raises:
        ValueError: anything else.
    """
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise ValueError(value)


def _check_range(key: str, value: Any, meta: Mapping[str, Any]) -> None:
    choices = meta.get("choices")
    if choices and value not in choices:
        raise ConfigError(f"{key}={value!r}: accepted values are {', '.join(choices)}")
    low, high = meta.get("min"), meta.get("max")
    if low is not None and value < low:
        raise ConfigError(f"{key}={value!r}: must be >= {low}")
    if high is not None and value > high:
        raise ConfigError(f"{key}={value!r}: must be <= {high}")


def _describe(hint: Any) -> str:
    if hint is bool:
        return "true or false"
    if hint is int:
        return "an integer"
    if hint is float:
        return "a number"
    if typing.get_origin(hint) in (list, tuple):
        return "a comma-separated list"
    return getattr(hint, "__name__", str(hint))


# ---------------------------------------------------------------------------------------------
# The servers' configs. Defaults follow Pulsar's broker.conf / bookkeeper.conf unless noted.


@dataclass(frozen=True, slots=True, kw_only=True)
class MetastoreConfig:
    """The built-in metadata store; keys follow ZooKeeper's zoo.cfg where one exists."""

    bind_address: str = setting("bindAddress", "127.0.0.1")
    port: int = setting("clientPort", 6680, min_value=0, max_value=65535)
    data_dir: str = setting("dataDir", "data/metastore")
    snapshot_every_txns: int = setting("snapCount", 10_000, min_value=1)
    """Write a snapshot and start a new WAL after this many logged changes (ZooKeeper: snapCount)."""
    min_session_timeout_ms: int = setting("minSessionTimeout", 1_000, min_value=100)
    max_session_timeout_ms: int = setting("maxSessionTimeout", 60_000, min_value=100)
    wal_sync: bool = setting("forceSync", True)
    """fsync the WAL before answering (ZooKeeper: forceSync). Off only for throwaway tests."""

    def __post_init__(self) -> None:
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError("minSessionTimeout must not exceed maxSessionTimeout")


@dataclass(frozen=True, slots=True, kw_only=True)
class BookieConfig:
    bind_address: str = setting("bindAddress", "127.0.0.1")
    advertised_address: str | None = setting("advertisedAddress", None)
    """Host part of the bookie id; defaults to bindAddress."""
    port: int = setting("bookiePort", 3181, min_value=0, max_value=65535)
    http_port: int = setting("httpServerPort", 8000, min_value=0, max_value=65535)
    metadata_url: str = setting("metadataServiceUri", "metastore://127.0.0.1:6680")
    session_timeout_ms: int = setting("zkTimeout", 30_000, min_value=100)
    journal_dirs: tuple[str, ...] = setting("journalDirectories", ("data/bookkeeper/journal",))
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
    compaction_rate_by_entries: int = setting("compactionRateByEntries", 1000, min_value=1)
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


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    bind_address: str = setting("bindAddress", "127.0.0.1")
    advertised_address: str | None = setting("advertisedAddress", None)
    port: int = setting("brokerServicePort", 6650, min_value=0, max_value=65535)
    http_port: int = setting("webServicePort", 8080, min_value=0, max_value=65535)
    metadata_url: str = setting("metadataStoreUrl", "metastore://127.0.0.1:6680")
    cluster_name: str = setting("clusterName", "standalone")
    session_timeout_ms: int = setting("metadataStoreSessionTimeoutMillis", 30_000, min_value=100)
    keepalive_interval_s: int = setting("keepAliveIntervalSeconds", 30, min_value=1)
    max_message_size: int = setting("maxMessageSize", 5 * 1024 * 1024, min_value=1024)
    ensemble_size: int = setting("managedLedgerDefaultEnsembleSize", 2, min_value=1)
    write_quorum: int = setting("managedLedgerDefaultWriteQuorum", 2, min_value=1)
    ack_quorum: int = setting("managedLedgerDefaultAckQuorum", 2, min_value=1)
    bookkeeper_timeout_s: int = setting("bookkeeperClientTimeoutInSeconds", 30, min_value=1)
    ensemble_placement_policy: str = setting(
        "ensemblePlacementPolicy",
        "RackawareEnsemblePlacementPolicy",
        choices=(
            "DefaultEnsemblePlacementPolicy",
            "RackawareEnsemblePlacementPolicy",
            "LoadAwareEnsemblePlacementPolicy",
        ),
    )
    """BookKeeper's ``ensemblePlacementPolicy`` (short class name). Pulsar's default is rack-aware
    (``bookkeeperClientRackawarePolicyEnabled=true``), which is random while every bookie is in
    one rack."""
    bookie_load_poll_interval_s: int = setting("bookieLoadPollIntervalSeconds", 5, min_value=1)
    """How often the load-aware policy polls each bookie's load report (BOOKIE_INFO)."""
    speculative_read_timeout_ms: int = setting("bookkeeperClientSpeculativeReadTimeoutInMillis", 0, min_value=0)
    """After this long without an answer, also ask the next replica; 0 = off (Pulsar's default)."""
    health_check_enabled: bool = setting("bookkeeperClientHealthCheckEnabled", True)
    health_check_interval_s: int = setting("bookkeeperClientHealthCheckIntervalSeconds", 60, min_value=1)
    health_check_error_threshold: int = setting("bookkeeperClientHealthCheckErrorThresholdPerInterval", 5, min_value=1)
    quarantine_time_s: int = setting("bookkeeperClientHealthCheckQuarantineTimeInSeconds", 1800, min_value=0)
    quarantine_ratio: float = setting("bookkeeperClientQuarantineRatio", 1.0, min_value=0.0, max_value=1.0)
    """BookKeeper PR 2327: quarantine a faulty bookie only with this probability."""
    max_pending_add_bytes_per_ledger: int = setting(
        "bookkeeperClientMaxPendingAddBytesPerLedger", 16 * 1024 * 1024, min_value=1024
    )
    """minipulsar's own: add bytes not yet answered by every replica, per ledger; beyond it adds wait."""
    max_pending_add_bytes: int = setting("bookkeeperClientMaxPendingAddBytes", 128 * 1024 * 1024, min_value=1024)
    """minipulsar's own: the same bound for the whole BookKeeper client (all ledgers of the broker)."""
    dispatcher_max_read_batch_size: int = setting("dispatcherMaxReadBatchSize", 100, min_value=1)
    dispatcher_max_read_size_bytes: int = setting("dispatcherMaxReadSizeBytes", 5 * 1024 * 1024, min_value=1)
    dispatcher_max_round_robin_batch_size: int = setting("dispatcherMaxRoundRobinBatchSize", 20, min_value=1)
    precise_dispatcher_flow_control: bool = setting("preciseDispatcherFlowControl", False)
    max_unacked_messages_per_consumer: int = setting("maxUnackedMessagesPerConsumer", 50_000, min_value=0)
    max_unacked_messages_per_subscription: int = setting("maxUnackedMessagesPerSubscription", 200_000, min_value=0)
    key_shared_replica_points: int = setting("subscriptionKeySharedConsistentHashingReplicaPoints", 100, min_value=1)
    active_consumer_failover_delay_ms: int = setting("activeConsumerFailoverDelayTimeMillis", 1000, min_value=0)
    subscription_redelivery_tracker_enabled: bool = setting("subscriptionRedeliveryTrackerEnabled", True)
    managed_ledger_max_entries_per_ledger: int = setting("managedLedgerMaxEntriesPerLedger", 50_000, min_value=1)
    managed_ledger_max_size_per_ledger_mb: int = setting("managedLedgerMaxSizePerLedgerMbytes", 2048, min_value=1)
    managed_ledger_min_rollover_minutes: float = setting("managedLedgerMinLedgerRolloverTimeMinutes", 10.0, min_value=0)
    managed_ledger_max_rollover_minutes: float = setting(
        "managedLedgerMaxLedgerRolloverTimeMinutes", 240.0, min_value=0
    )
    retention_time_minutes: int = setting("defaultRetentionTimeInMinutes", 0, min_value=-1)
    """0: no retention (delete a ledger once every durable cursor consumed it); -1: forever."""
    retention_size_mb: int = setting("defaultRetentionSizeInMB", 0, min_value=-1)
    retention_check_interval_s: int = setting("retentionCheckIntervalInSeconds", 120, min_value=1)
    max_unacked_ranges_to_persist: int = setting("managedLedgerMaxUnackedRangesToPersist", 10_000, min_value=1)
    mark_delete_rate_limit: float = setting("managedLedgerDefaultMarkDeleteRateLimit", 1.0, min_value=0)
    """Cursor position writes per second per cursor (acks still wait for durability; see cursor.py)."""
    cursor_backlogged_threshold: int = setting("managedLedgerCursorBackloggedThreshold", 1000, min_value=1)
    cache_eviction_watermark: float = setting("managedLedgerCacheEvictionWatermark", 0.9, min_value=0.0, max_value=1.0)
    cache_eviction_interval_ms: int = setting("managedLedgerCacheEvictionIntervalMs", 10, min_value=1)
    cache_eviction_time_threshold_ms: int = setting("managedLedgerCacheEvictionTimeThresholdMillis", 1000, min_value=0)
    cache_eviction_by_mark_deleted_position: bool = setting("cacheEvictionByMarkDeletedPosition", False)
    max_reads_in_flight_size_mb: int = setting("managedLedgerMaxReadsInFlightSizeInMB", 0, min_value=0)
    """0: no bound on catch-up read bytes in flight (Pulsar's default)."""
    max_message_publish_buffer_size_mb: int = setting("maxMessagePublishBufferSizeInMB", 64, min_value=-1)
    """Broker-wide bytes of publishes not yet persisted; -1 off. Pulsar: max(64, direct memory / 2)."""
    deduplication_enabled: bool = setting("brokerDeduplicationEnabled", False)
    deduplication_entries_interval: int = setting("brokerDeduplicationEntriesInterval", 1000, min_value=1)
    deduplication_max_producers: int = setting("brokerDeduplicationMaxNumberOfProducers", 10_000, min_value=1)
    default_num_partitions: int = setting("defaultNumPartitions", 1, min_value=1)
    allow_auto_topic_creation_type: str = setting(
        "allowAutoTopicCreationType", "non-partitioned", choices=("non-partitioned", "partitioned")
    )
    # -- namespaces, bundles, ownership, lookup (reference §2; broker/namespace/ reads these) -------
    default_number_of_namespace_bundles: int = setting(
        "defaultNumberOfNamespaceBundles", 4, min_value=1, max_value=1024
    )
    """Bundles of a namespace created without an explicit count (Pulsar 4's default)."""
    default_namespace_bundle_split_algorithm: str = setting(
        "defaultNamespaceBundleSplitAlgorithm",
        "range_equally_divide",
        choices=("range_equally_divide", "topic_count_equally_divide"),
    )
    supported_namespace_bundle_split_algorithms: tuple[str, ...] = setting(
        "supportedNamespaceBundleSplitAlgorithms", ("range_equally_divide", "topic_count_equally_divide")
    )
    namespace_bundle_unloading_timeout_ms: int = setting("namespaceBundleUnloadingTimeoutMs", 60_000, min_value=1)
    max_concurrent_lookup_request: int = setting("maxConcurrentLookupRequest", 50_000, min_value=1)
    max_concurrent_topic_load_request: int = setting("maxConcurrentTopicLoadRequest", 5_000, min_value=1)
    stats_update_frequency_s: float = setting("statsUpdateFrequencyInSecs", 60.0, min_value=0.01)
    """How often topic rates (msgRateIn …) are computed from their counters; fractions allowed."""
    managed_ledger_cache_size_mb: int = setting("managedLedgerCacheSizeMB", 64, min_value=0)
    """Pulsar's default is 1/5 of direct memory; 64 MB suits a laptop-sized standalone."""
    max_pending_publish_requests_per_connection: int = setting(
        "maxPendingPublishRequestsPerConnection", 1000, min_value=1
    )
    # -- load balancer (reference §1.12; broker/loadbalance/settings.py reads these) -----------------
    load_balancer_enabled: bool = setting("loadBalancerEnabled", True)
    load_balancer_shedding_enabled: bool = setting("loadBalancerSheddingEnabled", True)
    load_balancer_load_shedding_strategy: str = setting(
        "loadBalancerLoadSheddingStrategy",
        "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
        choices=tuple(
            f"{prefix}{name}"
            for name in ("OverloadShedder", "ThresholdShedder", "UniformLoadShedder", "AvgShedder")
            for prefix in ("", "org.apache.pulsar.broker.loadbalance.impl.")
        ),
    )
    """Pulsar's class name or its short name; ThresholdShedder is Pulsar's default since 2.10."""
    load_balancer_load_placement_strategy: str = setting(
        "loadBalancerLoadPlacementStrategy",
        "org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate",
        choices=tuple(
            f"{prefix}{name}"
            for name in ("LeastLongTermMessageRate", "LeastResourceUsageWithWeight", "AvgShedder")
            for prefix in ("", "org.apache.pulsar.broker.loadbalance.impl.")
        ),
    )
    load_balancer_report_update_threshold_pct: float = setting(
        "loadBalancerReportUpdateThresholdPercentage", 10.0, min_value=0
    )
    load_balancer_report_update_min_interval_ms: int = setting(
        "loadBalancerReportUpdateMinIntervalMillis", 5000, min_value=10
    )
    """How often a broker checks whether its load report must be rewritten (Pulsar: a fixed 5 s)."""
    load_balancer_report_update_max_interval_minutes: float = setting(
        "loadBalancerReportUpdateMaxIntervalMinutes", 15.0, min_value=0
    )
    load_balancer_host_usage_check_interval_minutes: float = setting(
        "loadBalancerHostUsageCheckIntervalMinutes", 1.0, min_value=0.0001
    )
    load_balancer_shedding_interval_minutes: float = setting(
        "loadBalancerSheddingIntervalMinutes", 1.0, min_value=0.0001
    )
    load_balancer_shedding_grace_period_minutes: float = setting(
        "loadBalancerSheddingGracePeriodMinutes", 30.0, min_value=0
    )
    load_balancer_broker_overloaded_threshold_pct: float = setting(
        "loadBalancerBrokerOverloadedThresholdPercentage", 85.0, min_value=0
    )
    load_balancer_broker_threshold_shedder_pct: float = setting(
        "loadBalancerBrokerThresholdShedderPercentage", 10.0, min_value=0
    )
    load_balancer_history_resource_percentage: float = setting(
        "loadBalancerHistoryResourcePercentage", 0.9, min_value=0.0, max_value=1.0
    )
    load_balancer_cpu_resource_weight: float = setting("loadBalancerCPUResourceWeight", 1.0, min_value=0)
    load_balancer_memory_resource_weight: float = setting("loadBalancerMemoryResourceWeight", 1.0, min_value=0)
    load_balancer_direct_memory_resource_weight: float = setting(
        "loadBalancerDirectMemoryResourceWeight", 1.0, min_value=0
    )
    load_balancer_bandwidth_in_resource_weight: float = setting(
        "loadBalancerBandwithInResourceWeight", 1.0, min_value=0
    )  # sic: Pulsar spells it "Bandwith"
    load_balancer_bandwidth_out_resource_weight: float = setting(
        "loadBalancerBandwithOutResourceWeight", 1.0, min_value=0
    )
    load_balancer_bundle_unload_min_throughput_threshold_mb: float = setting(
        "loadBalancerBundleUnloadMinThroughputThreshold", 10.0, min_value=0
    )
    lower_boundary_shedding_enabled: bool = setting("lowerBoundarySheddingEnabled", False)
    load_balancer_average_resource_usage_difference_threshold_pct: float = setting(
        "loadBalancerAverageResourceUsageDifferenceThresholdPercentage", 10.0, min_value=0
    )
    load_balancer_msg_rate_difference_shedder_threshold: float = setting(
        "loadBalancerMsgRateDifferenceShedderThreshold", 50.0
    )
    load_balancer_msg_throughput_multiplier_difference_shedder_threshold: float = setting(
        "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold", 4.0
    )
    max_unload_percentage: float = setting("maxUnloadPercentage", 0.2, min_value=0.0, max_value=1.0)
    min_unload_message: float = setting("minUnloadMessage", 1000.0, min_value=0)
    min_unload_message_throughput: float = setting("minUnloadMessageThroughput", 1024.0 * 1024, min_value=0)
    max_unload_bundle_num_per_shedding: int = setting("maxUnloadBundleNumPerShedding", -1, min_value=-1)
    load_balancer_avg_shedder_low_threshold: float = setting("loadBalancerAvgShedderLowThreshold", 15.0, min_value=0)
    load_balancer_avg_shedder_high_threshold: float = setting("loadBalancerAvgShedderHighThreshold", 40.0, min_value=0)
    load_balancer_avg_shedder_hit_count_low_threshold: int = setting(
        "loadBalancerAvgShedderHitCountLowThreshold", 8, min_value=1
    )
    load_balancer_avg_shedder_hit_count_high_threshold: int = setting(
        "loadBalancerAvgShedderHitCountHighThreshold", 2, min_value=1
    )
    load_balancer_distribute_bundles_evenly_enabled: bool = setting("loadBalancerDistributeBundlesEvenlyEnabled", True)
    load_balancer_broker_max_topics: int = setting("loadBalancerBrokerMaxTopics", 50_000, min_value=1)
    load_balancer_resource_quota_update_interval_minutes: float = setting(
        "loadBalancerResourceQuotaUpdateIntervalMinutes", 15.0, min_value=0.0001
    )
    load_balancer_auto_bundle_split_enabled: bool = setting("loadBalancerAutoBundleSplitEnabled", False)
    """Pulsar's default is true; off here as the BIGO report recommends (a split disconnects clients)."""
    load_balancer_auto_unload_split_bundles_enabled: bool = setting("loadBalancerAutoUnloadSplitBundlesEnabled", True)
    load_balancer_namespace_bundle_max_topics: int = setting("loadBalancerNamespaceBundleMaxTopics", 1000, min_value=1)
    load_balancer_namespace_bundle_max_sessions: int = setting(
        "loadBalancerNamespaceBundleMaxSessions", 1000, min_value=-1
    )
    load_balancer_namespace_bundle_max_msg_rate: float = setting(
        "loadBalancerNamespaceBundleMaxMsgRate", 30_000.0, min_value=0
    )
    load_balancer_namespace_bundle_max_bandwidth_mbytes: float = setting(
        "loadBalancerNamespaceBundleMaxBandwidthMbytes", 100.0, min_value=0
    )
    load_balancer_namespace_maximum_bundles: int = setting("loadBalancerNamespaceMaximumBundles", 128, min_value=1)
    load_balancer_override_broker_nic_speed_gbps: float | None = setting(
        "loadBalancerOverrideBrokerNicSpeedGbps", None, min_value=0.000001
    )
    """NIC capacity for the bandwidth usage; unset: the physical NICs' link speed, else 1 Gbit/s."""
    expose_bundles_metrics_in_prometheus: bool = setting("exposeBundlesMetricsInPrometheus", False)

    def __post_init__(self) -> None:
        if not self.ensemble_size >= self.write_quorum >= self.ack_quorum:
            raise ValueError(
                "managedLedgerDefaultEnsembleSize >= managedLedgerDefaultWriteQuorum >= "
                f"managedLedgerDefaultAckQuorum must hold, got {self.ensemble_size}/"
                f"{self.write_quorum}/{self.ack_quorum}"
            )

    @property
    def max_frame_size(self) -> int:
        return self.max_message_size + 64 * 1024
