"""The storage engine (BookKeeper's ``BookieImpl``): journals + ledger storage, and the add /
fence / read operations on them.

Network-free (:mod:`bookie.server_connection` calls it) and owned by one event
loop. Invariants:

- an add is checked against the fence and admitted twice before it reaches the journal: the
  ledger storage reserves room for it in the write cache (adds wait while there is none:
  ``bookie_throttled_write_requests``), then the journal queue takes it. Once the journal made
  it durable it goes into the ledger storage, and only then is its sink told — so a
  durable add always fits, and a checkpoint that captures a journal's applied mark knows that
  every record before it is in the storage;
- an add or a fencing read must bring the ledger's master key: the first one to reach this
  bookie sets it — in memory at once, and journaled as a LEDGER_KEY record ahead of the add or
  FENCE record, persisted in the ledger's index row by the next checkpoint — and any later
  one with another key is refused with UnauthorizedAccess before anything else happens;
- fencing sets the flag at once (later adds are refused) and journals a FENCE record in the
  ledger's journal, *after* every add of that ledger already admitted; the fence completes
  when that record is durable, by which time those adds are in the storage too (the journal
  completes records in queue order). So a fencing read sees every add that can still be
  acknowledged, which is what ledger recovery needs. The flag is also persisted by the next
  checkpoint, so it outlives the journal segment holding the record;
- start-up replays each journal from the storage's checkpoint through the same storage calls,
  then checkpoints the replayed records before serving;
- every read runs on ``read_executor`` (:mod:`bookie.storage.read_executor`), never on the
  loop — write-cache hits too, as in BookKeeper, so that the read pool's bound covers them;
- garbage collection (:mod:`bookie.storage.gc`) runs once :meth:`start_gc` gave it the
  metadata store, and stops first on :meth:`close`, before the storage closes.
"""

from __future__ import annotations

import asyncio
import logging
import operator
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from minipulsar.bookie import metrics
from minipulsar.bookie.journal.format import EntryLocation, JournalRecord, RecordType
from minipulsar.bookie.journal.journal import Fence, Journal, JournalRequest, JournalSink, LedgerKey, ReplayResult
from minipulsar.bookie.journal.journal_set import JournalSet
from minipulsar.bookie.storage.base import LedgerStorage
from minipulsar.bookie.storage.db_ledger_storage import DbLedgerStorage
from minipulsar.bookie.storage.gc import NO_PRESSURE, DiskPressure, GarbageCollector, LedgerMetadataSource
from minipulsar.bookie.storage.ledger_dirs import DiskUsage, LedgerDirs
from minipulsar.bookie.storage.ledger_dirs_manager import FULL, LedgerDirsManager
from minipulsar.bookie.storage.ledger_state import LedgerState
from minipulsar.bookie.storage.read_executor import ReadExecutor, ThreadPoolReadExecutor
from minipulsar.config import BookieConfig
from minipulsar.errors import BookieReadOnlyError, LedgerFencedError, NoSuchLedgerError, UnauthorizedAccessError

log = logging.getLogger(__name__)

_LEDGER_ID = operator.attrgetter("ledger_id")
_PAYLOAD = operator.attrgetter("payload")
_MASTER_KEY = operator.attrgetter("master_key")


class AddRequest(JournalRequest, Protocol):
    """An add as :meth:`BookieImpl.try_add` takes it (the ADD_ENTRY command satisfies it)."""

    @property
    def recovery(self) -> bool: ...
    @property
    def master_key(self) -> bytes: ...


class _KeyDurable:
    """The journal's sink for LEDGER_KEY records: nobody waits for them (the add or FENCE
    record behind each one completes after it, in queue order)."""

    __slots__ = ()

    def requests_done(self, requests: list[LedgerKey], started: float, error: BaseException | None) -> None:
        pass


_KEY_DURABLE = _KeyDurable()


class _FenceDurable:
    """The journal's sink for one FENCE record: resolves ``fenced`` with the ledger's state."""

    __slots__ = ("_fenced", "_storage")

    def __init__(self, fenced: asyncio.Future[LedgerState], storage: LedgerStorage) -> None:
        self._fenced, self._storage = fenced, storage

    def requests_done(self, requests: list[Fence], started: float, error: BaseException | None) -> None:
        if self._fenced.done():
            return
        if error is not None:
            self._fenced.set_exception(error)
            return
        (fence,) = requests
        state = self._storage.ledger(fence.ledger_id)
        assert state is not None and state.fenced
        self._fenced.set_result(state)


