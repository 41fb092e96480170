"""Copying a LedgerFragment to another bookie (BookKeeper's ``LedgerFragmentReplicator``), and
probing whether a bookie still holds a fragment: the only module of AutoRecovery that talks to
bookies (one place for the requests' arguments).

Entries are copied byte for byte (a digest in the entry stays valid) once their digest was
verified — a replica whose copy does not match is skipped for the next one, as every reader
does — and written with the ledger's master key, in batches of
``rereplicationEntryBatchSize``: a batch is read from surviving replicas (another one after an
error), then written to the target with ``recovery=True`` (accepted on fenced ledgers) and all
of its writes awaited before the next batch is read.

Invariant: :meth:`replicate` returns only when every entry of the fragment is durable on the
target; otherwise it raises and the metadata is not to be changed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence

from minipulsar.bookkeeper.bookie_client import BookieClient
from minipulsar.bookkeeper.digest import DigestManager, DigestMismatchError
from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata
from minipulsar.bookkeeper.metrics import READ_ENTRY_DM
from minipulsar.bookkeeper.replication import metrics
from minipulsar.bookkeeper.replication.fragments import LedgerFragment
from minipulsar.errors import MiniPulsarError, PersistenceError

log = logging.getLogger(__name__)


class LedgerFragmentReplicator:
    def __init__(self, bookies: BookieClient, batch_size: int) -> None:
        if batch_size < 1:
            raise ValueError(f"rereplicationEntryBatchSize must be >= 1, got {batch_size}")
        self._bookies = bookies
        self._batch_size = batch_size

    async def holds(self, fragment: LedgerFragment) -> bool:
        """Whether the fragment's bookie answers with its first and last entries (BookKeeper's
        ``LedgerChecker`` reads those two)."""
        probes = {fragment.first_stored, fragment.last_stored} - {None}
        for entry_id in sorted(e for e in probes if e is not None):
            try:
                await self._read(fragment.bookie, fragment.ledger_id, entry_id, 1)
            except MiniPulsarError:
                return False
        return True

    async def replicate(
        self, metadata: LedgerMetadata, fragment: LedgerFragment, target: str, lost: Collection[str]
    ) -> None:
        """Copy every entry of ``fragment`` to ``target``, reading from the segment's other
        replicas that are not in ``lost``.

        Raises:
            PersistenceError: an entry no surviving replica could serve, or a write the target refused.
        """
        entry_ids = list(fragment.entry_ids())
        ensemble = metadata.ensembles[fragment.segment_index][1]
        digest = metadata.digest_manager()
        for start in range(0, len(entry_ids), self._batch_size):
            batch = entry_ids[start : start + self._batch_size]
            entries = [
                (e, await self._read_from_replicas(metadata, fragment, ensemble, e, lost, digest)) for e in batch
            ]
            await self._write(target, fragment, entries, digest.master_key)

    async def _read_from_replicas(
        self,
        metadata: LedgerMetadata,
        fragment: LedgerFragment,
        ensemble: Sequence[str],
        entry_id: int,
        lost: Collection[str],
        digest: DigestManager,
    ) -> bytes:
        """The entry's stored bytes from the first surviving replica whose copy matches its digest."""
        size = len(ensemble)
        write_set = [ensemble[(entry_id + k) % size] for k in range(metadata.write_quorum)]
        sources = [b for b in write_set if b != fragment.bookie and b not in lost]
        errors = []
        for source in sources:
            try:
                payload = await self._read(source, fragment.ledger_id, entry_id, 1)
            except MiniPulsarError as error:
                errors.append(f"{source}: {error}")
                continue
            try:
                digest.verify(entry_id, payload)
            except DigestMismatchError as error:
                READ_ENTRY_DM.inc()
                errors.append(f"{source}: {error}")
                continue
            metrics.NUM_ENTRIES_READ.inc()
            metrics.NUM_BYTES_READ.inc(len(payload))
            return payload
        metrics.NUM_ENTRIES_UNABLE_TO_READ_FOR_REPLICATION.inc()
        raise PersistenceError(
            f"ledger {fragment.ledger_id} entry {entry_id}: no surviving replica of {write_set} could serve it "
            f"({'; '.join(errors) or 'no replica left'})"
        )

    async def _read(self, bookie: str, ledger_id: int, entry_id: int, count: int) -> bytes:
        response = await self._bookies.read_entries(bookie, ledger_id, entry_id, count)
        entries = response.entries
        if not entries or int(entries[0][0]) != entry_id:
            raise PersistenceError(f"{bookie} answered without entry {entry_id} of ledger {ledger_id}")
        return bytes(entries[0][1])

    async def _write(
        self, target: str, fragment: LedgerFragment, entries: list[tuple[int, bytes]], master_key: bytes
    ) -> None:
        """Write a batch to ``target`` and wait for all of it (recovery adds: fenced ledgers take them)."""
        lac = fragment.last_entry_id  # every entry of a segment being copied is confirmed
        writes = [
            self._bookies.add_entry(
                target, fragment.ledger_id, entry_id, lac, payload, recovery=True, master_key=master_key
            )
            for entry_id, payload in entries
        ]
        results = await asyncio.gather(*writes, return_exceptions=True)
        for (entry_id, payload), result in zip(entries, results):
            if isinstance(result, MiniPulsarError):
                raise PersistenceError(
                    f"ledger {fragment.ledger_id} entry {entry_id}: {target} refused the copy: {result}"
                ) from result
            if isinstance(result, BaseException):
                raise result
            metrics.NUM_ENTRIES_WRITTEN.inc()
            metrics.NUM_BYTES_WRITTEN.inc(len(payload))
