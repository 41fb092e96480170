"""Ledger recovery: close a ledger whose writer may still be alive, without losing an entry
it acknowledged (BookKeeper's open-with-recovery, see reference §7.4).

1. Mark the metadata IN_RECOVERY (CAS).
2. Fence the ledger on every bookie of the last ensemble and read their LACs. We may proceed
   once, in every write-quorum window of the ensemble, fewer than ``Qa`` bookies are unheard
   of: then no entry can have been acknowledged without one of its replicas answering us.
3. From max(LAC)+1, read each entry from its write set. Found anywhere: re-write it to the
   write set with the recovery flag (allowed on fenced ledgers). Declared missing only when at
   least ``Qw - Qa + 1`` replicas say NoSuchEntry/NoSuchLedger — any other failure (timeout,
   I/O error) stops recovery with an error rather than truncating the ledger.
4. Close the metadata (CAS) with the last recovered entry.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from minipulsar.errors import (
    BadVersionError,
    NoSuchEntryError,
    NoSuchLedgerError,
    PersistenceError,
)
from minipulsar.metadata.store import MetadataStore
from minipulsar.protocol.commands import ReadEntryResponse, ReadLacResponse

from broker.bookkeeper.bookie_client import BookieClient
from broker.bookkeeper.ledger_metadata import LedgerMetadata, LedgerState, ledger_path

log = logging.getLogger(__name__)

_ABSENT = (NoSuchEntryError, NoSuchLedgerError)


async def recover_ledger(metadata: LedgerMetadata, bookies: BookieClient, store: MetadataStore) -> LedgerMetadata:
    """Fence, recover the tail and close ``metadata``'s ledger; returns the closed metadata.

    Raises:
        PersistenceError: not enough bookies answered to recover safely (retry later).
        BadVersionError: someone else changed the metadata concurrently (re-read and retry).
    """
    if metadata.is_closed:
        return metadata
    if metadata.state is LedgerState.OPEN:
        in_recovery = replace(metadata, state=LedgerState.IN_RECOVERY)
        stat = await store.put(ledger_path(metadata.ledger_id), in_recovery.to_bytes(), metadata.version)
        metadata = replace(in_recovery, version=stat.version)
    lac = await _fence_and_read_lac(metadata, bookies)
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


async def _fence_and_read_lac(metadata: LedgerMetadata, bookies: BookieClient) -> int:
    ensemble = metadata.last_ensemble
    results = await asyncio.gather(
        *(bookies.read_lac(bookie, metadata.ledger_id, fence=True) for bookie in ensemble),
        return_exceptions=True,
    )
    heard = set()
    lac = metadata.ensembles[-1][0] - 1
    for index, result in enumerate(results):
        if isinstance(result, ReadLacResponse):
            heard.add(index)
            lac = max(lac, result.lac)
        elif isinstance(result, _ABSENT):
            heard.add(index)
        else:
            log.warning("ledger %d: fencing bookie %s failed: %s", metadata.ledger_id, ensemble[index], result)
    if not heard or not _covers_every_write_quorum(metadata, heard):
        raise PersistenceError(f"ledger {metadata.ledger_id}: too few bookies answered the fence "
                               f"({len(heard)} of {len(ensemble)}); cannot recover safely yet")
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
    while True:
        payload = await _read_for_recovery(metadata, bookies, entry_id)
        if payload is None:
            return entry_id - 1, length
        await _recovery_add(metadata, bookies, entry_id, payload)
        length += len(payload)
        entry_id += 1


async def _read_for_recovery(metadata: LedgerMetadata, bookies: BookieClient, entry_id: int) -> bytes | None:
    write_set = metadata.write_set(entry_id)
    results = await asyncio.gather(
        *(bookies.read_entries(bookie, metadata.ledger_id, entry_id, 1) for bookie in write_set),
        return_exceptions=True,
    )
    absent = 0
    for result in results:
        if isinstance(result, ReadEntryResponse) and result.entries and result.entries[0][0] == entry_id:
            return bytes(result.entries[0][1])
        if isinstance(result, _ABSENT) or (isinstance(result, ReadEntryResponse) and not result.entries):
            absent += 1
    if absent >= metadata.write_quorum - metadata.ack_quorum + 1:
        return None
    errors = [str(r) for r in results if isinstance(r, BaseException)]
    raise PersistenceError(f"ledger {metadata.ledger_id}: cannot tell whether entry {entry_id} exists: {errors}")


async def _recovery_add(metadata: LedgerMetadata, bookies: BookieClient, entry_id: int, payload: bytes) -> None:
    results = await asyncio.gather(
        *(bookies.add_entry(bookie, metadata.ledger_id, entry_id, entry_id - 1, payload, recovery=True)
          for bookie in metadata.write_set(entry_id)),
        return_exceptions=True,
    )
    acked = sum(1 for r in results if not isinstance(r, BaseException))
    if acked < metadata.ack_quorum:
        raise PersistenceError(f"ledger {metadata.ledger_id}: recovery add of entry {entry_id} reached "
                               f"{acked} bookies, needs {metadata.ack_quorum}")


__all__ = ["recover_ledger"]
