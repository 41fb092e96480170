"""Which ledgers have fragments on which bookie (BookKeeper's ``BookieLedgerIndexer``): one
scan of every ledger's metadata under ``/ledgers``."""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field

from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata
from minipulsar.bookkeeper.replication.fragments import bookies_of
from minipulsar.ledger_paths import LEDGERS_ROOT, ledger_path, parse_ledger_node
from minipulsar.metadata.store import MetadataStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BookieLedgerIndex:
    ledgers: dict[int, LedgerMetadata] = field(default_factory=dict)
    by_bookie: dict[str, set[int]] = field(default_factory=dict)

    def ledgers_on(self, bookie: str) -> set[int]:
        return self.by_bookie.get(bookie, set())


async def read_all_ledgers(store: MetadataStore) -> dict[int, LedgerMetadata]:
    """Every ledger's metadata (ledgers deleted during the scan, and values that are not ledger
    metadata, are left out: an audit goes on over the others)."""
    ledgers = {}
    for name in await store.children(LEDGERS_ROOT):
        ledger_id = parse_ledger_node(name)
        if ledger_id is None:
            continue
        result = await store.get(ledger_path(ledger_id))
        if result is None:
            continue
        try:
            ledgers[ledger_id] = LedgerMetadata.from_bytes(ledger_id, result.value, result.version)
        except (ValueError, KeyError, TypeError) as error:
            log.warning("ledger %d: metadata unreadable, not audited: %r", ledger_id, error)
    return ledgers


def index_by_bookie(ledgers: dict[int, LedgerMetadata]) -> BookieLedgerIndex:
    by_bookie: dict[str, set[int]] = defaultdict(set)
    for ledger_id, metadata in ledgers.items():
        for bookie in bookies_of(metadata):
            by_bookie[bookie].add(ledger_id)
    return BookieLedgerIndex(ledgers, dict(by_bookie))


async def build_index(store: MetadataStore) -> BookieLedgerIndex:
    return index_by_bookie(await read_all_ledgers(store))
