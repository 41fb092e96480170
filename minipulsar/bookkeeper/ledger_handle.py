"""A ledger open for writing or reading.

Writes: entry ``e`` goes to its write set, the ``Qw`` bookies at ensemble positions
``(e + k) mod E``. It completes when ``Qa`` of them acknowledged it *and* every earlier entry
completed, so completions and the last-add-confirmed (LAC) advance strictly in order; the
writer's LAC rides on every add.

Ensemble change: a bookie that fails a write (error, timeout, lost connection, read-only) is
replaced. The new ensemble — the old one with the failed positions filled by the placement
policy — starts at LAC + 1 and is stored by compare-and-set; then every pending add whose
write set includes a replaced position forgets that position's ack and is sent to the
replacement. Invariants while a change is in progress: no add completes (so LAC + 1 stays the
new segment's first entry) and no new add is sent (it waits and goes to the new ensemble).
The handle fails — every pending add with it — only when no replacement exists
(NotEnoughBookiesError), the ledger was fenced (LedgerFencedError: someone recovers it), or
its metadata changed under us.

Digests: each payload is wrapped once, in :meth:`LedgerHandle.add`, by the ledger's
:class:`~minipulsar.bookkeeper.digest.DigestManager` (header with the LAC and the ledger length
so far, digest, payload); resends after an ensemble change send the same bytes. Every add
carries the ledger's master key.

Copies: the wrapped entry is kept as its head (metadata and digest) and the caller's payload
object; each replica's ADD_ENTRY is a small packed header followed by that same payload buffer
(:meth:`BookieClient.add_entry_then`), so the broker never copies a payload in user space after
decoding it. Answers come back as callbacks from the request table (no future per replica),
and :meth:`LedgerHandle.add_then` tells its caller the same way: synchronously, in entry
order, from the answer that completes an add (a failure on the next loop iteration).

Reads: a read that no replica could serve takes the ensembles stored in the metadata if they
changed since the handle read them (AutoRecovery re-replicated a fragment elsewhere), and is
tried once more.

Memory: an add's payload counts against the ledger's and the client's :class:`AddBudget`
from its first send until every replica answered; adds that do not fit wait here, in order.
A completed add drops its payload; its slower replicas still have their request timeout.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import cast

from minipulsar.bookkeeper.add_budget import AddBudget
from minipulsar.bookkeeper.context import ClientContext
from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata, LedgerState, ledger_path
from minipulsar.bookkeeper.ledger_reader import LedgerReader
from minipulsar.bookkeeper.metrics import ADD_ENTRY, NUM_ENSEMBLE_CHANGE, NUM_PENDING_ADD
from minipulsar.errors import (
    BadVersionError,
    LedgerFencedError,
    MiniPulsarError,
    NoSuchEntryError,
    PersistenceError,
    UnauthorizedAccessError,
)
from minipulsar.metadata.cas import put_resolving
from minipulsar.supervision import spawn

log = logging.getLogger(__name__)

_ADD_OK = ADD_ENTRY.labels("true")
_pending_adds = [0]
"""Adds not yet completed in this process, all handles: NUM_PENDING_ADD reads it at scrape
time (a gauge updated per add took a lock per add)."""
NUM_PENDING_ADD.set_function(lambda: _pending_adds[0])
_ADD_FAILED = ADD_ENTRY.labels("false")


AddCallback = Callable[[int | None, MiniPulsarError | None], None]
"""What :meth:`LedgerHandle.add_then` tells: ``(entry_id, None)`` or ``(None, error)``."""


def _settle(future: asyncio.Future[int], entry_id: int | None, error: MiniPulsarError | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(cast(int, entry_id))


class HandleState(enum.Enum):
    OPEN = "open"
    FAILED = "failed"
    CLOSED = "closed"


class PendingAdd:
    """One add between :meth:`LedgerHandle.add` and its completion (and its last replica answer)."""

    __slots__ = (
        "acked",
        "callback",
        "completed",
        "entry_id",
        "head",
        "holds_budget",
        "in_flight",
        "payload",
        "quorum_reached",
        "size",
        "started_s",
    )

    def __init__(self, entry_id: int, head: bytes, payload: bytes, callback: AddCallback) -> None:
        self.entry_id = entry_id
        self.head = head
        """The wrapped entry's metadata and digest (:meth:`DigestManager.package_head`)."""
        self.payload: bytes | None = payload
        """The caller's payload, sent after ``head``; None once the add completed."""
        self.size = len(payload)
        """Bytes of the caller's payload (what the ledger's length counts)."""
        self.callback: AddCallback | None = callback
        """Told the outcome once (then None): ``(entry_id, None)`` or ``(None, error)``."""
        self.acked = 0
        """Ensemble positions whose bookie acknowledged this entry, as a bit mask."""
        self.in_flight = 0
        """Requests sent for this entry and not answered yet."""
        self.completed = False
        self.quorum_reached = False
        self.holds_budget = False
        self.started_s = time.monotonic()


