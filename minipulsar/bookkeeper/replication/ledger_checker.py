"""Which fragments of a ledger have lost entries (BookKeeper's ``LedgerChecker``): every
fragment whose bookie does not answer with the fragment's first and last stored entries.

Only fragments whose extent is final are checked: every segment of a closed ledger, and every
segment but the last of an open one (the writer is still adding to it).

This also finds "a completed add whose slow replica later failed": the writer replaced the
replica for the later entries (an ensemble change), so the earlier segment ends with an entry
one replica never stored.
"""

from __future__ import annotations

import asyncio

from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata
from minipulsar.bookkeeper.replication.fragment_replicator import LedgerFragmentReplicator
from minipulsar.bookkeeper.replication.fragments import LedgerFragment, fragments_of

CHECK_PARALLELISM = 16


def checkable_last_entry(metadata: LedgerMetadata) -> int:
    """The last entry whose fragments are final: a closed ledger's last entry, else the entry
    before the last segment starts (-1: nothing to check yet)."""
    if metadata.is_closed:
        return metadata.last_entry_id
    return metadata.ensembles[-1][0] - 1


class LedgerChecker:
    def __init__(self, replicator: LedgerFragmentReplicator) -> None:
        self._replicator = replicator

    async def lost_fragments(self, metadata: LedgerMetadata) -> list[LedgerFragment]:
        fragments = fragments_of(metadata, checkable_last_entry(metadata))
        semaphore = asyncio.Semaphore(CHECK_PARALLELISM)

        async def check(fragment: LedgerFragment) -> bool:
            async with semaphore:
                return await self._replicator.holds(fragment)

        held = await asyncio.gather(*(check(f) for f in fragments))
        return [fragment for fragment, ok in zip(fragments, held) if not ok]
