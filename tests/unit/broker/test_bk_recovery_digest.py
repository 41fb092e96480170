"""Ledger recovery reads through the digest: a corrupt copy is never recovered, never taken
for a missing entry, and the re-adds carry the stored bytes and the master key.

The bookies are in-memory fakes (tests/support/fake_bookies.py), no sockets.
"""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from minipulsar.bookkeeper import metrics
from minipulsar.bookkeeper.digest import DigestManager
from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata, ledger_path
from minipulsar.bookkeeper.recovery import recover_ledger
from minipulsar.errors import PersistenceError
from minipulsar.metadata.memory import MemoryMetadataStore
from minipulsar.metadata.store import NOT_EXISTS
from tests.support.fake_bookies import FakeBookies, fake_context

BOOKIES = ("a:1", "b:1", "c:1")
PASSWORD = b"pw"


def wrapped(entry_id: int) -> bytes:
    payload = b"entry %d" % entry_id
    length = sum(len(b"entry %d" % e) for e in range(entry_id + 1))
    return DigestManager(1, password=PASSWORD).package(entry_id, entry_id - 1, length, payload)


def corrupt(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 1])


async def open_ledger_metadata(store: MemoryMetadataStore) -> LedgerMetadata:
    metadata = LedgerMetadata(
        ledger_id=1, ensemble_size=3, write_quorum=3, ack_quorum=2, ensembles=((0, BOOKIES),), password=PASSWORD
    )
    stat = await store.put(ledger_path(1), metadata.to_bytes(), NOT_EXISTS)
    return LedgerMetadata.from_bytes(1, metadata.to_bytes(), stat.version)


def mismatches() -> float:
    return REGISTRY.get_sample_value(metrics.PREFIX + "READ_ENTRY_DM") or 0.0


def stored(entry_ids: range) -> dict[int, bytes]:
    return {e: wrapped(e) for e in entry_ids}


def fake_bookies(entries: dict[str, dict[int, bytes]], lac: int) -> FakeBookies:
    bookies = FakeBookies(BOOKIES)
    for bookie, held in entries.items():
        bookies.put(bookie, 1, held, lac=lac)
    return bookies


async def test_a_corrupt_copy_is_skipped_and_the_good_one_recovered_with_its_bytes_and_length() -> None:
    """Goal: entry 4 (after LAC 3) is corrupt on a, good on b, absent on c: recovery takes b's
    bytes, re-adds exactly them with the master key, and closes at 4 with entry 4's length."""
    store = MemoryMetadataStore()
    metadata = await open_ledger_metadata(store)
    bookies = fake_bookies(
        {"a:1": {**stored(range(4)), 4: corrupt(wrapped(4))}, "b:1": stored(range(5)), "c:1": stored(range(4))}, lac=3
    )
    before = mismatches()
    closed = await recover_ledger(metadata, fake_context(bookies, store))
    assert (closed.last_entry_id, closed.length) == (4, sum(len(b"entry %d" % e) for e in range(5)))
    key = DigestManager(1, password=PASSWORD).master_key
    assert {(bookie, e, data, recovery, k) for bookie, e, data, recovery, k in bookies.adds} == {
        (bookie, 4, wrapped(4), True, key) for bookie in BOOKIES
    }
    assert sorted(bookies.fences) == [(bookie, key) for bookie in BOOKIES]
    assert mismatches() - before == 1


async def test_a_corrupt_copy_is_not_recovered_when_the_others_lack_the_entry() -> None:
    """Goal: entry 4 only on a, corrupt: Qw - Qa + 1 = 2 bookies lack it, so it was never
    acknowledged; the corrupt bytes are not recovered and the ledger closes at 3."""
    store = MemoryMetadataStore()
    metadata = await open_ledger_metadata(store)
    bookies = fake_bookies(
        {"a:1": {**stored(range(4)), 4: corrupt(wrapped(4))}, "b:1": stored(range(4)), "c:1": stored(range(4))}, lac=3
    )
    closed = await recover_ledger(metadata, fake_context(bookies, store))
    assert closed.last_entry_id == 3 and not bookies.adds


async def test_a_corrupt_copy_never_counts_as_a_missing_entry() -> None:
    """Goal: entry 4 corrupt on a, absent on b, an I/O error on c: whether it was acknowledged cannot
    be told (a corrupt copy is neither a copy nor an absence), so recovery fails rather than
    truncate the ledger."""
    store = MemoryMetadataStore()
    metadata = await open_ledger_metadata(store)
    bookies = fake_bookies(
        {"a:1": {**stored(range(4)), 4: corrupt(wrapped(4))}, "b:1": stored(range(4)), "c:1": stored(range(5))},
        lac=3,
    )
    bookies["c:1"].unreadable.add(4)
    with pytest.raises(PersistenceError, match="cannot tell whether entry 4 exists"):
        await recover_ledger(metadata, fake_context(bookies, store))
    assert not bookies.adds
