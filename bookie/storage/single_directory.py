"""One ledger directory of the DbLedgerStorage (BookKeeper's ``SingleDirectoryDbLedgerStorage``).

Holds the double-buffered write cache, the entry logs, ``index.db`` (locations, ledgers,
entry-log usage), the read-ahead cache and this dir's ``lastMark``. Who calls what:

- the event loop: admission (:meth:`try_admit`, :meth:`admit`), :meth:`add_entry`,
  :meth:`fence`, :meth:`ledger`, and the flush hand-over
  (:meth:`swap`, :meth:`flush_completed`);
- a checkpoint's flush: :meth:`flush` and :meth:`write_last_mark`, on the storage's flush
  thread or, with several dirs, on one of its dir-flush threads (a different one from one
  checkpoint to the next, but one thread at a time: checkpoints do not overlap);
- read threads: :meth:`read_entries` (blocking, thread-safe);
- start-up (a worker thread, before serving): :meth:`open`, :meth:`replay_entry`;
- garbage collection (:mod:`bookie.storage.gc`): its loop-side calls on the loop, its index
  and entry-log writes on the flush thread between checkpoints (so they never interleave with
  a flush), its
  scans on its own thread.

Invariants:
- admission reserves the entry's room in the active half *before* the journal write, so the
  put that follows the journal's completion always fits: an entry the journal made durable
  is never refused. ``active.size_bytes + reserved <= half_max_bytes``, except that one entry
  is always admitted into an empty half (so an entry larger than a half is not stuck);
- a swap happens only when the previous flush has completed (``flushing`` is empty);
- a flush of a half of :data:`PACE_MIN_BYTES` or more is paced (:class:`FlushPacer`), and it
  stops pacing once the active half is :data:`PACE_STOP_FILL` full or :attr:`hurry` is set
  (a checkpoint is awaited, the storage closes): pacing spreads the device's load, it never
  makes adds wait for room;
- the flush makes the entry logs durable (fsync) before it commits their locations, and the
  half being flushed is dropped only after that commit, so a reader always finds an entry
  in one of the halves, the read-ahead cache or the index;
- readers look at ``active`` before ``flushing``, and :meth:`swap` assigns ``flushing`` before
  ``active``: an entry moving from one half to the other is seen in at least one of them;
- an entry moved by compaction is readable at every instant: the copy is fsynced before the
  index points at it, and the old log is deleted only after; a read that looked up the old
  location and finds the log gone looks the entry up again (:meth:`_read_from_entry_log`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import operator
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minipulsar import diagnostics
from minipulsar.bookie import disk_model
from minipulsar.bookie.storage import metrics
from minipulsar.bookie.storage.checkpoint import Checkpoint, LastMarkFile
from minipulsar.bookie.storage.entry_location_index import ENTRIES_KEY, EntryLocationIndex
from minipulsar.bookie.storage.entry_log import LOG_HEADER_SIZE, RECORD_HEADER_SIZE
from minipulsar.bookie.storage.entry_log_metadata import EntryLogMetadataIndex
from minipulsar.bookie.storage.entry_logger import (
    EntryLogMissingError,
    EntryLogReader,
    EntryLogWriter,
    delete_entry_log,
    entry_log_path,
    list_entry_logs,
)
from minipulsar.bookie.storage.index_db import IndexDb
from minipulsar.bookie.storage.ledger_metadata_index import LedgerMetadataIndex, LedgerRow
from minipulsar.bookie.storage.ledger_state import LedgerState
from minipulsar.bookie.storage.read_cache import ReadCache
from minipulsar.bookie.storage.write_cache import ENTRY_OVERHEAD_BYTES, WriteCache
from minipulsar.durable_file import make_dirs
from minipulsar.errors import (
    MiniPulsarError,
    NoSuchEntryError,
    NoSuchLedgerError,
    ServiceNotReadyError,
    TooManyRequestsError,
)

log = logging.getLogger(__name__)

_LEDGER_ID, _ENTRY_ID = operator.attrgetter("ledger_id"), operator.attrgetter("entry_id")
_LAC, _PAYLOAD = operator.attrgetter("lac"), operator.attrgetter("payload")

RESPONSE_ENTRY_OVERHEAD_BYTES = 16
"""What one ``[entry_id, payload]`` pair costs in a READ_ENTRY_RESPONSE beyond its payload."""
ENTRY_LOG_CACHE_WINDOW_BYTES = 64 << 20
"""The tail of the entry log being written that stays in the page cache: about two write-cache
halves, so readers a little behind the writers still read from memory."""
PACE_MIN_BYTES = 4 << 20
"""A flush smaller than this is not paced (its burst is short anyway)."""
PACE_STEP_BYTES = 1 << 20
"""A paced flush hands the entry log this much at a time, then waits for its schedule."""
PACE_FILL_FRACTION = 0.25
"""A paced flush is spread over this fraction of the time its half took to fill ..."""
PACE_MAX_S = 1.0
"""... but not longer than this."""
PACE_STOP_FILL = 0.5
"""Pacing stops (the rest goes at full speed) once the active half is this full: the flush
must finish before adds have to wait for room."""
MOVED_ENTRY_LOOKUPS_MAX = 3
"""A read finding its entry log deleted looks the entry up again this many times (each miss
means a whole compaction moved the entry meanwhile)."""


class IndexDamagedError(MiniPulsarError):
    """A ledger dir's ``index.db`` cannot be read: the bookie refuses to start on it."""


