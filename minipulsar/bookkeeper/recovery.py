"""Ledger recovery: close a ledger whose writer may still be alive, without losing an entry
it acknowledged (BookKeeper's open-with-recovery).

1. Mark the metadata IN_RECOVERY (CAS): the old writer's next ensemble change fails.
2. Fence the ledger on every bookie of the last ensemble and read their LACs. We go on as soon
   as, in every write-quorum window of the ensemble, fewer than ``Qa`` bookies are unheard of —
   then no entry can have been acknowledged without one of its replicas answering us — without
   waiting for a hung bookie's timeout.
3. From max(LAC)+1, read each entry from its write set. Found anywhere: re-write it to the
   write set with the recovery flag (allowed on fenced ledgers), done once ``Qa`` acknowledge.
   Declared missing as soon as ``Qw - Qa + 1`` replicas say NoSuchEntry/NoSuchLedger (no quorum
   can have acknowledged it: BookKeeper issue 1067). Any other failure (timeout, I/O error,
   a corrupt entry log — which bookies report as an error, never as NoSuchEntry, BookKeeper
   issue 2908) stops recovery with an error rather than truncating the ledger.
4. Close the metadata (CAS) with the last recovered entry and the ledger length its header
   holds; if someone else closed it first, adopt theirs.

Entries are verified against their digest as every reader does; a replica whose copy does not
match counts as failed for that entry (``READ_ENTRY_DM``), never as having it nor as lacking
it. The re-adds send the stored (wrapped) bytes unchanged. Fencing reads and re-adds carry the
ledger's master key.

Invariants:

- no entry a writer had acknowledged (on ``Qa`` bookies) is lost by recovery;
- recovery never truncates the ledger on an error it cannot classify: it fails instead.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any

from minipulsar.bookkeeper.bookie_client import BookieClient
from minipulsar.bookkeeper.digest import DigestManager, DigestMismatchError
from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata, LedgerState, ledger_path
from minipulsar.bookkeeper.metrics import LEDGER_RECOVER, READ_ENTRY_DM
from minipulsar.errors import (
    BadVersionError,
    NoSuchEntryError,
    NoSuchLedgerError,
    PersistenceError,
)
from minipulsar.metadata.store import MetadataStore
from minipulsar.protocol.commands import ReadEntryResponse, ReadLacResponse

log = logging.getLogger(__name__)

_ABSENT = (NoSuchEntryError, NoSuchLedgerError)


async def _answers(
    futures: Iterable[Awaitable[Any]], enough: Callable[[list[tuple[int, Any]]], bool]
) -> list[tuple[int, Any]]:
    """(index, result or exception) pairs in arrival order, until ``enough(answers)`` or all are in.

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
    finally:
        for future in pending:
            future.add_done_callback(lambda f: f.cancelled() or f.exception())
    return answers


async def recover_ledger(metadata: LedgerMetadata, bookies: BookieClient, store: MetadataStore) -> LedgerMetadata:
    """Fence, recover the tail and close ``metadata``'s ledger; returns the closed metadata.

    Raises:
        PersistenceError: not enough bookies answered to recover safely (retry later).
        BadVersionError: someone else changed the metadata concurrently (re-read and retry).
    """
    if metadata.is_closed:
        return metadata
    started = time.monotonic()
    try:
        closed = await _recover(metadata, bookies, store)
    except BaseException:
        LEDGER_RECOVER.labels("false").observe((time.monotonic() - started) * 1000)
        raise
    LEDGER_RECOVER.labels("true").observe((time.monotonic() - started) * 1000)
    return closed


async def _recover(metadata: LedgerMetadata, bookies: BookieClient, store: MetadataStore) -> LedgerMetadata:
    if metadata.state is LedgerState.OPEN:
        in_recovery = replace(metadata, state=LedgerState.IN_RECOVERY)
        stat = await store.put(ledger_path(metadata.ledger_id), in_recovery.to_bytes(), metadata.version)
        metadata = replace(in_recovery, version=stat.version)
    lac = await read_last_add_confirmed(metadata, bookies, fence=True)
    last_entry_id, length = await _recover_tail(metadata, bookies, lac)
    closed = metadata.closed(last_entry_id, max(metadata.length, length))
    try:
        stat = await store.put(ledger_path(metadata.ledger_id), closed.to_bytes(), metadata.version)
    except BadVersionError:
        current = await store.get(ledger_path(metadata.ledger_id))
        if current is not None:
            adopted = LedgerMetadata.from_bytes(metadata.ledger_id, current.value, current.version)
            if adopted.is_closed:  # someone else recovered it first: theirs is as good as ours
                return adopted
        raise
    log.info("ledger %d recovered and closed at entry %d", metadata.ledger_id, last_entry_id)
    return replace(closed, version=stat.version)


