"""Every journal of a bookie, and the checkpoint source of its ledger storage.

Invariants:
- ledger ``L`` always goes to journal ``L mod n`` (as in BookKeeper), ``n`` the number of
  journal directories: all records of one ledger are in one journal, in admission order;
- a checkpoint holds each journal's :attr:`Journal.applied_mark`, taken on the loop; once it
  is persisted, each journal may delete the segments wholly before its mark.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from minipulsar.bookie.journal.journal import EntryStore, Journal
from minipulsar.bookie.journal.settings import JournalSettings
from minipulsar.bookie.storage.checkpoint import Checkpoint
from minipulsar.config import BookieConfig
from minipulsar.errors import MiniPulsarError


class JournalSet:
    """Every journal of the bookie; ledger ``L`` goes to journal ``L mod n`` (as in BookKeeper)."""

    def __init__(self, journals: list[Journal]) -> None:
        assert journals, "a bookie needs at least one journal"
        self.journals = journals

    @classmethod
    def from_config(cls, config: BookieConfig) -> JournalSet:
        settings = JournalSettings.from_config(config)
        return cls([Journal(Path(d) / "current", i, settings) for i, d in enumerate(config.journal_dirs)])

    def attach_storage(self, storage: EntryStore) -> None:
        """Where every journal puts its durable adds (before telling their sinks)."""
        for journal in self.journals:
            journal.attach_storage(storage)

    def on_failed(self, listener: Callable[[int, MiniPulsarError], None]) -> None:
        """Tell ``listener(index, failure)`` on the loop when a journal's writer stops."""
        for journal in self.journals:
            journal.on_failed = listener

    def for_ledger(self, ledger_id: int) -> Journal:
        return self.journals[ledger_id % len(self.journals)]

    def for_ledgers(self, ledger_ids: set[int]) -> Journal | None:
        """The one journal of all these ledgers, None when they span several."""
        n = len(self.journals)
        first = next(iter(ledger_ids))
        if n > 1 and any((ledger_id - first) % n for ledger_id in ledger_ids):
            return None
        return self.journals[first % n]

    def segment_path(self, journal_index: int, segment_id: int) -> Path:
        return self.journals[journal_index].segment_path(segment_id)

    async def start(self) -> None:
        for journal in self.journals:
            await journal.start()

    async def close(self) -> None:
        await asyncio.gather(*(journal.close() for journal in self.journals))

    @property
    def queued_entries(self) -> int:
        return sum(j.queued_entries for j in self.journals)

    # -- the checkpoint source of the ledger storage ---------------------------------------------

    def new_checkpoint(self) -> Checkpoint:
        """On the loop: each journal's :attr:`Journal.applied_mark`."""
        return Checkpoint(tuple(journal.applied_mark for journal in self.journals))

    def checkpoint_complete(self, checkpoint: Checkpoint) -> None:
        """``checkpoint`` is persisted: each journal deletes its segments wholly before it (on
        its own thread once started, see :meth:`Journal.trim_soon`)."""
        for journal in self.journals:
            journal.trim_soon(checkpoint.mark(journal.index))
