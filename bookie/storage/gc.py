"""Garbage collection of the ledger storage (BookKeeper's ``GarbageCollectorThread`` with the
``ScanAndCompareGarbageCollector``).

Every ``gcWaitTime`` (or when forced: ``PUT /api/v1/bookie/gc``) one round runs, dir by dir:

1. **deleted ledgers** (scan and compare): the ledgers present locally (in memory and in the
   ``ledgers`` table) are snapshotted *first*, then the metadata store is listed
   (``/ledgers/L{id}``, :mod:`minipulsar.ledger_paths`). A client creates a ledger's metadata
   before writing any entry, so a ledger of the local snapshot that is absent from the later
   listing was deleted; a ledger created after the snapshot is not a candidate at all. Each
   candidate is then checked once more on its own key (BookKeeper's ``verifyMetadataOnGc``: a
   listing cut short never deletes anything), and one that got an entry since the snapshot
   (being written right now) is kept for a later round. The others leave memory (state,
   write cache) on the loop, the read-ahead cache on the GC thread, then the index
   (locations, ledgers, usage) in one transaction on the flush thread — after any flush
   already holding their entries, since the flush thread runs jobs in order. Except a half
   whose flush failed and is retried after that transaction: its entries of deleted ledgers
   are indexed again (and the ledger known again after a restart) until the next round
   deletes them once more;
2. **dead entry logs**: logs whose live bytes are 0 are deleted;
3. **compaction**, if due: major when ``majorCompactionInterval`` elapsed (logs with usage
   below ``majorCompactionThreshold``), else minor on its interval and threshold
   (:mod:`bookie.storage.compaction` does the rewrite). Disk pressure suspends it: an almost
   full dir suspends major, a full dir minor too — unless ``isForceGCAllowWhenNoSpace``, with
   which pressure *forces* a compaction instead, to win space back.

Invariants:
- the entry log flushes append to, and any newer one, is never deleted or compacted (only
  logs below the current one, read on the flush thread, are looked at);
- nothing blocking runs on the event loop: scans and reads run on the GC thread, index and
  entry-log writes on the storage's flush thread (:meth:`DbLedgerStorage.run_exclusive`);
- one round at a time; closing cancels a round between steps, which is as safe as a crash;
- a step that fails with an I/O or index error (:data:`STEP_ERRORS`) is noted in the round's
  errors and the next step runs; a round that fails otherwise (a bug) is logged, and the next
  one still runs on time (:class:`~minipulsar.supervision.Periodic`).
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from minipulsar.bookie.storage import metrics
from minipulsar.bookie.storage.compaction import (
    CompactionAborted,
    CompactionStats,
    CompactionThrottle,
    EntryLogCompactor,
    EntryLogNotCompacted,
    delete_log,
    logs_to_compact,
    logs_to_delete,
)
from minipulsar.bookie.storage.db_ledger_storage import DbLedgerStorage
from minipulsar.bookie.storage.entry_logger import entry_log_path, list_entry_logs
from minipulsar.bookie.storage.single_directory import SingleDirectoryDbLedgerStorage
from minipulsar.config import BookieConfig
from minipulsar.errors import MiniPulsarError, ServiceNotReadyError
from minipulsar.ledger_paths import LEDGERS_ROOT, ledger_path, parse_ledger_node
from minipulsar.metadata.store import MetadataStore
from minipulsar.supervision import Periodic

log = logging.getLogger(__name__)

STEP_ERRORS: tuple[type[Exception], ...] = (OSError, sqlite3.Error)
"""What a round's step may fail with in operation (the disk, the index): the step is given up,
noted in the round's errors, and the next step runs."""
LISTING_ERRORS: tuple[type[Exception], ...] = (*STEP_ERRORS, MiniPulsarError)
"""The step that lists the metadata store may also find it unreachable."""


# -- what the collector needs from outside ------------------------------------------------------


