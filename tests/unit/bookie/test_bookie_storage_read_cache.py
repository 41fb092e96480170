"""The read-ahead cache: bounded, and filled on a miss with the ledger's following entries."""

from __future__ import annotations

from pathlib import Path

from minipulsar.bookie.storage import metrics
from minipulsar.bookie.storage.read_cache import ENTRY_OVERHEAD_BYTES, ReadCache
from minipulsar.bookie.storage.single_directory import SingleDirectoryDbLedgerStorage, StorageSettings


def test_the_cache_stays_within_its_bytes_dropping_the_oldest() -> None:
    cache = ReadCache(max_bytes=10 * (100 + ENTRY_OVERHEAD_BYTES))
    cache.put_all(1, [(i, bytes(100)) for i in range(8)])
    cache.put_all(2, [(i, bytes(100)) for i in range(5)])
    assert len(cache) == 10 and cache.size_bytes <= cache.max_bytes
    assert cache.get(1, 0) is None and cache.get(1, 2) is None, "the oldest went first"
    assert cache.get(1, 3) == bytes(100) and cache.get(2, 4) == bytes(100)


def _flushed_directory(tmp_path: Path, batch_entries: int) -> SingleDirectoryDbLedgerStorage:
    directory = SingleDirectoryDbLedgerStorage(tmp_path, StorageSettings(read_ahead_batch_entries=batch_entries))
    directory.open()
    for ledger_id, count in ((1, 30), (2, 5)):
        for entry_id in range(count):
            directory.try_admit(200)
            directory.add_entry(ledger_id, entry_id, entry_id - 1, bytes([ledger_id, entry_id]) * 100)
    batch = directory.swap()
    directory.flush(batch)
    directory.flush_completed(batch)
    return directory


def _counters() -> tuple[float, float]:
    return metrics.READ_CACHE_HITS._value.get(), metrics.READ_CACHE_MISSES._value.get()


def test_a_miss_reads_ahead_the_ledgers_next_entries_which_then_hit(tmp_path: Path) -> None:
    """Goal: after a miss on entry 0, entries 1..batch come from the read-ahead cache, and
    nothing of another ledger is read ahead. Method: count hits and misses around reads."""
    directory = _flushed_directory(tmp_path, batch_entries=10)
    hits, misses = _counters()
    assert directory.read_entries(1, 0, 1, 1 << 20) == [(0, bytes([1, 0]) * 100)]
    assert _counters() == (hits, misses + 1)
    assert len(directory.read_cache) == 10
    assert [e for e, _ in directory.read_entries(1, 1, 10, 1 << 20)] == list(range(1, 11))
    assert _counters() == (hits + 10, misses + 1), "entries 1..10 were read ahead"
    assert [e for e, _ in directory.read_entries(1, 11, 3, 1 << 20)] == [11, 12, 13]
    assert _counters() == (hits + 12, misses + 2), "11 missed (and read 12..21 ahead)"
    directory.read_entries(1, 25, 10, 1 << 20)
    assert all(directory.read_cache.get(2, e) is None for e in range(5)), "read-ahead stays in its ledger"
    directory.close()


def test_read_ahead_can_be_switched_off(tmp_path: Path) -> None:
    directory = _flushed_directory(tmp_path, batch_entries=0)
    assert len(directory.read_entries(1, 0, 30, 1 << 20)) == 30
    assert len(directory.read_cache) == 0
    directory.close()
