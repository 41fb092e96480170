"""Checks for AutoRecovery tests: which ledgers a topic has, and whether every entry of them is
on its write set of live bookies, read from each bookie directly (READ_ENTRY on a raw socket)."""

from __future__ import annotations

import json
from collections.abc import Collection

from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata
from minipulsar.bookkeeper.replication.underreplication_manager import LedgerUnderreplicationManager
from minipulsar.ledger_paths import ledger_path
from minipulsar.metadata import MetadataStore
from minipulsar.protocol.commands import ReadEntry, ReadEntryResponse
from tests.support.raw_client import RawBookieClient


def managed_ledger_path(topic: str) -> str:
    """The managed ledger of ``persistent://public/default/<topic>``."""
    return f"/managed-ledgers/public/default/persistent/{topic}"


async def topic_ledgers(store: MetadataStore, topic: str) -> dict[int, LedgerMetadata]:
    """The ledgers of a topic's managed ledger that have metadata, by id."""
    info = await store.get(managed_ledger_path(topic))
    assert info is not None, f"no managed ledger for {topic}"
    ledgers = {}
    for item in json.loads(info.value)["ledgers"]:
        result = await store.get(ledger_path(item["ledgerId"]))
        if result is not None:
            ledgers[item["ledgerId"]] = LedgerMetadata.from_bytes(item["ledgerId"], result.value, result.version)
    return ledgers


async def bookie_has_entries(bookie: str, ledger_id: int, entry_ids: Collection[int]) -> bool:
    """Whether ``bookie`` answers READ_ENTRY for every one of ``entry_ids`` with that entry."""
    host, _, port = bookie.rpartition(":")
    try:
        client = await RawBookieClient.connected(host, int(port))
    except OSError:
        return False
    try:
        for entry_id in entry_ids:
            response = await client.request(
                ReadEntry(id=client.next_id(), ledger_id=ledger_id, first_entry_id=entry_id)
            )
            if not isinstance(response, ReadEntryResponse) or not response.entries:
                return False
            if int(response.entries[0][0]) != entry_id:
                return False
    finally:
        client.close()
    return True


async def fully_replicated(ledgers: dict[int, LedgerMetadata], live: Collection[str]) -> bool:
    """Every entry of every closed ledger is on each bookie of its write set, all of them live;
    open ledgers name no bookie that is not live."""
    for ledger_id, metadata in ledgers.items():
        named = {bookie for _, ensemble in metadata.ensembles for bookie in ensemble}
        if not metadata.is_closed:
            if not named <= set(live):
                return False
            continue
        wanted: dict[str, list[int]] = {}
        for entry_id in range(metadata.last_entry_id + 1):
            for bookie in metadata.write_set(entry_id):
                wanted.setdefault(bookie, []).append(entry_id)
        if not set(wanted) <= set(live):
            return False
        for bookie, entry_ids in wanted.items():
            if not await bookie_has_entries(bookie, ledger_id, entry_ids):
                return False
    return True


async def no_underreplicated_ledger(store: MetadataStore) -> bool:
    return not await LedgerUnderreplicationManager(store).list_underreplicated()