@dataclass(frozen=True, slots=True)
class EntryLogUsage:
    """One entry log as garbage collection sees it."""

    log_id: int
    live_bytes: int
    """Bytes of records of ledgers that still exist (an upper bound of what the index points at)."""
    size_bytes: int
    """The file's size."""

    @property
    def usage(self) -> float:
        """Live fraction of the records' space (BookKeeper's ``EntryLogMetadata.getUsage``)."""
        records = self.size_bytes - LOG_HEADER_SIZE
        return 0.0 if records <= 0 else min(1.0, self.live_bytes / records)


CompactedEntry = tuple[int, int, int, bytes]
"""``(ledger_id, entry_id, old_location, payload)``: a live entry copied by compaction."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageSettings:
    """Per ledger dir (the configured cache sizes are split across the dirs, as BookKeeper does)."""

    write_cache_max_bytes: int = 64 << 20
    """Both halves (dbStorage_writeCacheMaxSizeMb / #dirs)."""
    read_cache_max_bytes: int = 32 << 20
    """dbStorage_readAheadCacheMaxSizeMb / #dirs."""
    read_ahead_batch_entries: int = 100
    """dbStorage_readAheadCacheBatchSize."""
    read_ahead_batch_bytes: int = -1
    """dbStorage_readAheadCacheBatchBytesSize (-1: no cap)."""
    log_size_limit: int = 256 << 20
    """logSizeLimit."""
    flush_entry_log_bytes: int = 0
    """flushEntrylogBytes (0: sync only at the end of a flush)."""
    direct_io_entry_logger: bool = True
    """dbStorage_directIOEntryLogger: write entry logs with O_DIRECT."""
    entry_log_cache_window_bytes: int = ENTRY_LOG_CACHE_WINDOW_BYTES
    """How much of the entry log being written stays in the page cache (negative: all;
    see :mod:`bookie.storage.entry_logger`)."""
    max_throttle_s: float = 10.0
    """dbStorage_maxThrottleTimeMs / 1000: an add waits this long at most for room."""

    @property
    def half_max_bytes(self) -> int:
        return max(1, self.write_cache_max_bytes // 2)


@dataclass(slots=True, eq=False)
class _Waiter:
    """An add waiting for room in the active half (identity, not value, tells two apart)."""

    future: asyncio.Future[None]
    size: int
    recovery: bool


@dataclass(slots=True)
class FlushBatch:
    """What one flush of one dir writes: the half taken out of service and the ledgers' state."""

    cache: WriteCache
    ledgers: list[LedgerRow]
    entries_new: int = 0
    """Set by :meth:`SingleDirectoryDbLedgerStorage.flush`: entries not indexed before."""
    logs: list[int] = field(default_factory=list)
    """Entry logs the flush appended to."""
    fill_s: float | None = None
    """How long the half took to fill (from the previous swap to this one); None: not paced."""


class FlushPacer:
    """Spreads a big flush's entry-log writes over time, so that the device is not saturated
    by them while the journal's synced writes wait behind: the flush of a full 32 MiB half at
    device speed took 50-100 ms, during which the journal's group syncs took 5-30 ms instead of
    under one, and publish latency rose to 20-60 ms (the latency timeline's ``dir_flush``
    events next to ``journal_slow_sync`` ones and the slow buckets).

    The schedule: ``size`` bytes over ``min(PACE_MAX_S, PACE_FILL_FRACTION × fill_s)``, the
    half having filled in ``fill_s`` — so the flush ends well before the next half is full, at
    any ingest rate (at full speed the schedule is faster than the device, and nothing waits).
    ``hurry()`` true ends the pacing at once (the active half is filling up)."""

    def __init__(
        self,
        size: int,
        fill_s: float | None,
        hurry: Callable[[], bool],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        paced = fill_s is not None and size >= PACE_MIN_BYTES
        self._duration_s = min(PACE_MAX_S, PACE_FILL_FRACTION * fill_s) if paced and fill_s is not None else 0.0
        self._size = max(1, size)
        self._hurry, self._clock, self._sleep = hurry, clock, sleep
        self._started = clock()
        self._done = 0
        self.waited_s = 0.0

    @property
    def pacing(self) -> bool:
        return self._duration_s > 0

    def wrote(self, size: int) -> None:
        """``size`` more bytes handed to the entry log: wait until the schedule allows more."""
        if self._duration_s <= 0:
            return
        self._done += size
        delay = self._started + self._duration_s * min(1.0, self._done / self._size) - self._clock()
        if delay <= 0:
            return
        if self._hurry():
            self._duration_s = 0.0
            return
        self._sleep(delay)
        self.waited_s += delay


class SingleDirectoryDbLedgerStorage:
    def __init__(
        self, directory: Path, settings: StorageSettings, request_flush: Callable[[], None] = lambda: None
    ) -> None:
        """``directory``: the ledger dir's ``current/``; ``request_flush``: called on the loop
        when the active half is full or adds wait for room."""
        self.directory = directory
        self.settings = settings
        self._half_max = settings.half_max_bytes
        self._request_flush = request_flush
        self._db = IndexDb(directory)
        self._locations = EntryLocationIndex(self._db)
        self._ledgers = LedgerMetadataIndex(self._db)
        self._log_metadata = EntryLogMetadataIndex(self._db)
        self._writer: EntryLogWriter | None = None
        self._reader = EntryLogReader(directory)
        self.read_cache = ReadCache(settings.read_cache_max_bytes)
        self._active = WriteCache()
        self._flushing = WriteCache()
        self._reserved = 0
        """Bytes admitted (journal write pending) and not yet put into the active half."""
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._indexed_entries = 0
        self.hurry = False
        """Set on the loop: flushes go at full speed (someone waits for the checkpoint, or
        the storage closes); read by the flush thread."""
        self._swapped_at: float | None = None
        """When the active half last went to a flush (monotonic; loop side)."""
        self._read_gate = threading.Condition()
        self._reads_in_flight = 0
        self._closed = False

    # -- start-up and shutdown (blocking) ------------------------------------------------------

    def open(self) -> Checkpoint:
        """Open the index and the entry logs; returns this dir's persisted checkpoint.

        Raises:
            IndexDamagedError: ``index.db`` is not a readable database.
        """
        make_dirs(self.directory)
        try:
            self._db.open()
            self._ledgers.load()
            self._indexed_entries = self._locations.count()
        except sqlite3.DatabaseError as exc:
            raise IndexDamagedError(
                f"{self._db.path} is damaged ({exc}): this ledger dir's entries cannot be located without it; "
                f"restore it from a backup (the bookie does not start on it)"
            ) from exc
        existing = list_entry_logs(self.directory)
        last_log_id = max(existing[-1] if existing else 0, self._log_metadata.last_log_id())
        self._writer = EntryLogWriter(
            self.directory,
            self.settings.log_size_limit,
            last_log_id + 1,
            self.settings.flush_entry_log_bytes,
            self.settings.entry_log_cache_window_bytes,
            self.settings.direct_io_entry_logger,
        )
        metrics.STORAGES.add(self)
        return LastMarkFile(self.directory).read()

    def close(self) -> None:
        """Wait for the reads in flight, then release files (the flush thread must be idle)."""
        with self._read_gate:
            self._closed = True
            self._read_gate.wait_for(lambda: self._reads_in_flight == 0, timeout=30)
        metrics.STORAGES.discard(self)
        if self._writer is not None:
            self._writer.close()
        self._reader.close()
        self._db.close()

    # -- admission (loop) ---------------------------------------------------------------------

    def _fits(self, size: int) -> bool:
        used = self._active.size_bytes + self._reserved
        return used + size <= self._half_max or used == 0

    def try_admit(self, payload_length: int) -> bool:
        """Reserve room for an entry of ``payload_length`` bytes; False when the active half is
        full (or earlier adds already wait): await :meth:`admit` instead."""
        size = payload_length + ENTRY_OVERHEAD_BYTES
        if self._waiters or not self._fits(size):
            if self._active:  # else a swap frees nothing: add_entry asks once entries arrive
                self._request_flush()
            return False
        self._reserved += size
        return True

    def try_admit_all(self, payload_bytes: int, entries: int) -> bool:
        """Reserve room for ``entries`` entries of ``payload_bytes`` together (the adds of one
        read), only if they fit the active half whole; False leaves nothing reserved (then
        admit them one by one)."""
        size = payload_bytes + ENTRY_OVERHEAD_BYTES * entries
        if self._waiters or self._active.size_bytes + self._reserved + size > self._half_max:
            return False
        self._reserved += size
        return True

    async def admit(self, payload_length: int, recovery: bool = False, since: float | None = None) -> None:
        """Wait (FIFO) until the entry fits, and reserve its room; counted as a throttled write.

        ``since``: when the add arrived (``time.monotonic()``), if it already waited behind
        others; the bound counts from then.

        Raises:
            TooManyRequestsError: no room came within ``max_throttle_s`` (the flushes do not keep
                up, or one is failing): BookKeeper's rejected write. Nothing was journaled.
            BookieReadOnlyError (or whatever :meth:`refuse_waiting` was given): the bookie
                turned read-only meanwhile; ``recovery`` adds are not refused that way.
        """
        if self.try_admit(payload_length):
            return
        metrics.THROTTLED_WRITE_REQUESTS.inc()
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        item = _Waiter(loop.create_future(), payload_length + ENTRY_OVERHEAD_BYTES, recovery)
        self._waiters.append(item)
        # try_admit's flush request may have swapped the halves at once (no checkpoint was
        # running), waking the waiters queued *before* this one: without this call it would
        # wait for a wake-up that already happened, with the room free.
        self._wake_waiters()
        waited_s = started - since if since is not None else 0.0
        timer = loop.call_later(max(0.0, self.settings.max_throttle_s - waited_s), self._reject, item)
        try:
            await item.future
        except asyncio.CancelledError:
            if item.future.done() and not item.future.cancelled() and item.future.exception() is None:
                self._reserved -= item.size  # granted (room reserved for us) just before the cancellation
            elif item in self._waiters:
                self._waiters.remove(item)
            self._wake_waiters()
            raise
        finally:
            timer.cancel()
            metrics.THROTTLED_WRITE.observe((time.monotonic() - started) * 1000)

    def _reject(self, item: _Waiter) -> None:
        """``max_throttle_s`` passed and the add still waits for room: refuse it."""
        if item.future.done():
            return
        self._waiters.remove(item)
        metrics.REJECTED_WRITE_REQUESTS.inc()
        item.future.set_exception(
            TooManyRequestsError(
                f"the write cache of {self.directory} had no room for {self.settings.max_throttle_s:g}s "
                f"(dbStorage_maxThrottleTimeMs): its flushes do not keep up, or one is failing"
            )
        )
        self._wake_waiters()  # the next ones may fit now that this one gave up its place

    def refuse_waiting(self, error: Callable[[], BaseException]) -> int:
        """Refuse every add waiting for room with a new ``error()`` (the bookie turned
        read-only), except recovery adds; returns how many were refused. None of them reached
        the journal."""
        refused = [item for item in self._waiters if not item.recovery]
        self._waiters = collections.deque(item for item in self._waiters if item.recovery)
        for item in refused:
            if not item.future.done():
                item.future.set_exception(error())
        if refused:
            self._wake_waiters()
        return len(refused)

    def cancel_admission(self, payload_length: int, entries: int = 1) -> None:
        """Give back a reservation whose adds will not reach the storage (refused, journal failure)."""
        self._reserved -= payload_length + ENTRY_OVERHEAD_BYTES * entries
        assert self._reserved >= 0, self._reserved
        self._wake_waiters()

    def _wake_waiters(self) -> None:
        waiters = self._waiters
        while waiters and self._fits(waiters[0].size):
            item = waiters.popleft()
            if not item.future.done():
                self._reserved += item.size
                item.future.set_result(None)

    @property
    def wants_flush(self) -> bool:
        """The active half is full, or adds wait for room that a swap would give them."""
        size = self._active.size_bytes
        return size >= self._half_max or (bool(self._waiters) and size > 0)

    @property
    def has_unflushed_changes(self) -> bool:
        return bool(self._active) or self._ledgers.has_unpersisted_changes

    # -- adds and fences (loop) -----------------------------------------------------------------

    def add_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes) -> None:
        """Put an admitted entry that the journal made durable into the active half."""
        self._reserved -= len(payload) + ENTRY_OVERHEAD_BYTES
        self._active.put(ledger_id, entry_id, payload)
        self._ledgers.states.get_or_create(ledger_id).entry_added(entry_id, lac)
        if self._active.size_bytes >= self._half_max or self._waiters:
            self._request_flush()

    def add_entries(self, requests: Sequence[Any]) -> None:
        """:meth:`add_entry` for a run of admitted adds (``ledger_id``, ``entry_id``, ``lac``,
        ``payload``) that the journal made durable; one ledger's run in a few C-level passes."""
        ledger_ids = set(map(_LEDGER_ID, requests)) if len(requests) > 1 else ()
        if len(ledger_ids) != 1:  # a lone add, or several ledgers: one by one
            for request in requests:
                self.add_entry(request.ledger_id, request.entry_id, request.lac, request.payload)
            return
        (ledger_id,) = ledger_ids
        entry_ids = list(map(_ENTRY_ID, requests))
        payloads = list(map(_PAYLOAD, requests))
        self._reserved -= sum(map(len, payloads)) + ENTRY_OVERHEAD_BYTES * len(payloads)
        self._active.put_run(ledger_id, entry_ids, payloads)
        self._ledgers.states.get_or_create(ledger_id).entry_added(max(entry_ids), max(map(_LAC, requests)))
        if self._active.size_bytes >= self._half_max or self._waiters:
            self._request_flush()

    def replay_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes) -> bool:
        """Put a replayed entry (no admission at start-up); True when the active half is full."""
        self._active.put(ledger_id, entry_id, payload)
        self._ledgers.states.get_or_create(ledger_id).entry_added(entry_id, lac)
        return self._active.size_bytes >= self._half_max

    def fence(self, ledger_id: int) -> bool:
        return self._ledgers.fence(ledger_id)

    def set_master_key(self, ledger_id: int, master_key: bytes) -> bool:
        return self._ledgers.set_master_key(ledger_id, master_key)

    def ledger(self, ledger_id: int) -> LedgerState | None:
        return self._ledgers.get(ledger_id)

    @property
    def ledger_count(self) -> int:
        return len(self._ledgers)

    @property
    def entry_count(self) -> int:
        """Indexed entries plus those still in the write cache (an entry re-added before its
        first flush was checkpointed may be counted twice until the next flush)."""
        return self._indexed_entries + self._active.count + self._flushing.count

    @property
    def write_cache_size_bytes(self) -> int:
        return self._active.size_bytes + self._flushing.size_bytes

    @property
    def write_cache_count(self) -> int:
        return self._active.count + self._flushing.count

    # -- the flush hand-over (loop) -------------------------------------------------------------

    def swap(self) -> FlushBatch:
        """Take the active half out of service for a flush (with the ledgers' state to persist)."""
        assert not self._flushing, "swap while the previous flush has not completed"
        active, now = self._active, time.monotonic()
        fill_s = None if self._swapped_at is None else now - self._swapped_at
        self._swapped_at = now
        batch = FlushBatch(active, self._ledgers.snapshot(active.ledger_ids()), fill_s=fill_s)
        self._flushing = active  # before _active: see the module docstring
        self._active = WriteCache()
        self._wake_waiters()
        return batch

    def flush_completed(self, batch: FlushBatch) -> None:
        """The batch is durable and indexed: drop the half that held it."""
        assert self._flushing is batch.cache
        self._flushing = WriteCache()
        self._indexed_entries += batch.entries_new

    # -- the flush itself (flush thread) ---------------------------------------------------------

    def flush(self, batch: FlushBatch) -> None:
        """Write the batch sorted by (ledger, entry) into entry logs, fsync them, then commit the
        locations, the ledgers' state and the entry-log usage in one index transaction."""
        writer = self._writer
        assert writer is not None, "storage not open"
        started = time.monotonic()
        by_ledger: list[tuple[int, list[int], list[int]]] = []
        usage: dict[tuple[int, int], int] = collections.defaultdict(int)
        flushed_bytes = 0
        append_entries, cache = writer.append_entries, batch.cache
        pacer = FlushPacer(cache.size_bytes, batch.fill_s, self._hurry)
        try:
            # Per ledger, not per entry, and no object per entry: the flush holds the GIL.
            for ledger_id in sorted(cache.ledger_ids()):
                ledger_entries = cache.entries_of(ledger_id)
                assert ledger_entries is not None  # one of the cache's ledgers
                entry_ids = sorted(ledger_entries)
                payloads = list(map(ledger_entries.__getitem__, entry_ids))
                ledger_bytes = sum(map(len, payloads))
                if not pacer.pacing:
                    locations = append_entries(ledger_id, entry_ids, payloads)
                else:  # about PACE_STEP_BYTES at a time
                    step = max(1, PACE_STEP_BYTES * len(payloads) // max(1, ledger_bytes))
                    locations = []
                    for first in range(0, len(entry_ids), step):
                        chunk = payloads[first : first + step]
                        locations += append_entries(ledger_id, entry_ids[first : first + step], chunk)
                        pacer.wrote(sum(map(len, chunk)))
                by_ledger.append((ledger_id, entry_ids, locations))
                flushed_bytes += ledger_bytes
                if locations[0] >> 32 == locations[-1] >> 32:  # all in one log (the usual case)
                    usage[(locations[0] >> 32, ledger_id)] += ledger_bytes + RECORD_HEADER_SIZE * len(entry_ids)
                    continue
                for location, payload in zip(locations, payloads):
                    usage[(location >> 32, ledger_id)] += RECORD_HEADER_SIZE + len(payload)
            writer.flush()
            if disk_model.MODEL is not None:  # bench only (minipulsarSimulatedDiskModel): a SIMULATED slow disk
                disk_model.MODEL.wrote(self.directory, flushed_bytes, True)
        except BaseException:
            writer.abandon()  # its position is no longer known: the retry starts a new log
            raise
        entry_log_done = time.monotonic()
        inserted = 0
        with self._db.transaction() as cursor:  # committed with the WAL fsynced (synchronous=FULL)
            for ledger_id, entry_ids, locations in by_ledger:
                inserted += self._locations.add_entry_locations(cursor, ledger_id, entry_ids, locations)
            ledgers_started = time.monotonic()
            self._ledgers.persist(cursor, batch.ledgers)
            metrics.FLUSH_LEDGER_INDEX.observe((time.monotonic() - ledgers_started) * 1000)
            self._log_metadata.add_usage(cursor, usage)
            IndexDb.add_meta(cursor, ENTRIES_KEY, inserted)
        batch.entries_new = inserted
        batch.logs = sorted({log_id for log_id, _ in usage})
        done = time.monotonic()
        metrics.FLUSH_ENTRYLOG.observe((entry_log_done - started) * 1000)
        metrics.FLUSH_LOCATIONS_INDEX.observe((done - entry_log_done) * 1000)
        metrics.FLUSH_SIZE.observe(flushed_bytes)
        diagnostics.record(
            "dir_flush",
            (done - started) * 1000,
            t=started,
            bytes=flushed_bytes,
            entries=len(cache),
            entry_log_ms=round((entry_log_done - started) * 1000, 3),
            paced_ms=round(pacer.waited_s * 1000, 3),
            index_commit_ms=round((done - entry_log_done) * 1000, 3),
        )

    def _hurry(self) -> bool:
        """Flush thread: the active half is filling up (a racy read of loop-side counters is
        fine: it only ends the pacing sooner or later)."""
        return (
            self.hurry
            or self._active.size_bytes + self._reserved >= PACE_STOP_FILL * self._half_max
            or bool(self._waiters)
        )

    def write_last_mark(self, checkpoint: Checkpoint) -> None:
        with diagnostics.span("last_mark"):
            LastMarkFile(self.directory).write(checkpoint)

    # -- reads ----------------------------------------------------------------------------------

    def read_entries(self, ledger_id: int, first_entry_id: int, count: int, max_bytes: int) -> list:
        """Up to ``count`` consecutive entries from ``first_entry_id`` as ``(entry_id, payload)``,
        within ``max_bytes`` (the first entry always). Blocking and thread-safe.

        Raises:
            NoSuchLedgerError / NoSuchEntryError: unknown ledger / first entry not here.
            CorruptEntryError: an entry log does not hold what the index says.
        """
        with self._read_gate:
            if self._closed:
                raise ServiceNotReadyError("the bookie's storage is closed")
            self._reads_in_flight += 1
        try:
            started = time.monotonic()
            found = self._read_range(ledger_id, first_entry_id, count, max_bytes)
            metrics.READ_ENTRY.observe((time.monotonic() - started) * 1000)
            return found
        finally:
            with self._read_gate:
                self._reads_in_flight -= 1
                if self._closed:
                    self._read_gate.notify_all()

    def _read_range(self, ledger_id: int, first_entry_id: int, count: int, max_bytes: int) -> list:
        state = self._ledgers.get(ledger_id)
        if state is None:
            raise NoSuchLedgerError(f"ledger {ledger_id} is not on this bookie")
        found: list[tuple[int, bytes]] = []
        total = 0
        sources = [0, 0, 0]
        """Entries found in the write cache, in the read-ahead cache, looked for in the entry
        logs: counted here, the metrics told once per range (a catch-up reader's ranges are
        100 entries; a metric update per entry was ~12 % of the read thread's time)."""
        try:
            for entry_id in range(first_entry_id, min(first_entry_id + count, state.last_entry_id + 1)):
                payload = self._read_one(ledger_id, entry_id, sources)
                if payload is None:
                    break
                total += len(payload) + RESPONSE_ENTRY_OVERHEAD_BYTES
                if found and total > max_bytes:
                    break
                found.append((entry_id, payload))
        finally:
            write_cache_hits, read_cache_hits, read_cache_misses = sources
            if write_cache_hits:
                metrics.WRITE_CACHE_HITS.inc(write_cache_hits)
            if read_cache_hits or read_cache_misses:
                metrics.WRITE_CACHE_MISSES.inc(read_cache_hits + read_cache_misses)
            if read_cache_hits:
                metrics.READ_CACHE_HITS.inc(read_cache_hits)
            if read_cache_misses:
                metrics.READ_CACHE_MISSES.inc(read_cache_misses)
        if not found:
            raise NoSuchEntryError(f"entry {ledger_id}:{first_entry_id} is not on this bookie")
        return found

    def _read_one(self, ledger_id: int, entry_id: int, sources: list[int]) -> bytes | None:
        """The entry from the write cache, the read-ahead cache or the entry logs, counting
        where it was looked for in ``sources`` (see :meth:`_read_range`)."""
        payload = self._active.get(ledger_id, entry_id)  # active first: see the module docstring
        if payload is None:
            payload = self._flushing.get(ledger_id, entry_id)
        if payload is not None:
            sources[0] += 1
            return payload
        payload = self.read_cache.get(ledger_id, entry_id)
        if payload is not None:
            sources[1] += 1
            return payload
        sources[2] += 1
        return self._read_from_entry_log(ledger_id, entry_id)

    def _read_from_entry_log(self, ledger_id: int, entry_id: int) -> bytes | None:
        started = time.monotonic()
        location = self._locations.get(ledger_id, entry_id)
        looked_up = time.monotonic()
        metrics.READ_LOCATIONS_INDEX_TIME.observe((looked_up - started) * 1000)
        if location is None:
            return None
        for _ in range(MOVED_ENTRY_LOOKUPS_MAX):
            try:
                payload, next_location = self._reader.read(location, ledger_id, entry_id)
                break
            except EntryLogMissingError:
                # Compaction moved the entry and deleted the log after our lookup.
                moved = self._locations.get(ledger_id, entry_id)
                if moved is None:
                    return None  # the ledger was deleted meanwhile
                if moved == location:
                    raise
                location = moved
        else:
            raise EntryLogMissingError(f"entry {ledger_id}:{entry_id} keeps moving to deleted entry logs")
        read_done = time.monotonic()
        metrics.READ_ENTRYLOG_TIME.observe((read_done - looked_up) * 1000)
        settings = self.settings
        if settings.read_ahead_batch_entries > 0:
            ahead = self._reader.read_ahead(
                next_location,
                ledger_id,
                entry_id + 1,
                settings.read_ahead_batch_entries,
                settings.read_ahead_batch_bytes,
            )
            if ahead:
                self.read_cache.put_all(ledger_id, ahead)
                metrics.READAHEAD_BATCH_COUNT.observe(len(ahead))
                metrics.READAHEAD_BATCH_SIZE.observe(sum(len(p) for _, p in ahead))
            metrics.READAHEAD_TIME.observe((time.monotonic() - read_done) * 1000)
        return payload

    # -- garbage collection (see bookie/storage/gc.py for who calls what where) -----------------

    def ledger_snapshot(self) -> dict[int, int]:
        """Loop: ledger id → last entry id, of every ledger in memory."""
        return {state.ledger_id: state.last_entry_id for state in self._ledgers.states}

    def persisted_ledger_ids(self) -> list[int]:
        """Any thread: every ledger in the ``ledgers`` table."""
        return self._ledgers.persisted_ids()

    def forget_ledgers(self, snapshot: dict[int, int | None]) -> list[int]:
        """Loop: drop deleted ledgers from memory (state, active write-cache half) and return
        them; the read-ahead cache is purged off the loop (``read_cache.delete_ledgers``, one
        pass over it), the index rows go with :meth:`delete_ledgers_from_index`.

        ``snapshot``: each ledger's last entry id when the GC scan started (None: it was not in
        memory then). A ledger that got an entry since, or appeared since, is being written
        right now and is kept (a later round sees it again).
        """
        deleted = []
        for ledger_id, last_entry_id in snapshot.items():
            state = self._ledgers.get(ledger_id)
            if state is not None and (last_entry_id is None or state.last_entry_id != last_entry_id):
                continue
            self._ledgers.forget(ledger_id)
            self._active.delete_ledger(ledger_id)
            deleted.append(ledger_id)
        if deleted:
            self._wake_waiters()
        return deleted

    def delete_ledgers_from_index(self, ledger_ids: list[int]) -> int:
        """Flush thread: delete the ledgers' locations, rows and entry-log usage in one
        transaction; returns how many locations went (call :meth:`entries_unindexed` with it)."""
        with self._db.transaction() as cursor:
            deleted = self._locations.delete_ledgers(cursor, ledger_ids)
            self._ledgers.delete(cursor, ledger_ids)
            self._log_metadata.delete_ledgers(cursor, ledger_ids)
            IndexDb.add_meta(cursor, ENTRIES_KEY, -deleted)
        return deleted

    def entries_unindexed(self, count: int) -> None:
        """Loop: ``count`` indexed entries were deleted."""
        self._indexed_entries -= count

    def current_entry_log_id(self) -> int:
        """Flush thread: the log flushes append to now (or will create next). Every log below it
        is closed and the flushes that wrote it are committed: only those may be deleted or
        compacted."""
        assert self._writer is not None, "storage not open"
        return self._writer.current_log_id

    def entry_log_usages(self, below_log_id: int) -> list[EntryLogUsage]:
        """Any thread: the entry logs on disk with ids below ``below_log_id``, with their live bytes."""
        live = self._log_metadata.live_bytes_by_log()
        usages = []
        for log_id in list_entry_logs(self.directory):
            if log_id >= below_log_id:
                break
            try:
                size = entry_log_path(self.directory, log_id).stat().st_size
            except FileNotFoundError:
                continue
            usages.append(EntryLogUsage(log_id, live.get(log_id, 0), size))
        return usages

    def live_entries(self, log_id: int) -> list[tuple[int, int, int]]:
        """Any thread: ``(ledger_id, entry_id, location)`` of every entry the index points at in
        ``log_id``, in file order."""
        found: list[tuple[int, int, int]] = []
        for ledger_id in self._log_metadata.usage(log_id):
            found.extend(
                (ledger_id, entry_id, location)
                for entry_id, location in self._locations.locations_in_log(ledger_id, log_id)
            )
        found.sort(key=lambda item: item[2])
        return found

    def read_at(self, location: int, ledger_id: int, entry_id: int) -> bytes:
        """Any thread: the payload at ``location`` (compaction reading what it copies)."""
        return self._reader.read(location, ledger_id, entry_id)[0]

    def write_compacted(self, entries: list[CompactedEntry]) -> list[int]:
        """Flush thread: append copies of ``entries`` to the current entry log and fsync it;
        returns their new locations (not yet in the index: :meth:`commit_compacted`)."""
        writer = self._writer
        assert writer is not None, "storage not open"
        try:
            locations = [writer.append(ledger_id, entry_id, payload) for ledger_id, entry_id, _, payload in entries]
            writer.flush()
        except BaseException:
            writer.abandon()
            raise
        return locations

    def commit_compacted(
        self, old_log_id: int, entries: list[CompactedEntry], new_locations: list[int]
    ) -> tuple[int, int]:
        """Flush thread: point each entry at its copy — unless it moved meanwhile (re-added, or
        its ledger deleted) — and move its bytes between the logs' usage, in one transaction.
        Returns (entries moved, record bytes moved)."""
        usage: dict[tuple[int, int], int] = collections.defaultdict(int)
        moved = moved_bytes = 0
        with self._db.transaction() as cursor:
            for (ledger_id, entry_id, old_location, payload), new_location in zip(entries, new_locations):
                if self._locations.move(cursor, ledger_id, entry_id, old_location, new_location):
                    size = RECORD_HEADER_SIZE + len(payload)
                    usage[(new_location >> 32, ledger_id)] += size
                    usage[(old_log_id, ledger_id)] -= size
                    moved += 1
                    moved_bytes += size
            self._log_metadata.add_usage(cursor, usage)
        return moved, moved_bytes

    def forget_entry_log(self, log_id: int) -> bool:
        """Flush thread: delete the log's usage rows, the step before its file goes. False (and
        nothing done) if the index still points into it."""
        for ledger_id, size in self._log_metadata.usage(log_id).items():
            if size > 0 and self._locations.locations_in_log(ledger_id, log_id):
                log.error(
                    "%s: entry log %x still holds live entries of ledger %d: not deleted",
                    self.directory,
                    log_id,
                    ledger_id,
                )
                return False
        with self._db.transaction() as cursor:
            self._log_metadata.delete_log(cursor, log_id)
        return True

    def checkpoint_index(self) -> None:
        """Flush thread: fold the index WAL into ``index.db`` and truncate it (after a GC round
        deleted rows: the WAL file otherwise stays at its high-water mark)."""
        busy, _, _ = self._db.checkpoint_wal()
        if busy:
            log.debug("%s: index WAL checkpoint could not finish (readers active)", self.directory)

    def remove_entry_log(self, log_id: int) -> None:
        """Flush thread: unlink the log (after :meth:`forget_entry_log`); reads still using its
        fd finish on it, later ones look their entry up again."""
        delete_entry_log(self.directory, log_id)
        self._reader.retire(log_id)
