"""Ledger recovery: close a ledger whose writer may still be alive, without losing an entry
it acknowledged (BookKeeper's open-with-recovery: LedgerRecoveryOp, ReadLastConfirmedOp and
the ensemble change during recovery).

1. Mark the metadata IN_RECOVERY (CAS): the old writer's next ensemble change fails.
2. Fence the ledger on every bookie of the last ensemble and read their LACs. We go on as soon
   as, in every write-quorum window of the ensemble, fewer than ``Qa`` bookies are unheard of —
   then no entry can have been acknowledged without one of its replicas answering us — without
   waiting for a hung bookie's timeout (stragglers get ``FENCE_STRAGGLER_GRACE_S`` more). A
   bookie that fails (refused, timeout, error) or stays silent is remembered as failed; so is
   one that cannot be reached for a recovery read (one answering a read with an error is alive:
   it stays) and one that fails a recovery add.
3. From max(LAC, first entry of the last segment - 1) + 1, read each entry (a window of them at
   a time) from its write set *in the metadata read at step 1*. Found anywhere: re-write it
   with the recovery flag (allowed on fenced ledgers) to its write set in the *recovery
   ensemble*, done once ``Qa`` acknowledge. Declared missing as soon as ``Qw - Qa + 1``
   replicas say NoSuchEntry/NoSuchLedger (no quorum can have acknowledged it: BookKeeper issue
   1067). Any other failure (timeout, I/O error, a corrupt entry log — which bookies report as
   an error, never as NoSuchEntry, BookKeeper issue 2908) stops recovery with an error rather
   than truncating the ledger.
4. Ensemble change during recovery: the recovery ensemble starts as the last ensemble; a bookie
   of it that failed (at step 2, 3 or in a recovery add) is replaced by the placement policy
   (never by a bookie that failed during this recovery: a dead bookie stays registered until its
   session expires), in a segment starting at the first recovered entry; a position no bookie
   can take keeps its failed bookie, sent nothing more (at ``Qw > Qa`` the others may suffice). Entries already
   recovered are re-written to the replacement before going on. Once the whole tail is on ``Qa``
   bookies of the recovery ensemble, the new segment is stored by CAS (the state stays
   IN_RECOVERY; a last segment starting at that entry is replaced, as BookKeeper does).
5. Close the metadata (CAS) with the last recovered entry and the ledger length its header
   holds.

Entries are verified against their digest as every reader does; a replica whose copy does not
match counts as failed for that entry (``READ_ENTRY_DM``), never as having it nor as lacking
it. The re-adds send the stored (wrapped) bytes unchanged. Fencing reads and re-adds carry the
ledger's master key.

Races: any CAS that loses (another recoverer, or the old writer's ensemble change before step 1)
re-reads the metadata: a CLOSED one is adopted (theirs is as good as ours: a close is only ever
written by one CAS, so nobody sees two different closes), otherwise recovery starts over from it.

Invariants:

- no entry a writer had acknowledged (on ``Qa`` bookies) is lost by recovery;
- a recovery segment becomes visible in the metadata only once every entry it covers is on
  ``Qa`` of its bookies — so a later recoverer that reads from it (after this one crashed)
  cannot take a replacement's NoSuchEntry for the absence of an acknowledged entry;
- recovery never truncates the ledger on an error it cannot classify: it fails instead.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from minipulsar.bookkeeper.bookie_client import BookieClient
from minipulsar.bookkeeper.context import ClientContext
from minipulsar.bookkeeper.digest import DigestManager, DigestMismatchError
from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata, LedgerState, ledger_path
from minipulsar.bookkeeper.metrics import LEDGER_RECOVER, NUM_ENSEMBLE_CHANGE, READ_ENTRY_DM
from minipulsar.errors import (
    BadVersionError,
    ConnectionClosedError,
    MiniPulsarError,
    NoSuchEntryError,
    NoSuchLedgerError,
    NotEnoughBookiesError,
    PersistenceError,
    RequestTimeoutError,
)
from minipulsar.protocol.commands import ReadEntryResponse, ReadLacResponse

log = logging.getLogger(__name__)

_ABSENT = (NoSuchEntryError, NoSuchLedgerError)
_UNREACHABLE = (ConnectionClosedError, RequestTimeoutError)

RECOVERY_READ_WINDOW = 16
"""Entries of the tail read (and then re-written) concurrently: a tail of in-flight adds is
recovered in a few round trips rather than two per entry."""

FENCE_STRAGGLER_GRACE_S = 1.0
"""How long the fence waits, once the coverage rule holds, for the bookies not heard from yet;
one still silent then counts as failed (replaced if the tail is re-written), so a hung bookie
costs this, not a request timeout on a recovery add."""

RECOVERY_ATTEMPTS_MAX = 10
"""Starts over after a lost CAS before giving up (PersistenceError: the caller retries later)."""


async def _answers(
    futures: Iterable[Awaitable[Any]], enough: Callable[[list[tuple[int, Any]]], bool], linger_s: float = 0.0
) -> list[tuple[int, Any]]:
    """(index, result or exception) pairs in arrival order, until ``enough(answers)`` or all are in;
    then up to ``linger_s`` more for the stragglers.

    Requests still running when it returns are left to finish (or time out) on their own.
    """
    pending = {asyncio.ensure_future(f): i for i, f in enumerate(futures)}
    answers: list[tuple[int, Any]] = []
    try:
        while pending and not enough(answers):
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                index = pending.pop(future)
                answers.append((index, future.exception() or future.result()))
        if pending and linger_s > 0:
            done, _ = await asyncio.wait(pending, timeout=linger_s)
            for future in done:
                index = pending.pop(future)
                answers.append((index, future.exception() or future.result()))
    finally:
        for future in pending:
            future.add_done_callback(lambda f: f.cancelled() or f.exception())
    return answers


async def recover_ledger(metadata: LedgerMetadata, ctx: ClientContext) -> LedgerMetadata:
    """Fence, recover the tail and close ``metadata``'s ledger; returns the closed metadata.

    Raises:
        PersistenceError: not enough bookies answered to recover safely (retry later).
        NotEnoughBookiesError: a failed bookie of the last ensemble has no replacement.
        NoSuchLedgerError: the ledger's metadata was deleted meanwhile.
    """
    if metadata.is_closed:
        return metadata
    started = time.monotonic()
    try:
        closed = await LedgerRecoveryOp(metadata, ctx).run()
    except BaseException:
        LEDGER_RECOVER.labels("false").observe((time.monotonic() - started) * 1000)
        raise
    LEDGER_RECOVER.labels("true").observe((time.monotonic() - started) * 1000)
    return closed


@dataclass
class _RecoveredTail:
    """The entries recovery re-writes, and where: the recovery ensemble and each entry's acks."""

    first_entry_id: int
    ensemble: list[str]
    payloads: list[bytes] = field(default_factory=list)
    """The entries as stored (wrapped: digest header + payload), re-sent unchanged."""
    lengths: list[int] = field(default_factory=list)
    """Per entry, the ledger length its digest header holds."""
    acked: list[set[int]] = field(default_factory=list)
    """Per entry, the ensemble positions whose bookie acknowledged its recovery add."""
    replaced: bool = False

    @property
    def last_entry_id(self) -> int:
        return self.first_entry_id + len(self.payloads) - 1