class BookieImpl:
    def __init__(self, config: BookieConfig, read_executor: ReadExecutor | None = None) -> None:
        """``read_executor``: where blocking reads run (the process passes its bounded read
        thread pool); by default a plain pool of ``numReadWorkerThreads`` threads, owned here."""
        self.config = config
        self.journals = JournalSet.from_config(config)
        self.ledger_dirs = LedgerDirs(config.ledger_dirs)
        self.dirs_manager = LedgerDirsManager(config.ledger_dirs)
        """Which ledger dirs take adds (full, failed): shared by the storage and the disk monitor."""
        self.storage: LedgerStorage = DbLedgerStorage(config, self.journals, dirs_manager=self.dirs_manager)
        self.journals.attach_storage(self.storage)
        self._own_read_executor: ThreadPoolReadExecutor | None = None
        if read_executor is None:
            read_executor = self._own_read_executor = ThreadPoolReadExecutor(config.num_read_worker_threads)
        self.read_executor: ReadExecutor = read_executor
        self.replay_results: list[ReplayResult] = []
        """What each journal's replay at the last start found (diagnostics and tests)."""
        self.gc: GarbageCollector | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the storage, replay every journal from its checkpoint, checkpoint the replay,
        then open the journals for appending."""
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        checkpoint = await loop.run_in_executor(None, self.storage.open)
        for journal in self.journals.journals:
            mark = checkpoint.mark(journal.index)
            result = await loop.run_in_executor(None, journal.replay, self._replay_record, mark)
            self.replay_results.append(result)
            log.info(
                "journal %s: replayed %d records from %d segments after checkpoint %s%s",
                journal.directory,
                result.records,
                result.segments,
                mark or "-",
                " (discarded a torn or corrupt tail)" if result.lost_tail else "",
            )
        await loop.run_in_executor(None, self.storage.replay_completed, self.journals.new_checkpoint())
        log.info(
            "replay done in %.2fs: %d ledgers, %d entries",
            time.monotonic() - started,
            self.storage.ledger_count,
            self.storage.entry_count,
        )
        await self.storage.start()
        await self.journals.start()
        self._update_counts()

    def start_gc(
        self, metadata: LedgerMetadataSource, disk_pressure: Callable[[], DiskPressure] = lambda: NO_PRESSURE
    ) -> GarbageCollector:
        """Start garbage collection (after :meth:`start`): ``metadata`` tells which ledgers
        still exist, ``disk_pressure`` whether compaction must wait for space."""
        assert isinstance(self.storage, DbLedgerStorage) and self.gc is None
        self.gc = GarbageCollector(self.storage, self.config, metadata, disk_pressure)
        self.gc.start()
        return self.gc

    async def close(self) -> None:
        """Stop garbage collection, finish every queued journal record (their callbacks run),
        then checkpoint and release the storage."""
        if self.gc is not None:
            await self.gc.close()
        await self.journals.close()
        # Adds were answered inside the journals' last completions; one more loop turn lets
        # the tasks waiting on the last FENCE records send their answers too.
        await asyncio.sleep(0)
        await self.storage.close()
        if self._own_read_executor is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._own_read_executor.close)

    def _replay_record(self, record: JournalRecord, location: EntryLocation, payload: bytes) -> None:
        # Runs on the replay thread before anything is served: nothing else touches the storage.
        if record.type is RecordType.ADD_ENTRY:
            self.storage.replay_entry(record.ledger_id, record.entry_id, record.lac, payload)
        elif record.type is RecordType.FENCE:
            self.storage.fence(record.ledger_id)
        elif record.type is RecordType.LEDGER_KEY:
            self.storage.set_master_key(record.ledger_id, payload)

    # -- adds -----------------------------------------------------------------------------------

    def try_add(self, requests: Sequence[AddRequest], sink: JournalSink, started: float = 0.0) -> int:
        """Admit the adds of one read, in order, to the write cache and their journal. Returns
        how many of them were dealt with — admitted, or refused (LedgerFenced; BookieReadOnly
        when the ledger's dir is full or failed) with ``sink`` told; the rest, from the first
        one that found no room, must go through :meth:`add_when_admitted`, in order.

        ``requests`` are ADD_ENTRY commands (or anything with their ``ledger_id``,
        ``entry_id``, ``lac``, ``payload`` and ``recovery``); once an entry is durable and in
        the storage — or could not be — ``sink.requests_done([..., request, ...], started,
        error)`` runs on the loop (see :class:`bookie.journal.journal.JournalSink`). The hot
        path: no closure, no future per add.

        Usually they are admitted together: one fence check per ledger, one write-cache
        reservation and one journal hand-over for the lot (the per-add checks are what the
        event loop spends its time on). One by one when a ledger is fenced, the ledgers span
        journals or dirs, or the lot does not fit at once.
        """
        # A lone add (big entries come one or two per read) is cheaper one by one.
        if len(requests) > 1 and self._try_add_together(set(map(_LEDGER_ID, requests)), requests, sink, started):
            return len(requests)
        for index, request in enumerate(requests):
            try:
                if not self._try_add_one(request, sink, started):
                    return index
            except (LedgerFencedError, UnauthorizedAccessError, BookieReadOnlyError) as error:
                # fenced; another master key; its ledger dir takes no adds
                sink.requests_done([request], started, error)
        return len(requests)

    def _try_add_one(self, request: AddRequest, sink: JournalSink, started: float) -> bool:
        """Admit one add; False when the journal or the write cache has no room for it.

        Raises:
            UnauthorizedAccessError: the ledger has another master key.
            LedgerFencedError: the ledger is fenced and this is not a recovery add.
            BookieReadOnlyError: the ledger's dir takes no adds (full or failed).
        """
        ledger_id, storage = request.ledger_id, self.storage
        state = storage.ledger(ledger_id)
        self._check_master_key(ledger_id, request.master_key, state)
        if state is not None and state.fenced and not request.recovery:
            raise LedgerFencedError(f"ledger {ledger_id} is fenced")
        journal = self.journals.for_ledger(ledger_id)
        if not journal.has_room or not storage.try_admit(ledger_id, len(request.payload), request.recovery):
            return False
        journal.add([request], sink, started)
        return True

    def _try_add_together(
        self, ledger_ids: set[int], requests: Sequence[AddRequest], sink: JournalSink, started: float
    ) -> bool:
        storage = self.storage
        keys = set(map(_MASTER_KEY, requests))
        if len(keys) != 1:
            return False  # one by one: each add's key is checked against its ledger's
        (key,) = keys
        keyless: list[int] = []
        for ledger_id in ledger_ids:
            state = storage.ledger(ledger_id)
            if state is None or state.master_key is None:
                keyless.append(ledger_id)  # new here: this key becomes its key
            elif state.master_key != key or state.fenced:
                return False  # one by one: refused (a wrong key; a fenced ledger but for recovery adds)
        journal = self.journals.for_ledgers(ledger_ids)
        if journal is None or not journal.has_room:
            return False
        if not storage.try_admit_all(ledger_ids, sum(map(len, map(_PAYLOAD, requests))), len(requests)):
            return False
        for ledger_id in keyless:
            self._record_master_key(ledger_id, key)
        journal.add(requests, sink, started)
        return True

    async def add_when_admitted(self, request: AddRequest, sink: JournalSink, started: float = 0.0) -> None:
        """Wait for room in the write cache, then in the journal (both FIFO), then admit the
        add; the fence is checked again. ``started``: when the add arrived (0: unknown); the
        write cache refuses it dbStorage_maxThrottleTimeMs after that (TooManyRequests)."""
        ledger_id, recovery, size, storage = request.ledger_id, request.recovery, len(request.payload), self.storage
        self._check_master_key(ledger_id, request.master_key, storage.ledger(ledger_id))
        await storage.admit(ledger_id, size, recovery, started or None)
        journal: Journal = self.journals.for_ledger(ledger_id)
        try:
            self._check_not_fenced(ledger_id, recovery)  # fenced while this add waited?
            if not journal.has_room:
                await journal.wait_for_room()
                self._check_not_fenced(ledger_id, recovery)
        except BaseException:
            storage.cancel_admission(ledger_id, size)
            raise
        journal.add([request], sink, started)

    def _check_master_key(self, ledger_id: int, master_key: bytes, state: LedgerState | None) -> None:
        """Refuse a key other than the ledger's; record it if the ledger has none yet (its
        LEDGER_KEY record goes into the ledger's journal ahead of the caller's record).

        Raises:
            UnauthorizedAccessError: the ledger has another master key.
        """
        if state is not None and state.master_key is not None:
            if state.master_key != master_key:
                raise UnauthorizedAccessError(f"ledger {ledger_id}: wrong master key")
            return
        self._record_master_key(ledger_id, master_key)

    def _record_master_key(self, ledger_id: int, master_key: bytes) -> None:
        self.storage.set_master_key(ledger_id, master_key)
        key = LedgerKey(ledger_id, master_key)
        self.journals.for_ledger(ledger_id).add([key], _KEY_DURABLE, 0.0, RecordType.LEDGER_KEY)

    def _check_not_fenced(self, ledger_id: int, recovery: bool) -> None:
        state = self.storage.ledger(ledger_id)
        if state is not None and state.fenced and not recovery:
            raise LedgerFencedError(f"ledger {ledger_id} is fenced")

    # -- fencing and reads ----------------------------------------------------------------------

    def fence(self, ledger_id: int, master_key: bytes) -> asyncio.Future[LedgerState]:
        """Fence the ledger now (creating it if unknown): adds from here on are refused. The
        future resolves with the ledger's state once the FENCE record is durable.

        Raises:
            UnauthorizedAccessError: the ledger has another master key (nothing is fenced).
        """
        self._check_master_key(ledger_id, master_key, self.storage.ledger(ledger_id))
        if self.storage.fence(ledger_id):
            log.info("ledger %d fenced", ledger_id)
        fenced: asyncio.Future[LedgerState] = asyncio.get_running_loop().create_future()
        sink = _FenceDurable(fenced, self.storage)
        self.journals.for_ledger(ledger_id).add([Fence(ledger_id)], sink, 0.0, RecordType.FENCE)
        return fenced

    def ledger(self, ledger_id: int) -> LedgerState:
        """The ledger's state.

        Raises:
            NoSuchLedgerError: this bookie never saw the ledger.
        """
        state = self.storage.ledger(ledger_id)
        if state is None:
            raise NoSuchLedgerError(f"ledger {ledger_id} is not on this bookie")
        return state

    async def read_entries(
        self, ledger_id: int, first_entry_id: int, count: int, max_bytes: int, ready: asyncio.Future[None] | None = None
    ) -> list[tuple[int, bytes]]:
        """Up to ``count`` consecutive entries from ``first_entry_id`` within ``max_bytes``;
        admitted to the read executor at once, read once ``ready`` (if given) is done.

        Raises:
            NoSuchLedgerError / NoSuchEntryError: unknown ledger / first entry not here.
            TooManyRequestsError: the read executor refused the read (its queue is full).
        """
        self.ledger(ledger_id)
        storage = self.storage
        entries = await self.read_executor.submit(
            ledger_id, lambda: storage.read_entries(ledger_id, first_entry_id, count, max_bytes), ready
        )
        metrics.TOTALS.read_bytes += sum(len(payload) for _, payload in entries)
        return entries

    async def disk_usage(self) -> DiskUsage:
        return await asyncio.get_running_loop().run_in_executor(None, self.ledger_dirs.disk_usage)

    def _update_counts(self) -> None:
        metrics.LEDGERS_COUNT.set(self.storage.ledger_count)
        metrics.ENTRIES_COUNT.set(self.storage.entry_count)

    def info(self) -> dict:
        """Figures for BOOKIE_INFO and /api/v1/bookie/info (besides disk space); the full and
        failed ledger dirs (and why each failed) too."""
        self._update_counts()
        return {
            "ledgers": self.storage.ledger_count,
            "entries": self.storage.entry_count,
            "journalQueuedEntries": self.journals.queued_entries,
            "journalDirs": [str(Path(d)) for d in self.config.journal_dirs],
            "ledgerDirs": [str(Path(d)) for d in self.config.ledger_dirs],
            "fullLedgerDirs": [d for d, state in self.dirs_manager.states().items() if state == FULL],
            "failedLedgerDirs": {str(d): why for d, why in self.dirs_manager.failed.items()},
        }
