"""index.db (sqlite3): entry locations, the ledgers table, entry-log usage, transactions."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from minipulsar.bookie.storage.entry_location_index import ENTRIES_KEY, EntryLocationIndex
from minipulsar.bookie.storage.entry_log_metadata import EntryLogMetadataIndex
from minipulsar.bookie.storage.index_db import IndexDb
from minipulsar.bookie.storage.ledger_metadata_index import LedgerMetadataIndex


@pytest.fixture
def db(tmp_path: Path):
    index_db = IndexDb(tmp_path)
    index_db.open()
    yield index_db
    index_db.close()


def test_locations_are_found_and_a_second_location_replaces_the_first(db: IndexDb) -> None:
    index = EntryLocationIndex(db)
    with db.transaction() as cursor:
        assert index.add_ledger_locations(cursor, 5, [(0, 100), (1, 200), (2, 300)]) == 3
        IndexDb.add_meta(cursor, ENTRIES_KEY, 3)
    with db.transaction() as cursor:
        assert index.add_ledger_locations(cursor, 5, [(2, 999), (3, 400)]) == 1, "entry 2 is not new"
        IndexDb.add_meta(cursor, ENTRIES_KEY, 1)
    assert [index.get(5, e) for e in range(5)] == [100, 200, 999, 400, None]
    assert index.get(6, 0) is None
    assert index.count() == 4


def test_a_failed_transaction_leaves_nothing_behind(db: IndexDb) -> None:
    index = EntryLocationIndex(db)
    with pytest.raises(RuntimeError):
        with db.transaction() as cursor:
            index.add_ledger_locations(cursor, 1, [(0, 1)])
            raise RuntimeError("crash in the middle of a flush")
    assert index.get(1, 0) is None


def test_readers_on_other_threads_see_committed_locations(db: IndexDb) -> None:
    index = EntryLocationIndex(db)
    with db.transaction() as cursor:
        index.add_ledger_locations(cursor, 9, [(i, 1000 + i) for i in range(100)])
    seen: list = []
    threads = [threading.Thread(target=lambda: seen.append([index.get(9, i) for i in range(100)])) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [[1000 + i for i in range(100)]] * 4


def test_ledgers_merge_with_max_keep_the_fence_and_load_back(tmp_path: Path, db: IndexDb) -> None:
    ledgers = LedgerMetadataIndex(db)
    ledgers.states.get_or_create(1).entry_added(10, 9)
    assert ledgers.fence(2) and not ledgers.fence(2)
    rows = ledgers.snapshot([1])
    assert sorted(rows) == [(1, 0, 9, 10, None), (2, 1, -1, -1, None)]
    assert ledgers.snapshot([]) == [], "a fence is snapshotted once"
    with db.transaction() as cursor:
        ledgers.persist(cursor, rows)
    with db.transaction() as cursor:  # an older snapshot never moves anything back
        ledgers.persist(cursor, [(1, 0, 3, 4, None), (2, 0, 0, 0, None)])
    reloaded = LedgerMetadataIndex(db)
    reloaded.load()
    one, two = reloaded.get(1), reloaded.get(2)
    assert (one.last_entry_id, one.lac, one.fenced) == (10, 9, False)
    assert (two.last_entry_id, two.lac, two.fenced) == (0, 0, True)


def test_master_key_is_snapshotted_once_first_one_stays_and_loads_back(db: IndexDb) -> None:
    """Goal: a ledger's master key is set once, persisted by the next snapshot, never replaced
    (in memory or by merging rows), and read back at start."""
    ledgers = LedgerMetadataIndex(db)
    assert ledgers.set_master_key(3, b"k1") and not ledgers.set_master_key(3, b"k2")
    assert ledgers.get(3).master_key == b"k1"
    assert ledgers.has_unpersisted_changes
    rows = ledgers.snapshot([])
    assert rows == [(3, 0, -1, -1, b"k1")]
    assert not ledgers.has_unpersisted_changes and ledgers.snapshot([]) == []
    with db.transaction() as cursor:
        ledgers.persist(cursor, rows)
    with db.transaction() as cursor:  # a row without the key, or with another, keeps the first
        ledgers.persist(cursor, [(3, 1, 5, 5, None), (3, 1, 5, 5, b"k2")])
    reloaded = LedgerMetadataIndex(db)
    reloaded.load()
    assert reloaded.get(3).master_key == b"k1" and reloaded.get(3).fenced


def test_entry_log_usage_adds_up_per_log_and_ledger(db: IndexDb) -> None:
    usage = EntryLogMetadataIndex(db)
    with db.transaction() as cursor:
        usage.add_usage(cursor, {(1, 7): 100, (1, 8): 50, (2, 7): 10})
    with db.transaction() as cursor:
        usage.add_usage(cursor, {(2, 7): 5, (3, 8): 1})
    assert usage.usage(1) == {7: 100, 8: 50}
    assert usage.usage(2) == {7: 15}
    assert usage.log_ids() == [1, 2, 3] and usage.last_log_id() == 3
