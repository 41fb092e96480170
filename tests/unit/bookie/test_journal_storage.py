"""The first-cut storage over a real journal: reads by pread, checked against the record CRC."""

from __future__ import annotations

from pathlib import Path

import pytest

from bookie.group_commit import GroupCommitPolicy
from bookie.journal import Journal, JournalSettings
from bookie.storage.journal_reader import CorruptEntryError
from bookie.storage.journal_storage import JournalLedgerStorage
from minipulsar.errors import NoSuchEntryError, NoSuchLedgerError


async def _storage_with_entries(tmp_path: Path, count: int) -> tuple[Journal, JournalLedgerStorage]:
    journal = Journal(tmp_path, 0, JournalSettings(policy=GroupCommitPolicy(max_group_wait_s=0), prealloc_bytes=0))
    storage = JournalLedgerStorage(lambda _, segment_id: journal.segment_path(segment_id), read_threads=2)
    await journal.start()
    for entry_id in range(count):
        payload = bytes([entry_id]) * 50
        location = await journal.add_entry(1, entry_id, entry_id - 1, payload)
        storage.add_entry(1, entry_id, entry_id - 1, payload, location)
    return journal, storage


async def test_reads_return_the_journaled_bytes(tmp_path: Path) -> None:
    journal, storage = await _storage_with_entries(tmp_path, 5)
    assert await storage.read_entries(1, 1, 3, 1 << 20) == [(i, bytes([i]) * 50) for i in (1, 2, 3)]
    with pytest.raises(NoSuchEntryError):
        await storage.read_entries(1, 5, 1, 1 << 20)
    with pytest.raises(NoSuchLedgerError):
        await storage.read_entries(2, 0, 1, 1 << 20)
    await journal.close()
    await storage.close()


async def test_a_corrupted_entry_is_refused_not_served(tmp_path: Path) -> None:
    journal, storage = await _storage_with_entries(tmp_path, 3)
    location = storage._index.get(1, 1)
    with open(journal.segment_path(location.segment_id), "r+b") as f:
        f.seek(location.offset + 10)
        f.write(b"\xff")
    with pytest.raises(CorruptEntryError):
        await storage.read_entries(1, 1, 1, 1 << 20)
    assert await storage.read_entries(1, 2, 1, 1 << 20) == [(2, bytes([2]) * 50)]
    await journal.close()
    await storage.close()
