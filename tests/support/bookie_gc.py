"""Garbage collection helpers for in-process BookieImpl tests (tests/unit/bookie/test_bookie_gc*.py):
a fake ledger list to delete ledgers from, a bookie set up for GC, and checks of what GC left.

- :func:`gc_bookie` keeps one ledger dir (so a test knows where every entry is), small entry
  logs, no read-ahead (every read goes to the index and an entry log) and an unthrottled
  compaction.
- Entries are :func:`tests.support.entries.payload_for` of ``ENTRY_BYTES``: a check reads them
  back byte for byte.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

import pytest

from minipulsar.bookie.bookie_impl import BookieImpl
from minipulsar.bookie.storage.single_directory import EntryLogUsage, SingleDirectoryDbLedgerStorage
from minipulsar.errors import NoSuchLedgerError
from tests.support.bookie_storage import add_many, read_all, started_bookie, storage
from tests.support.entries import payload_for

ENTRY_BYTES = 1000
LOG_SIZE_LIMIT = 64 * 1024
"""The smallest logSizeLimit: ~63 entries of 1000 bytes per entry log."""


class FakeLedgers:
    """A metadata store's ledger list. ``during_listing`` runs inside :meth:`ledger_ids` after
    the listing was taken (a stale listing); ``hidden`` ledgers exist but are not listed."""

    def __init__(self, ledger_ids: Iterable[int]) -> None:
        self.ids = set(ledger_ids)
        self.hidden: set[int] = set()
        self.during_listing: Callable[[], Awaitable[None]] | None = None
        self.fail: Exception | None = None

    async def ledger_ids(self) -> set[int]:
        if self.fail is not None:
            raise self.fail
        listing = self.ids - self.hidden
        if self.during_listing is not None:
            await self.during_listing()
        return listing

    async def ledger_exists(self, ledger_id: int) -> bool:
        return ledger_id in self.ids


async def gc_bookie(root: Path, **overrides) -> BookieImpl:
    """One ledger dir (so that the tests know where every ledger's entries are), small entry logs,
    no read-ahead (every read goes to the index and the entry log), compaction unthrottled."""
    return await started_bookie(
        root,
        **{
            "ledgerDirectories": f"{root}/ledgers",
            "logSizeLimit": LOG_SIZE_LIMIT,
            "dbStorage_readAheadCacheBatchSize": 0,
            "compactionRateByEntries": 1_000_000,
            **overrides,
        },
    )


def the_dir(bookie: BookieImpl) -> SingleDirectoryDbLedgerStorage:
    [directory] = storage(bookie).dirs
    return directory


async def usages(bookie: BookieImpl) -> list[EntryLogUsage]:
    directory = the_dir(bookie)
    current = await storage(bookie).run_exclusive(directory.current_entry_log_id)
    return await asyncio.to_thread(directory.entry_log_usages, current)


def entry_log_bytes(root: Path) -> int:
    return sum(path.stat().st_size for path in root.rglob("*.log"))


def log_ids_on_disk(bookie: BookieImpl) -> set[int]:
    return {int(path.stem, 16) for path in the_dir(bookie).directory.glob("*.log")}


async def assert_ledgers_intact(bookie: BookieImpl, ledgers: Iterable[int], count: int) -> None:
    for ledger_id in ledgers:
        got = await read_all(bookie, ledger_id, 0, count)
        assert [e for e, _ in got] == list(range(count)), f"ledger {ledger_id}"
        assert all(p == payload_for(ledger_id, e, ENTRY_BYTES) for e, p in got), f"ledger {ledger_id} differs"


async def assert_ledgers_gone(bookie: BookieImpl, ledgers: Iterable[int]) -> None:
    persisted = set(await asyncio.to_thread(the_dir(bookie).persisted_ledger_ids))
    for ledger_id in ledgers:
        assert bookie.storage.ledger(ledger_id) is None and ledger_id not in persisted, f"ledger {ledger_id}"
        with pytest.raises(NoSuchLedgerError):
            await read_all(bookie, ledger_id, 0, 1)


async def write_and_checkpoint(bookie: BookieImpl, ledgers: Iterable[int], entries: int) -> None:
    await add_many(bookie, list(ledgers), range(entries), ENTRY_BYTES)
    await storage(bookie).checkpoint()