class LedgerRecoveryOp:
    """One recovery of one ledger (see the module docstring); :meth:`run` once."""

    def __init__(self, metadata: LedgerMetadata, ctx: ClientContext) -> None:
        self.metadata = metadata
        self._ctx = ctx
        self._bookies: BookieClient = ctx.bookies
        self._digest: DigestManager = metadata.digest_manager()
        self.failed: set[str] = set()
        """Bookies that failed a request of this recovery: replaced, never chosen as replacements."""
        self.ensemble_changes = 0
        self._no_replacement: NotEnoughBookiesError | None = None

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id

    async def run(self) -> LedgerMetadata:
        for _ in range(RECOVERY_ATTEMPTS_MAX):
            if self.metadata.is_closed:
                return self.metadata
            try:
                return await self._attempt()
            except BadVersionError:
                self.metadata = await self._reread()
                log.info(
                    "ledger %d: metadata changed during recovery (now %s); %s",
                    self.ledger_id,
                    self.metadata.state.value,
                    "adopting the close" if self.metadata.is_closed else "starting over",
                )
        raise PersistenceError(f"ledger {self.ledger_id}: metadata kept changing during recovery")

    async def _reread(self) -> LedgerMetadata:
        current = await self._ctx.store.get(ledger_path(self.ledger_id))
        if current is None:
            raise NoSuchLedgerError(f"ledger {self.ledger_id} has no metadata (deleted during recovery)")
        return LedgerMetadata.from_bytes(self.ledger_id, current.value, current.version)

    async def _attempt(self) -> LedgerMetadata:
        """One pass; raises BadVersionError when a CAS lost (``run`` re-reads and decides)."""
        metadata = await self._mark_in_recovery(self.metadata)
        lac = await read_last_add_confirmed(metadata, self._bookies, fence=True, failed=self.failed)
        tail = _RecoveredTail(lac + 1, list(metadata.last_ensemble))
        await self._recover_tail(metadata, tail)
        if tail.replaced and tail.payloads:
            metadata = await self._store_ensemble(metadata, tail)
        return await self._close(metadata, tail)

    async def _mark_in_recovery(self, metadata: LedgerMetadata) -> LedgerMetadata:
        if metadata.state is not LedgerState.OPEN:
            return metadata
        in_recovery = replace(metadata, state=LedgerState.IN_RECOVERY)
        stat = await self._ctx.store.put(ledger_path(self.ledger_id), in_recovery.to_bytes(), metadata.version)
        self.metadata = replace(in_recovery, version=stat.version)
        return self.metadata

    # -- the tail -------------------------------------------------------------------------------

    async def _recover_tail(self, metadata: LedgerMetadata, tail: _RecoveredTail) -> None:
        """Read the entries after the LAC from ``metadata``'s write sets, ``RECOVERY_READ_WINDOW``
        at a time; re-write them to the recovery ensemble; stop at the first one that certainly
        was never acknowledged (an error reading a later one does not matter)."""
        entry_id = tail.first_entry_id
        while True:
            window = range(entry_id, entry_id + RECOVERY_READ_WINDOW)
            reads = await asyncio.gather(
                *(self._read_for_recovery(metadata, e) for e in window), return_exceptions=True
            )
            for found in reads:
                if isinstance(found, BaseException):
                    raise found
                if found is None:
                    break
                data, length = found
                tail.payloads.append(data)
                tail.lengths.append(length)
                tail.acked.append(set())
            await self._replicate(metadata, tail)
            if len(tail.payloads) < entry_id + RECOVERY_READ_WINDOW - tail.first_entry_id:
                return
            entry_id += RECOVERY_READ_WINDOW

    async def _read_for_recovery(self, metadata: LedgerMetadata, entry_id: int) -> tuple[bytes, int] | None:
        """The entry's stored (wrapped) bytes from any replica whose copy matches its digest, and
        the ledger length its header holds; None when it certainly was never acknowledged."""
        missing_after = metadata.write_quorum - metadata.ack_quorum + 1
        write_set = metadata.write_set(entry_id)

        def decided(answers: list[tuple[int, Any]]) -> bool:
            return any(_found(r, entry_id) for _, r in answers) or sum(_absent(r) for _, r in answers) >= missing_after

        answers = await _answers(
            (
                _verified(self._bookies.read_entries(bookie, self.ledger_id, entry_id, 1), self._digest, entry_id)
                for bookie in write_set
            ),
            decided,
        )
        for index, result in answers:
            if _found(result, entry_id):
                data = bytes(result.entries[0][1])
                return data, self._digest.verify_entry(entry_id, data).length
            if isinstance(result, _UNREACHABLE):  # an error it answered (a bad entry log) leaves it in place
                self._bookie_failed(write_set[index], f"recovery read of entry {entry_id}", result)
        if sum(_absent(r) for _, r in answers) >= missing_after:
            return None
        errors = [str(r) for _, r in answers if isinstance(r, BaseException)]
        raise PersistenceError(f"ledger {self.ledger_id}: cannot tell whether entry {entry_id} exists: {errors}")

    async def _replicate(self, metadata: LedgerMetadata, tail: _RecoveredTail) -> None:
        """Bring every recovered entry to ``Qa`` acknowledgements in the recovery ensemble,
        replacing its failed bookies first (each pass replaces at least one more failed bookie,
        or finishes, or raises)."""
        while True:
            await self._replace_failed(metadata, tail)
            short = [i for i, acked in enumerate(tail.acked) if len(acked) < metadata.ack_quorum]
            if not short:
                return
            failed_before = len(self.failed)
            await asyncio.gather(*(self._recovery_add(metadata, tail, i) for i in short))
            if all(len(tail.acked[i]) >= metadata.ack_quorum for i in short):
                return
            if len(self.failed) == failed_before:
                if self._no_replacement is not None:
                    raise self._no_replacement
                entry_id = tail.first_entry_id + short[0]
                raise PersistenceError(
                    f"ledger {self.ledger_id}: recovery add of entry {entry_id} reached "
                    f"{len(tail.acked[short[0]])} bookies, needs {metadata.ack_quorum}"
                )

    async def _recovery_add(self, metadata: LedgerMetadata, tail: _RecoveredTail, index: int) -> None:
        """Send entry ``index`` of the tail to the positions of its write set that lack it."""
        entry_id = tail.first_entry_id + index
        size = metadata.ensemble_size
        positions = [(entry_id + k) % size for k in range(metadata.write_quorum)]
        positions = [p for p in positions if p not in tail.acked[index] and tail.ensemble[p] not in self.failed]
        bookies = [tail.ensemble[p] for p in positions]
        payload = tail.payloads[index]

        noted = 0

        def note(answers: list[tuple[int, Any]]) -> bool:
            """Count the answers not seen yet; enough once ``Qa`` positions acknowledged."""
            nonlocal noted
            for i, result in answers[noted:]:
                if isinstance(result, BaseException):
                    self._bookie_failed(bookies[i], f"recovery add of entry {entry_id}", result)
                else:
                    tail.acked[index].add(positions[i])
            noted = len(answers)
            return len(tail.acked[index]) >= metadata.ack_quorum

        answers = await _answers(
            (
                self._bookies.add_entry(
                    bookie,
                    self.ledger_id,
                    entry_id,
                    entry_id - 1,
                    payload,
                    recovery=True,
                    master_key=self._digest.master_key,
                )
                for bookie in bookies
            ),
            note,
        )
        note(answers)

    async def _replace_failed(self, metadata: LedgerMetadata, tail: _RecoveredTail) -> None:
        """Put a replacement at every position of the recovery ensemble whose bookie failed; the
        entries recovered so far lose those positions' acknowledgements (re-sent by the caller).
        A position nobody can take keeps its failed bookie, which gets no more adds: the tail
        may still reach ``Qa`` on the others (else the NotEnoughBookiesError is raised)."""
        for position, bookie in enumerate(tail.ensemble):
            if bookie not in self.failed:
                continue
            exclude = frozenset(tail.ensemble) | frozenset(self.failed)
            try:
                replacement = await self._ctx.replace_bookie(
                    tuple(tail.ensemble), position, metadata.write_quorum, metadata.ack_quorum, exclude
                )
            except NotEnoughBookiesError as error:  # the others may still make Qa
                self._no_replacement = error
                continue
            log.info(
                "ledger %d: recovery replaces bookie %s by %s from entry %d",
                self.ledger_id,
                bookie,
                replacement,
                tail.first_entry_id,
            )
            tail.ensemble[position] = replacement
            tail.replaced = True
            for acked in tail.acked:
                acked.discard(position)

    def _bookie_failed(self, bookie: str, what: str, error: BaseException) -> None:
        if bookie in self.failed:
            return
        log.warning("ledger %d: bookie %s failed the %s: %s", self.ledger_id, bookie, what, error)
        self.failed.add(bookie)
        if isinstance(error, MiniPulsarError):
            self._ctx.record_error(bookie, error)

    # -- storing --------------------------------------------------------------------------------

    async def _store_ensemble(self, metadata: LedgerMetadata, tail: _RecoveredTail) -> LedgerMetadata:
        """The recovery ensemble as the last segment, from the first recovered entry (CAS; the
        state stays IN_RECOVERY)."""
        start, ensemble = tail.first_entry_id, tuple(tail.ensemble)
        segments = list(metadata.ensembles)
        if segments[-1][0] == start:
            segments[-1] = (start, ensemble)
        else:
            segments.append((start, ensemble))
        changed = replace(metadata, ensembles=tuple(segments))
        stat = await self._ctx.store.put(ledger_path(self.ledger_id), changed.to_bytes(), metadata.version)
        self.metadata = replace(changed, version=stat.version)
        self.ensemble_changes += 1
        NUM_ENSEMBLE_CHANGE.inc()
        log.info(
            "ledger %d: ensemble change during recovery at entry %d: %s -> %s",
            self.ledger_id,
            start,
            list(metadata.last_ensemble),
            list(ensemble),
        )
        return self.metadata

    async def _close(self, metadata: LedgerMetadata, tail: _RecoveredTail) -> LedgerMetadata:
        length = tail.lengths[-1] if tail.lengths else metadata.length
        closed = metadata.closed(tail.last_entry_id, max(metadata.length, length))
        stat = await self._ctx.store.put(ledger_path(self.ledger_id), closed.to_bytes(), metadata.version)
        log.info("ledger %d recovered and closed at entry %d", self.ledger_id, tail.last_entry_id)
        self.metadata = replace(closed, version=stat.version)
        return self.metadata