async def read_last_add_confirmed(metadata: LedgerMetadata, bookies: BookieClient, *, fence: bool) -> int:
    """The highest LAC the bookies of the last ensemble report, once enough of them answered
    that no acknowledged entry can be missed (the coverage rule); with ``fence`` each of them
    also refuses further adds from the writer.

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
    )
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


async def _recover_tail(metadata: LedgerMetadata, bookies: BookieClient, lac: int) -> tuple[int, int]:
    """Re-replicate the entries after ``lac`` that reached any bookie; returns (last entry, bytes)."""
    entry_id, length = lac + 1, 0
    digest = metadata.digest_manager()
    while True:
        found = await _read_for_recovery(metadata, bookies, entry_id, digest)
        if found is None:
            return entry_id - 1, length
        data, length = found
        await _recovery_add(metadata, bookies, entry_id, data, digest.master_key)
        entry_id += 1


def _found(result: Any, entry_id: int) -> bool:
    return isinstance(result, ReadEntryResponse) and bool(result.entries) and result.entries[0][0] == entry_id


def _absent(result: Any) -> bool:
    return isinstance(result, _ABSENT) or (isinstance(result, ReadEntryResponse) and not result.entries)


async def _verified(request: asyncio.Future, digest: DigestManager, entry_id: int) -> Any:
    """The bookie's answer to a recovery read, or DigestMismatchError if its copy is corrupt."""
    result = await request
    if _found(result, entry_id):
        try:
            digest.verify_entry(entry_id, bytes(result.entries[0][1]))
        except DigestMismatchError:
            READ_ENTRY_DM.inc()
            raise
    return result


async def _read_for_recovery(
    metadata: LedgerMetadata, bookies: BookieClient, entry_id: int, digest: DigestManager
) -> tuple[bytes, int] | None:
    """The entry's stored (wrapped) bytes from any replica whose copy matches its digest, and
    the ledger length its header holds; None when it certainly was never acknowledged."""
    missing_after = metadata.write_quorum - metadata.ack_quorum + 1

    def decided(answers: list[tuple[int, Any]]) -> bool:
        return any(_found(r, entry_id) for _, r in answers) or sum(_absent(r) for _, r in answers) >= missing_after

    answers = await _answers(
        (
            _verified(bookies.read_entries(bookie, metadata.ledger_id, entry_id, 1), digest, entry_id)
            for bookie in metadata.write_set(entry_id)
        ),
        decided,
    )
    for _, result in answers:
        if _found(result, entry_id):
            data = bytes(result.entries[0][1])
            return data, digest.verify_entry(entry_id, data).length
    if sum(_absent(r) for _, r in answers) >= missing_after:
        return None
    errors = [str(r) for _, r in answers if isinstance(r, BaseException)]
    raise PersistenceError(f"ledger {metadata.ledger_id}: cannot tell whether entry {entry_id} exists: {errors}")


async def _recovery_add(
    metadata: LedgerMetadata, bookies: BookieClient, entry_id: int, data: bytes, master_key: bytes
) -> None:
    def quorum(answers: list[tuple[int, Any]]) -> bool:
        return sum(not isinstance(r, BaseException) for _, r in answers) >= metadata.ack_quorum

    answers = await _answers(
        (
            bookies.add_entry(
                bookie, metadata.ledger_id, entry_id, entry_id - 1, data, recovery=True, master_key=master_key
            )
            for bookie in metadata.write_set(entry_id)
        ),
        quorum,
    )
    if not quorum(answers):
        acked = sum(not isinstance(r, BaseException) for _, r in answers)
        raise PersistenceError(
            f"ledger {metadata.ledger_id}: recovery add of entry {entry_id} reached "
            f"{acked} bookies, needs {metadata.ack_quorum}"
        )


__all__ = ["read_last_add_confirmed", "recover_ledger"]
