"""The ReplicationWorker (BookKeeper's ``ReplicationWorker``): takes one under-replicated ledger at
a time under its lock, copies its lost fragments to bookies the placement policy chooses,
swaps each copy into the ledger metadata, and clears the mark.

What is lost: the fragments on bookies of the ledger that are no longer registered, on
read-only bookies the mark names (a bookie being decommissioned), and those the LedgerChecker
finds missing on writable bookies the mark names (a mark naming no bookie: on any bookie). A
marked bookie that is back with its data is not lost: the mark is just cleared.

A ledger still OPEN is left to its writer for ``openLedgerRereplicationGracePeriod`` (counted
from the first time this worker saw it): the writer replaces a lost bookie of its last
ensemble itself (an ensemble change) or closes the ledger. Past that, the worker opens it with
recovery — fenced and closed; the writer then gets LedgerFenced and its managed ledger rolls
to a new ledger — and replicates it as a closed ledger. The metadata of an open ledger is
never changed here (its writer holds it at its own version).

Invariants:

- a fragment's bookie is replaced in the metadata only after every entry of it is durable on
  the replacement (compare-and-set on the metadata version; re-read and re-checked on
  BadVersion);
- a mark is cleared only at the version read when the ledger was taken (a bookie marked
  meanwhile keeps the mark);
- a ledger whose re-replication failed is put aside (1 s, doubling, up to
  ``lockReleaseOfFailedLedgerGracePeriod``) and its lock released.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable

from minipulsar.bookkeeper.client import BookKeeper
from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata, ledger_path
from minipulsar.bookkeeper.placement import select_replacement
from minipulsar.bookkeeper.replication import metrics
from minipulsar.bookkeeper.replication.fragment_replicator import LedgerFragmentReplicator
from minipulsar.bookkeeper.replication.fragments import (
    LedgerFragment,
    bookies_of,
    fragments_on,
    replace_bookie,
)
from minipulsar.bookkeeper.replication.ledger_checker import LedgerChecker
from minipulsar.bookkeeper.replication.settings import AutoRecoverySettings
from minipulsar.bookkeeper.replication.underreplication_manager import (
    LedgerUnderreplicationManager,
    UnderreplicatedLedger,
)
from minipulsar.errors import BadVersionError, MiniPulsarError, NoSuchLedgerError
from minipulsar.metadata.store import MetadataStore, Notification, SessionEvent
from minipulsar.supervision import spawn

log = logging.getLogger(__name__)

DEFER_FIRST_S = 1.0
LOCK_RELEASE_TIMEOUT_S = 2.0
"""How long releasing a ledger's lock may take (a store that does not answer, at a stop: the
lock is ephemeral and goes with the session)."""
OPEN_LEDGER_RECHECK_S = 2.0
"""An open ledger within its grace period is looked at again this often (its writer may close it)."""


class Outcome(str, enum.Enum):
    REPLICATED = "replicated"
    """Every lost fragment is copied and swapped in; the mark is cleared (or changed meanwhile)."""
    WAITING = "waiting"
    """An open ledger within its grace period: left to its writer for now."""


class ReplicationWorker:
    def __init__(
        self,
        bk: BookKeeper,
        store: MetadataStore,
        urm: LedgerUnderreplicationManager,
        settings: AutoRecoverySettings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bk = bk
        self._store = store
        self._urm = urm
        self._settings = settings
        self._clock = clock
        self._replicator = LedgerFragmentReplicator(bk.bookies, settings.rereplication_entry_batch_size)
        self._checker = LedgerChecker(self._replicator)
        self._wake = asyncio.Event()
        self._open_since: dict[int, float] = {}
        """Open ledger → when this worker first found it under-replicated (for the grace period)."""
        self._put_aside: dict[int, tuple[float, float]] = {}
        """Ledger → (until, last wait): ledgers not to take before ``until``."""
        self._task: asyncio.Task[None] | None = None
        self.replicated_ledgers = 0

    def start(self) -> None:
        assert self._task is None, "the worker is started once"
        self._urm.watch(self._changed)
        self._store.add_session_listener(self._session_event)
        self._task = spawn(self._run(), name="ReplicationWorker", logger=log)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _changed(self, _: Notification) -> None:
        self._wake.set()

    def _session_event(self, event: SessionEvent) -> None:
        if event in (SessionEvent.RECONNECTED, SessionEvent.SESSION_REESTABLISHED):
            self._wake.set()  # marks notified while disconnected were lost: look now, not at the next poll

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                worked = await self.run_once()
            except MiniPulsarError as error:  # the metadata store unreachable, for one
                log.warning("replication worker: %s", error)
                worked = False
            if not worked:
                await self._wait(self._idle_wait_s())

    def _idle_wait_s(self) -> float:
        """Until the next poll, or until a ledger put aside may be taken again."""
        now = self._clock()
        due = [until - now for until, _ in self._put_aside.values() if until > now]
        return max(0.05, min([self._settings.worker_poll_interval_s, *due]))

    def _forget_stale(self, now: float) -> None:
        """Forget ledgers put aside long ago (their marks were cleared by another worker, say)."""
        horizon = now - self._settings.lock_release_of_failed_ledger_grace_period_s - OPEN_LEDGER_RECHECK_S
        for ledger_id in [ledger for ledger, (until, _) in self._put_aside.items() if until < horizon]:
            del self._put_aside[ledger_id]
            self._open_since.pop(ledger_id, None)

    async def _wait(self, timeout_s: float) -> None:
        # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancellation that
        # arrives as the event is set, and the worker would never stop.
        try:
            async with asyncio.timeout(timeout_s):
                await self._wake.wait()
        except TimeoutError:
            pass

    async def run_once(self) -> bool:
        """Take one ledger and work it; False when none could be taken."""
        now = self._clock()
        self._forget_stale(now)
        skip = {ledger for ledger, (until, _) in self._put_aside.items() if until > now}
        mark = await self._urm.acquire_next(skip)
        if mark is None:
            return False
        try:
            await self._work(mark)
        finally:
            await self._release(mark.ledger_id)
        return True

    async def _release(self, ledger_id: int) -> None:
        try:
            async with asyncio.timeout(LOCK_RELEASE_TIMEOUT_S):
                await self._urm.release(ledger_id)
        except (MiniPulsarError, TimeoutError) as error:
            log.warning("ledger %d: lock not released (it goes with the session): %r", ledger_id, error)

    async def _work(self, mark: UnderreplicatedLedger) -> None:
        started = self._clock()
        try:
            outcome = await self.rereplicate(mark)
        except MiniPulsarError as error:
            metrics.REREPLICATE_TIME.labels("false").observe((self._clock() - started) * 1000)
            self._put_aside_after_failure(mark.ledger_id, error)
            return
        metrics.REREPLICATE_TIME.labels("true").observe((self._clock() - started) * 1000)
        if outcome is Outcome.WAITING:
            self._put_aside[mark.ledger_id] = (self._clock() + OPEN_LEDGER_RECHECK_S, 0.0)
        else:
            self._put_aside.pop(mark.ledger_id, None)
            self._open_since.pop(mark.ledger_id, None)

    def _put_aside_after_failure(self, ledger_id: int, error: MiniPulsarError) -> None:
        _, last_s = self._put_aside.get(ledger_id, (0.0, 0.0))
        wait_s = min(self._settings.lock_release_of_failed_ledger_grace_period_s, max(DEFER_FIRST_S, 2 * last_s))
        self._put_aside[ledger_id] = (self._clock() + wait_s, wait_s)
        metrics.NUM_DEFER_LEDGER_LOCK_RELEASE_OF_FAILED_LEDGER.inc()
        log.warning("ledger %d: re-replication failed, trying again in %.0f s: %s", ledger_id, wait_s, error)

    # -- one ledger -----------------------------------------------------------------------------

    async def rereplicate(self, mark: UnderreplicatedLedger) -> Outcome:
        """Work one marked ledger (its lock held by the caller).

        Raises:
            MiniPulsarError: a fragment could not be copied or swapped in (the mark stays).
        """
        ledger_id = mark.ledger_id
        try:
            metadata = await self._bk.read_metadata(ledger_id)
        except NoSuchLedgerError:
            await self._urm.mark_ledger_replicated(mark)  # deleted: nothing left to replicate
            return Outcome.REPLICATED
        lost = await self._lost_bookies(metadata, mark)
        if not lost:
            await self._urm.mark_ledger_replicated(mark)
            self._open_since.pop(ledger_id, None)
            return Outcome.REPLICATED
        if not metadata.is_closed:
            since = self._open_since.setdefault(ledger_id, self._clock())
            if self._clock() - since < self._settings.open_ledger_rereplication_grace_period_s:
                return Outcome.WAITING
            log.info("ledger %d: still open after the grace period with %s lost; fencing it", ledger_id, sorted(lost))
            await self._bk.open_ledger(ledger_id, recovery=True)
            metadata = await self._bk.read_metadata(ledger_id)
            lost = await self._lost_bookies(metadata, mark)  # the last segment is final now
        fragments = fragments_on(metadata, metadata.last_entry_id, lost)
        for fragment in fragments:
            metadata = await self._replicate_fragment(metadata, fragment, lost)
        if fragments:
            metrics.NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED.inc()
            self.replicated_ledgers += 1
            log.info("ledger %d: re-replicated %d fragments from %s", ledger_id, len(fragments), sorted(lost))
        await self._urm.mark_ledger_replicated(mark)
        return Outcome.REPLICATED

    async def _lost_bookies(self, metadata: LedgerMetadata, mark: UnderreplicatedLedger) -> frozenset[str]:
        """The bookies of the ledger whose fragments must move (see the module docstring)."""
        named = bookies_of(metadata)
        registered = await self._bk.registry.bookies()
        marked = mark.missing_replicas & named
        lost = (named - registered.writable - registered.read_only) | (marked & registered.read_only)
        to_check = marked - lost
        if to_check or not mark.missing_replicas:
            missing = await self._checker.lost_fragments(metadata)
            lost |= {f.bookie for f in missing if f.bookie in to_check or not mark.missing_replicas}
        return frozenset(lost)

    async def _replicate_fragment(
        self, metadata: LedgerMetadata, fragment: LedgerFragment, lost: frozenset[str]
    ) -> LedgerMetadata:
        ensemble = metadata.ensembles[fragment.segment_index][1]
        if ensemble[fragment.bookie_index] != fragment.bookie:
            return metadata  # replaced meanwhile (an earlier fragment of the same bookie)
        target = select_replacement(
            self._bk.placement,
            ensemble,
            fragment.bookie_index,
            metadata.write_quorum,
            metadata.ack_quorum,
            await self._bk.cluster_view(),
            lost,
        )
        await self._replicator.replicate(metadata, fragment, target, lost)
        return await self._swap_in(fragment, target)

    async def _swap_in(self, fragment: LedgerFragment, target: str) -> LedgerMetadata:
        """Put ``target`` in the fragment's place in the stored metadata (CAS, re-read on conflict)."""
        while True:
            current = await self._bk.read_metadata(fragment.ledger_id)
            ensemble = current.ensembles[fragment.segment_index][1]
            if ensemble[fragment.bookie_index] != fragment.bookie or target in ensemble:
                return current  # someone else replaced it meanwhile: our copy is harmless garbage
            changed = replace_bookie(current, fragment.segment_index, fragment.bookie_index, fragment.bookie, target)
            try:
                await self._store.put(ledger_path(fragment.ledger_id), changed.to_bytes(), current.version)
            except BadVersionError:
                continue
            log.info(
                "ledger %d segment %d (entries %d-%d): %s replaced by %s",
                fragment.ledger_id,
                fragment.segment_index,
                fragment.first_entry_id,
                fragment.last_entry_id,
                fragment.bookie,
                target,
            )
            return await self._bk.read_metadata(fragment.ledger_id)