async def read_last_add_confirmed(
    metadata: LedgerMetadata, bookies: BookieClient, *, fence: bool, failed: set[str] | None = None
) -> int:
    """The highest LAC the bookies of the last ensemble report — at least the first entry of the
    last segment minus one (earlier segments are immutable: BookKeeper issue 2615) — once enough
    of them answered that no acknowledged entry can be missed (the coverage rule); with ``fence``
    each of them also refuses further adds from the writer. With ``failed``, the bookies not
    heard from get ``FENCE_STRAGGLER_GRACE_S`` more to answer; those that failed or stayed silent
    go to ``failed``.

    Raises:
        PersistenceError: too few bookies answered for the coverage rule.
    """
    ensemble = metadata.last_ensemble

    def covered(answers: list[tuple[int, Any]]) -> bool:
        heard = {i for i, result in answers if isinstance(result, (ReadLacResponse, *_ABSENT))}
        return bool(heard) and _covers_every_write_quorum(metadata, heard)

    master_key = metadata.digest_manager().master_key
    answers = await _answers(
        (bookies.read_lac(bookie, metadata.ledger_id, fence=fence, master_key=master_key) for bookie in ensemble),
        covered,
        linger_s=FENCE_STRAGGLER_GRACE_S if failed is not None else 0.0,
    )
    silent = set(range(len(ensemble))) - {index for index, _ in answers}
    if failed is not None and silent and covered(answers):
        log.warning(
            "ledger %d: bookies %s did not answer the %s within %.1f s: counted as failed",
            metadata.ledger_id,
            sorted(ensemble[i] for i in silent),
            "fence" if fence else "LAC read",
            FENCE_STRAGGLER_GRACE_S,
        )
        failed.update(ensemble[i] for i in silent)
    lac = metadata.ensembles[-1][0] - 1
    for index, result in answers:
        if isinstance(result, ReadLacResponse):
            lac = max(lac, result.lac)
        elif not isinstance(result, _ABSENT):
            log.warning(
                "ledger %d: %s bookie %s failed: %s",
                metadata.ledger_id,
                "fencing" if fence else "reading the LAC of",
                ensemble[index],
                result,
            )
            if failed is not None:
                failed.add(ensemble[index])
    if not covered(answers):
        heard = sum(1 for _, r in answers if isinstance(r, (ReadLacResponse, *_ABSENT)))
        raise PersistenceError(
            f"ledger {metadata.ledger_id}: too few bookies answered "
            f"({heard} of {len(ensemble)}); cannot {'recover' if fence else 'read'} safely yet"
        )
    return lac


def _covers_every_write_quorum(metadata: LedgerMetadata, heard: set[int]) -> bool:
    size = metadata.ensemble_size
    for start in range(size):
        window = {(start + k) % size for k in range(metadata.write_quorum)}
        if len(window - heard) >= metadata.ack_quorum:
            return False
    return True


async def _verified(request: Awaitable[Any], digest: DigestManager, entry_id: int) -> Any:
    """The bookie's answer to a recovery read, or DigestMismatchError if its copy is corrupt."""
    result = await request
    if _found(result, entry_id):
        try:
            digest.verify_entry(entry_id, bytes(result.entries[0][1]))
        except DigestMismatchError:
            READ_ENTRY_DM.inc()
            raise
    return result


def _found(result: Any, entry_id: int) -> bool:
    return isinstance(result, ReadEntryResponse) and bool(result.entries) and result.entries[0][0] == entry_id


def _absent(result: Any) -> bool:
    return isinstance(result, _ABSENT) or (isinstance(result, ReadEntryResponse) and not result.entries)


__all__ = ["LedgerRecoveryOp", "read_last_add_confirmed", "recover_ledger"]
