"""The Auditor (BookKeeper's ``Auditor``): run by the elected process only. It finds ledgers
that have fragments on lost bookies and marks them under-replicated for the workers.

- **Bookie audit** (on every change of ``/ledgers/available``, at start, after every
  reconnection of the metadata session (changes notified meanwhile were lost), and every
  ``auditorPeriodicBookieCheckInterval``): a bookie named by some ledger's ensembles and not
  registered (writable or read-only) is lost; once it has been lost for
  ``lostBookieRecoveryDelay`` seconds, every ledger with a fragment on it is marked.
- **Periodic check** (every ``auditorPeriodicCheckInterval``): the LedgerChecker reads the
  first and last entry of every final fragment from its bookie; a fragment that is not there
  gets its ledger marked with that bookie (this finds what bookie audits miss: a replica that
  failed an add the writer had already completed elsewhere, a wiped disk).

Invariants: nothing is marked while AutoRecovery is disabled (``/ledgers/underreplication/disable``);
a bookie that comes back before its delay ran out is not marked.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection

from minipulsar.bookkeeper.bookie_client import BookieClient
from minipulsar.bookkeeper.bookie_registry import AVAILABLE_PATH, BookieRegistry
from minipulsar.bookkeeper.replication import metrics
from minipulsar.bookkeeper.replication.bookie_ledger_indexer import BookieLedgerIndex, build_index
from minipulsar.bookkeeper.replication.fragment_replicator import LedgerFragmentReplicator
from minipulsar.bookkeeper.replication.ledger_checker import LedgerChecker
from minipulsar.bookkeeper.replication.settings import AutoRecoverySettings
from minipulsar.bookkeeper.replication.underreplication_manager import LedgerUnderreplicationManager
from minipulsar.errors import MiniPulsarError
from minipulsar.metadata.store import MetadataStore, Notification, SessionEvent
from minipulsar.supervision import Periodic, spawn

log = logging.getLogger(__name__)


def due_bookies(lost_since: dict[str, float], now: float, delay_s: float) -> set[str]:
    """The lost bookies whose ``lostBookieRecoveryDelay`` has run out."""
    return {bookie for bookie, since in lost_since.items() if now - since >= delay_s}


def update_lost(lost_since: dict[str, float], lost: Collection[str], now: float) -> dict[str, float]:
    """Lost bookies with when each was first seen lost; bookies back are forgotten."""
    return {bookie: lost_since.get(bookie, now) for bookie in lost}


class Auditor:
    def __init__(
        self,
        store: MetadataStore,
        registry: BookieRegistry,
        bookies: BookieClient,
        urm: LedgerUnderreplicationManager,
        settings: AutoRecoverySettings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._registry = registry
        self._urm = urm
        self._settings = settings
        self._clock = clock
        self._checker = LedgerChecker(LedgerFragmentReplicator(bookies, settings.rereplication_entry_batch_size))
        self._lost_since: dict[str, float] = {}
        self._audit_wanted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._periodic: list[Periodic] = []
        self._watching = False

    def start(self) -> None:
        assert self._task is None, "the auditor is started once"
        if not self._watching:
            self._watching = True  # a store keeps its watches: one registration per auditor
            self._store.watch(AVAILABLE_PATH, self._bookies_changed)
            self._urm.watch(self._underreplication_changed)
            self._store.add_session_listener(self._session_event)
        self._audit_wanted.set()
        self._task = spawn(self._run(), name="Auditor", logger=log)
        for name, interval_s, action in (
            ("auditor bookie check", self._settings.auditor_periodic_bookie_check_interval_s, self.trigger_audit),
            ("auditor periodic check", self._settings.auditor_periodic_check_interval_s, self.check_all_ledgers),
        ):
            if interval_s > 0:
                periodic = Periodic(name, interval_s, action, logger=log, expected=(MiniPulsarError,))
                periodic.start()
                self._periodic.append(periodic)

    async def stop(self) -> None:
        task, self._task = self._task, None
        for periodic in self._periodic:
            await periodic.stop()
        self._periodic.clear()
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    @property
    def running(self) -> bool:
        return self._task is not None

    def _bookies_changed(self, _: Notification) -> None:
        if self._task is not None:
            self._audit_wanted.set()

    def _session_event(self, event: SessionEvent) -> None:
        if event in (SessionEvent.RECONNECTED, SessionEvent.SESSION_REESTABLISHED) and self._task is not None:
            self._audit_wanted.set()  # registrations notified while disconnected were lost

    def _underreplication_changed(self, notification: Notification) -> None:
        if self._task is not None and notification.path.endswith("/disable"):
            self._audit_wanted.set()  # re-enabled: audit what happened while disabled

    def trigger_audit(self) -> None:
        """Audit the bookies now (BookKeeper's ``triggerAudit``)."""
        self._audit_wanted.set()

    async def _run(self) -> None:
        wait_s: float | None = None
        while True:
            try:  # asyncio.timeout, not wait_for: see ReplicationWorker._wait
                async with asyncio.timeout(wait_s):
                    await self._audit_wanted.wait()
            except TimeoutError:
                pass
            self._audit_wanted.clear()
            try:
                wait_s = await self.audit_bookies()
            except MiniPulsarError as error:
                log.warning("auditor: bookie audit failed, trying again: %s", error)
                wait_s = 1.0

    async def audit_bookies(self) -> float | None:
        """One bookie audit. Returns the seconds until a delayed bookie is due (None: none is)."""
        started = self._clock()
        registered = await self._registry.bookies()
        index = await build_index(self._store)
        lost = set(index.by_bookie) - registered.writable - registered.read_only
        now = self._clock()
        self._lost_since = update_lost(self._lost_since, lost, now)
        delay_s = await self._urm.lost_bookie_recovery_delay_s(self._settings.lost_bookie_recovery_delay_s)
        due = due_bookies(self._lost_since, now, delay_s)
        waiting = set(self._lost_since) - due
        if waiting:
            metrics.NUM_BOOKIE_AUDITS_DELAYED.inc()
            log.info("auditor: bookies %s lost; marking their ledgers after %d s", sorted(waiting), delay_s)
        if due and await self._urm.is_enabled():
            await self._publish(index, due)
        await self._count_marks(index)
        metrics.AUDIT_BOOKIES_TIME.observe((self._clock() - started) * 1000)
        if not waiting:
            return None
        return max(0.05, min(since + delay_s - now for bookie, since in self._lost_since.items() if bookie in waiting))

    async def _publish(self, index: BookieLedgerIndex, bookies: set[str]) -> None:
        started = self._clock()
        marked = 0
        for bookie in sorted(bookies):
            for ledger_id in sorted(index.ledgers_on(bookie)):
                await self._urm.mark_ledger_underreplicated(ledger_id, [bookie])
                marked += 1
        if marked:
            log.info("auditor: lost bookies %s: marked %d ledger fragments under-replicated", sorted(bookies), marked)
        metrics.URL_PUBLISH_TIME_FOR_LOST_BOOKIE.observe((self._clock() - started) * 1000)

    async def _count_marks(self, index: BookieLedgerIndex) -> None:
        marks = await self._urm.list_underreplicated()
        metrics.NUM_UNDER_REPLICATED_LEDGERS.set(len(marks))
        sizes = (index.ledgers[m.ledger_id].length for m in marks if m.ledger_id in index.ledgers)
        metrics.UNDER_REPLICATED_LEDGERS_TOTAL_SIZE.set(sum(sizes))

    async def check_all_ledgers(self) -> None:
        """The periodic check: mark every ledger with a fragment missing from its bookie."""
        started = self._clock()
        if not await self._urm.is_enabled():
            return
        index = await build_index(self._store)
        for ledger_id, metadata in sorted(index.ledgers.items()):
            lost = await self._checker.lost_fragments(metadata)
            metrics.NUM_LEDGERS_CHECKED.inc()
            if lost:
                bookies = sorted({f.bookie for f in lost})
                log.info("auditor: ledger %d has fragments missing on %s", ledger_id, bookies)
                await self._urm.mark_ledger_underreplicated(ledger_id, bookies)
        await self._count_marks(index)
        metrics.CHECK_ALL_LEDGERS_TIME.observe((self._clock() - started) * 1000)