class LedgerHandle:
    """Handle on one ledger. Writable only when created by this client and not yet closed."""

    def __init__(
        self, metadata: LedgerMetadata, ctx: ClientContext, *, writable: bool, last_add_confirmed: int | None = None
    ) -> None:
        self.metadata = metadata
        self._ctx = ctx
        self.writable = writable
        self.state = HandleState.OPEN if writable else HandleState.CLOSED
        self.last_add_confirmed = metadata.last_entry_id if last_add_confirmed is None else last_add_confirmed
        self.length = metadata.length
        self._next_entry_id = self.last_add_confirmed + 1
        self._pending: deque[PendingAdd] = deque()
        """Adds sent to the bookies and not completed, in entry order."""
        self._unsent: deque[PendingAdd] = deque()
        """Adds waiting for budget room or for an ensemble change, in entry order (all after ``_pending``)."""
        self._budget = AddBudget(ctx.max_pending_add_bytes_per_ledger)
        self._failed_bookies: dict[int, str] = {}
        """Ensemble position → the bookie that failed there, for the next ensemble change."""
        self._bad_bookies: set[str] = set()
        """Every bookie that failed a write of this handle: never chosen again as a replacement
        (a dead bookie stays registered until its session expires)."""
        self._ensemble_change: asyncio.Task | None = None
        self._digest = metadata.digest_manager()
        self._added_length = self.length
        """Payload bytes of every add accepted so far (the length in the next entry's header)."""
        self._reader = LedgerReader(ctx)
        self._loop = asyncio.get_running_loop()
        self.failure: MiniPulsarError | None = None
        self.ensemble_changes = 0

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id

    @property
    def last_entry_id(self) -> int:
        """The last readable entry: LAC while open, the final entry once closed."""
        return self.last_add_confirmed

    @property
    def pending_adds(self) -> int:
        return len(self._pending) + len(self._unsent)

    # -- writing --------------------------------------------------------------------------------

    def add(self, payload: bytes) -> asyncio.Future[int]:
        """Append ``payload``; the future yields its entry id once durable on ``Qa`` bookies."""
        future: asyncio.Future[int] = self._loop.create_future()
        if self.state is not HandleState.OPEN:
            future.set_exception(self.failure or PersistenceError(f"ledger {self.ledger_id} is {self.state.value}"))
            return future
        self.add_then(payload, partial(_settle, future))
        return future

    def add_then(self, payload: bytes, callback: AddCallback) -> None:
        """:meth:`add` for the hot path: ``callback(entry_id, None)`` once the entry is durable
        on ``Qa`` bookies — synchronously, in entry order, from the answer that completes it —
        or ``callback(None, error)`` on a later loop iteration when the add fails."""
        if self.state is not HandleState.OPEN:
            error = self.failure or PersistenceError(f"ledger {self.ledger_id} is {self.state.value}")
            self._loop.call_soon(callback, None, error)
            return
        entry_id = self._next_entry_id
        self._next_entry_id += 1
        self._added_length += len(payload)
        head = self._digest.package_head(entry_id, self.last_add_confirmed, self._added_length, payload)
        op = PendingAdd(entry_id, head, payload, callback)
        _pending_adds[0] += 1
        self._unsent.append(op)
        if len(self._unsent) == 1:
            self._send_unsent()

    def _send_unsent(self) -> None:
        """Send waiting adds, in order, while the budgets have room and no ensemble change runs."""
        client_budget = self._ctx.client_add_budget
        unsent = self._unsent
        while unsent and self._ensemble_change is None and self.state is HandleState.OPEN:
            op = unsent[0]
            if not (self._budget.fits(op.size) and client_budget.fits(op.size)):
                self._budget.wait(self._send_unsent)
                client_budget.wait(self._send_unsent)
                return
            unsent.popleft()
            self._budget.take(op.size)
            client_budget.take(op.size)
            op.holds_budget = True
            self._pending.append(op)
            ensemble = self.metadata.last_ensemble
            size = len(ensemble)
            for k in range(self.metadata.write_quorum):
                self._send(op, (op.entry_id + k) % size, ensemble)

    def _send(self, op: PendingAdd, position: int, ensemble: tuple[str, ...]) -> None:
        bookie = ensemble[position]
        assert op.payload is not None, "an add is sent (or resent) only before it completes"
        op.in_flight += 1
        self._ctx.bookies.add_entry_then(
            bookie,
            self.ledger_id,
            op.entry_id,
            self.last_add_confirmed,
            op.head,
            op.payload,
            partial(self._add_answered, op, position, bookie),
            master_key=self._digest.master_key,
        )

    def _add_answered(
        self, op: PendingAdd, position: int, bookie: str, response: object | None, error: MiniPulsarError | None
    ) -> None:
        """A replica's answer: ``response``, or the ``error`` that ended the request (neither:
        it was cancelled)."""
        op.in_flight -= 1
        current = self.metadata.ensemble_for(op.entry_id)[position] if not op.completed else bookie
        if response is not None:
            if current == bookie and not op.completed:
                op.acked |= 1 << position
                if not op.quorum_reached and op.acked.bit_count() >= self.metadata.ack_quorum:
                    op.quorum_reached = True
                    self._complete_in_order()
        elif error is not None:
            self._write_failed(op, position, bookie, error)
        self._release_if_done(op)

    def _write_failed(self, op: PendingAdd, position: int, bookie: str, error: BaseException) -> None:
        if isinstance(error, MiniPulsarError):
            self._ctx.record_error(bookie, error)
        if self.state is not HandleState.OPEN:
            return
        if isinstance(error, UnauthorizedAccessError):
            self._fail(UnauthorizedAccessError(f"ledger {self.ledger_id}: bookie {bookie} refused our master key"))
            return
        if isinstance(error, LedgerFencedError):
            self._fail(
                LedgerFencedError(
                    f"ledger {self.ledger_id} was fenced by another client "
                    f"(bookie {bookie} refused entry {op.entry_id})"
                )
            )
            return
        if self.metadata.last_ensemble[position] != bookie:
            return  # that bookie was replaced already; the entry went to its successor
        log.warning(
            "ledger %d: bookie %s failed to write entry %d (%s); replacing it",
            self.ledger_id,
            bookie,
            op.entry_id,
            error,
        )
        self._failed_bookies[position] = bookie
        self._bad_bookies.add(bookie)
        if self._ensemble_change is None:
            self._ensemble_change = spawn(
                self._change_ensemble(), name=f"ledger {self.ledger_id}: ensemble change", logger=log
            )

    def _release_if_done(self, op: PendingAdd) -> None:
        if op.holds_budget and op.in_flight == 0 and (op.completed or self.state is not HandleState.OPEN):
            op.holds_budget = False
            self._budget.give_back(op.size)
            self._ctx.client_add_budget.give_back(op.size)

    def _complete_in_order(self) -> None:
        if self._ensemble_change is not None:
            return  # LAC must not move while a new ensemble is being stored from LAC + 1
        pending = self._pending
        now = time.monotonic()
        while pending and pending[0].quorum_reached:
            op = pending.popleft()
            assert op.entry_id == self.last_add_confirmed + 1, "adds complete in entry order"
            self.last_add_confirmed = op.entry_id
            self.length += op.size
            op.completed = True
            op.payload = None
            _pending_adds[0] -= 1
            _ADD_OK.observe((now - op.started_s) * 1000)
            callback, op.callback = op.callback, None
            if callback is not None:
                callback(op.entry_id, None)
            self._release_if_done(op)

    # -- ensemble change ------------------------------------------------------------------------

    async def _change_ensemble(self) -> None:
        try:
            while self._failed_bookies and self.state is HandleState.OPEN:
                failed, self._failed_bookies = self._failed_bookies, {}
                replaced = await self._store_new_ensemble(failed)
                self._resend(replaced)
        except MiniPulsarError as error:
            self._fail(error)
        except BaseException as error:  # a bug: fail the pending adds rather than leave them wedged, then crash
            self._fail(PersistenceError(f"ledger {self.ledger_id}: ensemble change failed: {error!r}"))
            raise
        finally:
            self._ensemble_change = None
        if self.state is HandleState.OPEN:
            self._complete_in_order()
            self._send_unsent()

    async def _store_new_ensemble(self, failed: dict[int, str]) -> set[int]:
        """Replace the failed bookies in a new segment from LAC + 1; returns the positions replaced.

        Raises:
            NotEnoughBookiesError: no writable bookie can take a failed one's place.
            LedgerFencedError: the metadata is no longer OPEN (another client recovers the ledger).
        """
        metadata = self.metadata
        ensemble = list(metadata.last_ensemble)
        replaced = {position for position, bookie in failed.items() if ensemble[position] == bookie}
        if not replaced:
            return set()
        exclude = frozenset(ensemble) | frozenset(self._bad_bookies)
        for position in sorted(replaced):
            ensemble[position] = await self._ctx.replace_bookie(
                tuple(ensemble), position, metadata.write_quorum, metadata.ack_quorum, exclude
            )
            exclude |= {ensemble[position]}
        start = self.last_add_confirmed + 1
        segments = list(metadata.ensembles)
        if segments[-1][0] == start:
            segments[-1] = (start, tuple(ensemble))
        else:
            segments.append((start, tuple(ensemble)))
        changed = replace(metadata, ensembles=tuple(segments))
        try:
            path = ledger_path(self.ledger_id)
            stat = await put_resolving(self._ctx.store, path, changed.to_bytes(), metadata.version)
        except BadVersionError:
            raise LedgerFencedError(
                f"ledger {self.ledger_id}: metadata changed by another client during an "
                "ensemble change (it is being recovered)"
            ) from None
        self.metadata = replace(changed, version=stat.version)
        self.ensemble_changes += 1
        NUM_ENSEMBLE_CHANGE.inc()
        log.info(
            "ledger %d: ensemble change at entry %d: %s -> %s",
            self.ledger_id,
            start,
            list(metadata.last_ensemble),
            ensemble,
        )
        return replaced

    def _resend(self, replaced: set[int]) -> None:
        """Send every pending add whose write set includes a replaced position to the new bookie."""
        if not replaced:
            return
        ensemble = self.metadata.last_ensemble
        size = len(ensemble)
        for op in self._pending:
            for k in range(self.metadata.write_quorum):
                position = (op.entry_id + k) % size
                if position in replaced and op.payload is not None:
                    op.acked &= ~(1 << position)
                    op.quorum_reached = op.acked.bit_count() >= self.metadata.ack_quorum
                    self._send(op, position, ensemble)

    # -- failure and close ----------------------------------------------------------------------

    def _fail(self, error: MiniPulsarError) -> None:
        if self.state is not HandleState.OPEN:
            return
        log.warning("ledger %d: %s; failing %d pending adds", self.ledger_id, error, self.pending_adds)
        self.state = HandleState.FAILED
        self.failure = error
        self._fail_pending(error)

    def _fail_pending(self, error: MiniPulsarError) -> None:
        ops = list(self._pending) + list(self._unsent)
        self._pending.clear()
        self._unsent.clear()
        self._budget.forget(self._send_unsent)
        self._ctx.client_add_budget.forget(self._send_unsent)
        now = time.monotonic()
        for op in ops:
            _pending_adds[0] -= 1
            _ADD_FAILED.observe((now - op.started_s) * 1000)
            callback, op.callback = op.callback, None
            if callback is not None:  # on the next iteration, as a future's callbacks would run
                self._loop.call_soon(callback, None, error)
            self._release_if_done(op)

    async def close(self) -> None:
        """Write the final last entry id (the LAC) into the ledger metadata.

        Adds not yet complete never become part of the ledger: they fail.
        """
        if not self.writable or self.metadata.is_closed:
            return
        if self._ensemble_change is not None:
            await asyncio.shield(self._ensemble_change)
        was_open = self.state is HandleState.OPEN
        if was_open:
            self.state = HandleState.CLOSED
            self._fail_pending(PersistenceError(f"ledger {self.ledger_id} closed"))
        if self.metadata.state is not LedgerState.OPEN:
            return
        closed = self.metadata.closed(self.last_add_confirmed, self.length)
        path = ledger_path(self.ledger_id)
        stat = await put_resolving(self._ctx.store, path, closed.to_bytes(), self.metadata.version)
        self.metadata = replace(closed, version=stat.version)

    # -- reading --------------------------------------------------------------------------------

    async def read(self, first_entry_id: int, last_entry_id: int) -> list[tuple[int, bytes]]:
        """Entries ``first..last`` inclusive, all of them, in order.

        Raises:
            NoSuchEntryError: asked beyond the last readable entry (the LAC of an open ledger).
            PersistenceError: no replica could serve an entry.
        """
        if first_entry_id > last_entry_id:
            return []
        if last_entry_id > self.last_entry_id:
            raise NoSuchEntryError(
                f"ledger {self.ledger_id} has entries up to {self.last_entry_id}, asked for {last_entry_id}"
            )
        try:
            return await self._reader.read(self.metadata, first_entry_id, last_entry_id)
        except PersistenceError:
            if not await self._refresh_ensembles():
                raise
        return await self._reader.read(self.metadata, first_entry_id, last_entry_id)

    async def _refresh_ensembles(self) -> bool:
        """After a read no replica could serve: take the stored ensembles if they changed
        (AutoRecovery moved a fragment to another bookie). Not while this handle writes: the
        writer's metadata is its own. Returns whether the ensembles changed."""
        if self.state is HandleState.OPEN:
            return False
        result = await self._ctx.store.get(ledger_path(self.ledger_id))
        if result is None:
            return False
        stored = LedgerMetadata.from_bytes(self.ledger_id, result.value, result.version)
        if stored.ensembles == self.metadata.ensembles:
            return False
        log.info("ledger %d: ensembles changed in the metadata; reading from %s", self.ledger_id, stored.ensembles)
        self.metadata = replace(self.metadata, ensembles=stored.ensembles, version=stored.version)
        return True