class LedgerMetadataSource(Protocol):
    """Which ledgers still exist (BookKeeper's ``LedgerManager`` as the GC uses it)."""

    async def ledger_ids(self) -> set[int]:
        """Every ledger with metadata now."""

    async def ledger_exists(self, ledger_id: int) -> bool:
        """Whether the ledger's metadata exists now."""


class MetadataStoreLedgers:
    """:class:`LedgerMetadataSource` over the metadata store's ``/ledgers/L{id}`` keys."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    async def ledger_ids(self) -> set[int]:
        ids = (parse_ledger_node(name) for name in await self.store.children(LEDGERS_ROOT))
        return {ledger_id for ledger_id in ids if ledger_id is not None}

    async def ledger_exists(self, ledger_id: int) -> bool:
        return await self.store.exists(ledger_path(ledger_id))


@dataclass(frozen=True, slots=True)
class DiskPressure:
    almost_full: bool = False
    """Some ledger dir is above diskUsageWarnThreshold."""
    full: bool = False
    """Some ledger dir is above diskUsageThreshold."""


NO_PRESSURE = DiskPressure()


# -- when to compact (pure) -----------------------------------------------------------------------


class CompactionKind(str, enum.Enum):
    MAJOR = "major"
    MINOR = "minor"


@dataclass(frozen=True, slots=True)
class GcSettings:
    gc_wait_s: float
    minor_threshold: float
    minor_interval_s: float
    major_threshold: float
    major_interval_s: float
    minor_max_time_s: float | None
    major_max_time_s: float | None
    force_allowed_when_no_space: bool
    metadata_timeout_s: float

    @classmethod
    def from_config(cls, config: BookieConfig) -> GcSettings:
        def bound(ms: int) -> float | None:
            return None if ms < 0 else ms / 1000

        return cls(
            gc_wait_s=config.gc_wait_time_ms / 1000,
            minor_threshold=config.minor_compaction_threshold,
            minor_interval_s=config.minor_compaction_interval_s,
            major_threshold=config.major_compaction_threshold,
            major_interval_s=config.major_compaction_interval_s,
            minor_max_time_s=bound(config.minor_compaction_max_time_ms),
            major_max_time_s=bound(config.major_compaction_max_time_ms),
            force_allowed_when_no_space=config.is_force_gc_allow_when_no_space,
            metadata_timeout_s=2 * config.session_timeout_ms / 1000,  # BookKeeper: 2 x zkTimeout
        )

    @property
    def major_enabled(self) -> bool:
        return self.major_threshold > 0 and self.major_interval_s > 0

    @property
    def minor_enabled(self) -> bool:
        return self.minor_threshold > 0 and self.minor_interval_s > 0


@dataclass(frozen=True, slots=True)
class Trigger:
    """Why a round runs: the timer, or forced (with which compactions a force may start)."""

    force: bool = False
    force_major: bool = True
    force_minor: bool = True


TIMER = Trigger()


def compaction_due(
    settings: GcSettings, now: float, last_major: float, last_minor: float, trigger: Trigger, pressure: DiskPressure
) -> CompactionKind | None:
    """Which compaction this round runs, BookKeeper's rules: major first (when forced, or its
    interval elapsed), else minor; disk pressure suspends major (almost full) or both (full),
    unless isForceGCAllowWhenNoSpace, with which pressure forces the round instead."""
    force = trigger.force
    suspend_major = suspend_minor = False
    if settings.force_allowed_when_no_space:
        force = force or pressure.almost_full or pressure.full
    else:
        suspend_major = pressure.almost_full or pressure.full
        suspend_minor = pressure.full
    force_major = force and (trigger.force_major or not trigger.force)
    force_minor = force and (trigger.force_minor or not trigger.force)
    if not suspend_major and (force_major or (settings.major_enabled and now - last_major > settings.major_interval_s)):
        return CompactionKind.MAJOR
    if not suspend_minor and (force_minor or (settings.minor_enabled and now - last_minor > settings.minor_interval_s)):
        return CompactionKind.MINOR
    return None


# -- the collector ----------------------------------------------------------------------------------


@dataclass(slots=True)
class GcRoundResult:
    """What one round did (the answer to ``PUT /api/v1/bookie/gc``)."""

    forced: bool = False
    deleted_ledgers: int = 0
    deleted_entry_logs: int = 0
    reclaimed_deletion_bytes: int = 0
    compaction: str | None = None
    """"major", "minor" or None."""
    compacted_entry_logs: int = 0
    compacted_entries: int = 0
    reclaimed_compaction_bytes: int = 0
    errors: list[str] = field(default_factory=list)
    duration_ms: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class GarbageCollector:
    def __init__(
        self,
        storage: DbLedgerStorage,
        config: BookieConfig,
        metadata: LedgerMetadataSource,
        disk_pressure: Callable[[], DiskPressure] = lambda: NO_PRESSURE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.storage = storage
        self.settings = GcSettings.from_config(config)
        self.metadata = metadata
        self.disk_pressure = disk_pressure
        self._clock = clock
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bookie-gc")
        rate = config.compaction_rate_by_bytes if config.is_throttle_by_bytes else config.compaction_rate_by_entries
        self.compactor = EntryLogCompactor(
            self._on_gc_thread, storage.run_exclusive, CompactionThrottle(rate, config.is_throttle_by_bytes), clock
        )
        now = clock()
        self.last_major_s = now
        self.last_minor_s = now
        """BookKeeper starts both clocks at start-up: the first major compaction is a day away."""
        self._lock = asyncio.Lock()
        self._timer = Periodic("bookie-gc", self.settings.gc_wait_s, self._timer_round, logger=log)
        """A failed round (a bug) is logged, and the next one still runs on time."""
        self._rounds: set[asyncio.Task[GcRoundResult]] = set()
        self._forced_rounds = 0
        self._closed = False

    def start(self) -> None:
        """Run a round every gcWaitTime (the first one gcWaitTime from now, as BookKeeper)."""
        self._timer.start()

    async def close(self) -> None:
        """Stop: a round in progress is cancelled between two steps (each step is crash-safe)."""
        self._closed = True
        await self._timer.stop()
        rounds = list(self._rounds)
        for task in rounds:
            task.cancel()
        await asyncio.gather(*rounds, return_exceptions=True)
        await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown)

    async def force(self, force_major: bool = True, force_minor: bool = True) -> GcRoundResult:
        """Run one round now (after the one in progress), compaction forced, and return what
        it did. Disk pressure still suspends compaction (as BookKeeper's forceGC).

        Raises:
            ServiceNotReadyError: the collector is closed (the bookie is stopping).
        """
        if self._closed:
            raise ServiceNotReadyError("garbage collection is stopped")
        self._forced_rounds += 1
        try:
            return await self._round(Trigger(True, force_major, force_minor))
        finally:
            self._forced_rounds -= 1

    @property
    def forcing(self) -> bool:
        """A forced round is running or waiting (``GET /api/v1/bookie/gc``: is_in_force_gc)."""
        return self._forced_rounds > 0

    async def _timer_round(self) -> None:
        await self._round(TIMER)

    async def _round(self, trigger: Trigger) -> GcRoundResult:
        """One round as a task of its own, so that closing can cancel it."""
        task = asyncio.get_running_loop().create_task(self._run_locked(trigger))
        self._rounds.add(task)
        task.add_done_callback(self._rounds.discard)
        return await asyncio.shield(task)  # a caller that goes away (HTTP client) leaves the round be

    async def _run_locked(self, trigger: Trigger) -> GcRoundResult:
        async with self._lock:
            return await self.run_once(trigger)

    async def _on_gc_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, functools.partial(fn, *args))

    # -- one round -------------------------------------------------------------------------------

    async def run_once(self, trigger: Trigger = TIMER) -> GcRoundResult:
        """One round (callers hold the round lock, or own the collector: tests)."""
        started = self._clock()
        result = GcRoundResult(forced=trigger.force)
        if trigger.force:
            log.info("garbage collection forced")
        try:
            result.deleted_ledgers = await self._collect_deleted_ledgers()
        except LISTING_ERRORS as exc:  # the metadata store is down, say: the rest still helps
            log.warning("garbage collection: ledgers not collected this round: %r", exc)
            result.errors.append(f"ledgers: {exc!r}")
        try:
            for directory in self.storage.dirs:
                await self._collect_dead_logs(directory, result)
        except STEP_ERRORS as exc:
            log.exception("garbage collection: deleting dead entry logs failed")
            result.errors.append(f"entry logs: {exc!r}")
        kind = compaction_due(
            self.settings, started, self.last_major_s, self.last_minor_s, trigger, self.disk_pressure()
        )
        if kind is not None:
            try:
                await self._compact(kind, result)
            except STEP_ERRORS as exc:  # an I/O error, say: what was committed stays, the rest waits
                log.exception("garbage collection: %s compaction failed", kind.value)
                result.errors.append(f"compaction: {exc!r}")
        if result.deleted_ledgers or result.deleted_entry_logs or result.compacted_entry_logs:
            try:
                for directory in self.storage.dirs:
                    await self.storage.run_exclusive(directory.checkpoint_index)
            except STEP_ERRORS as exc:
                log.warning("garbage collection: checkpointing the index WAL failed: %r", exc)
        await self._update_gauges()
        result.duration_ms = (self._clock() - started) * 1000
        metrics.GC_THREAD_RUNTIME.observe(result.duration_ms)
        log.info(
            "garbage collection round done in %.0f ms: %d ledgers deleted, %d dead entry logs deleted "
            "(%d bytes), %s compaction: %d logs compacted (%d bytes reclaimed)",
            result.duration_ms,
            result.deleted_ledgers,
            result.deleted_entry_logs,
            result.reclaimed_deletion_bytes,
            result.compaction or "no",
            result.compacted_entry_logs,
            result.reclaimed_compaction_bytes,
        )
        return result

    async def _collect_deleted_ledgers(self) -> int:
        """Step 1 (see the module docstring for why the order of the snapshots matters)."""
        dirs = self.storage.dirs
        in_memory = [directory.ledger_snapshot() for directory in dirs]
        persisted = [set(await self._on_gc_thread(directory.persisted_ledger_ids)) for directory in dirs]
        if not any(in_memory) and not any(persisted):
            return 0
        timeout_s = self.settings.metadata_timeout_s
        existing = await asyncio.wait_for(self.metadata.ledger_ids(), timeout_s)
        deleted_total = 0
        for directory, memory, stored in zip(dirs, in_memory, persisted):
            candidates = sorted((memory.keys() | stored) - existing)
            confirmed = {}
            for ledger_id in candidates:
                if not await asyncio.wait_for(self.metadata.ledger_exists(ledger_id), timeout_s):
                    confirmed[ledger_id] = memory.get(ledger_id)
            if confirmed:
                deleted_total += await self._delete_ledgers(directory, confirmed)
        return deleted_total

    async def _delete_ledgers(self, directory: SingleDirectoryDbLedgerStorage, snapshot: dict[int, int | None]) -> int:
        deleted = directory.forget_ledgers(snapshot)
        if not deleted:
            return 0
        await self._on_gc_thread(directory.read_cache.delete_ledgers, set(deleted))
        unindexed = await self.storage.run_exclusive(directory.delete_ledgers_from_index, deleted)
        directory.entries_unindexed(unindexed)
        metrics.DELETED_LEDGER_TOTAL.inc(len(deleted))
        log.info(
            "%s: deleted %d ledgers whose metadata is gone (%d entries indexed): %s",
            directory.directory,
            len(deleted),
            unindexed,
            _ids(deleted),
        )
        return len(deleted)

    async def _collect_dead_logs(self, directory: SingleDirectoryDbLedgerStorage, result: GcRoundResult) -> None:
        """Step 2: the logs whose live bytes are 0."""
        current = await self.storage.run_exclusive(directory.current_entry_log_id)
        usages = await self._on_gc_thread(directory.entry_log_usages, current)
        for usage in logs_to_delete(usages):
            if await self.storage.run_exclusive(delete_log, directory, usage.log_id):
                result.deleted_entry_logs += 1
                result.reclaimed_deletion_bytes += usage.size_bytes
                metrics.RECLAIMED_DELETION_SPACE_BYTES.inc(usage.size_bytes)
                log.debug(
                    "%s: deleted entry log %x (no live data, %d bytes)",
                    directory.directory,
                    usage.log_id,
                    usage.size_bytes,
                )

    async def _compact(self, kind: CompactionKind, result: GcRoundResult) -> None:
        """Step 3: rewrite the logs below the threshold of ``kind``, emptiest first."""
        settings = self.settings
        major = kind is CompactionKind.MAJOR
        threshold = settings.major_threshold if major else settings.minor_threshold
        max_time_s = settings.major_max_time_s if major else settings.minor_max_time_s
        started = self._clock()
        deadline = None if max_time_s is None else started + max_time_s
        result.compaction = kind.value
        log.info("%s compaction started: entry logs below usage %.2f", kind.value, threshold)
        stats = CompactionStats()
        try:
            for directory in self.storage.dirs:
                current = await self.storage.run_exclusive(directory.current_entry_log_id)
                for usage in logs_to_compact(await self._on_gc_thread(directory.entry_log_usages, current), threshold):
                    if deadline is not None and self._clock() >= deadline:
                        raise CompactionAborted("compaction time bound reached")
                    try:
                        done = await self.compactor.compact(directory, usage, deadline)
                    except EntryLogNotCompacted as exc:
                        log.error("%s compaction: %s: left in place, going on with the next log", kind.value, exc)
                        result.errors.append(f"compaction: {exc}")
                        continue
                    stats.add(done)
                    metrics.RECLAIMED_COMPACTION_SPACE_BYTES.inc(done.reclaimed_bytes)
                    metrics.COMPACTED_ENTRY_TOTAL.inc(done.entries_moved)
        except CompactionAborted as exc:
            log.warning("%s compaction stopped: %s", kind.value, exc)
            result.errors.append(f"compaction: {exc}")
        finally:
            # As BookKeeper: a major compaction also counts as the minor one.
            now = self._clock()
            self.last_minor_s = now
            if major:
                self.last_major_s = now
                metrics.MAJOR_COMPACTION_TOTAL.inc()
            else:
                metrics.MINOR_COMPACTION_TOTAL.inc()
            result.compacted_entry_logs = stats.logs_compacted
            result.compacted_entries = stats.entries_moved
            result.reclaimed_compaction_bytes = stats.reclaimed_bytes

    async def _update_gauges(self) -> None:
        logs, size = 0, 0
        for directory in self.storage.dirs:
            count, total = await self._on_gc_thread(_entry_logs_on_disk, directory)
            logs += count
            size += total
        metrics.ACTIVE_ENTRY_LOG_COUNT.set(logs)
        metrics.ACTIVE_ENTRY_LOG_SPACE_BYTES.set(size)
        metrics.ACTIVE_LEDGER_COUNT.set(self.storage.ledger_count)


def _entry_logs_on_disk(directory: SingleDirectoryDbLedgerStorage) -> tuple[int, int]:
    count = total = 0
    for log_id in list_entry_logs(directory.directory):
        try:
            total += entry_log_path(directory.directory, log_id).stat().st_size
            count += 1
        except FileNotFoundError:
            pass
    return count, total


def _ids(ledger_ids: list[int], shown: int = 20) -> str:
    text = ", ".join(str(i) for i in ledger_ids[:shown])
    return text + (f" ... ({len(ledger_ids) - shown} more)" if len(ledger_ids) > shown else "")
