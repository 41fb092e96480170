"""The ledger-storage interface: what the request handlers need from wherever entries live.

The journal makes a record durable first; the bookie then hands it to the storage
(:meth:`LedgerStorage.add_entry`, :meth:`LedgerStorage.fence`) on the event loop, and the
same calls rebuild the storage from a journal replay at start. The first cut
(:mod:`bookie.storage.journal_storage`) keeps entries in the journal segments; the storage
engine of issue 3 (write cache, entry logs, index, checkpoints) implements the same interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from bookie.journal_format import EntryLocation
from bookie.storage.ledger_state import LedgerState


class LedgerStorage(ABC):
    """Entries and per-ledger state. Every method except ``start``/``close``/``read_entries``
    runs synchronously on the event loop (or on the replay thread before serving)."""

    @abstractmethod
    async def start(self) -> None:
        """Ready to serve (after the journal replay)."""

    @abstractmethod
    async def close(self) -> None:
        """Release files and threads; nothing is served afterwards."""

    @abstractmethod
    def add_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes,
                  location: EntryLocation) -> None:
        """Store one durable entry (``location``: where the journal holds it).

        Adding an entry that exists replaces it (an idempotent retry, or ledger recovery
        re-writing the same bytes).
        """

    @abstractmethod
    def fence(self, ledger_id: int) -> bool:
        """Mark the ledger fenced, creating it if unknown; True if it was not fenced before."""

    @abstractmethod
    def ledger(self, ledger_id: int) -> LedgerState | None:
        """The ledger's state, None for a ledger this bookie never saw."""

    @abstractmethod
    async def read_entries(self, ledger_id: int, first_entry_id: int, count: int,
                           max_bytes: int) -> list[tuple[int, bytes]]:
        """Up to ``count`` consecutive entries from ``first_entry_id`` as ``(entry_id, payload)``.

        Stops at the first missing entry and before the payloads pass ``max_bytes`` (the first
        entry is always returned). Runs the file reads off the event loop.

        Raises:
            NoSuchLedgerError: the ledger is unknown here.
            NoSuchEntryError: ``first_entry_id`` is not stored here.
        """

    @property
    @abstractmethod
    def ledger_count(self) -> int: ...

    @property
    @abstractmethod
    def entry_count(self) -> int: ...
