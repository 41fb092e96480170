"""Ledger storage: where entries live once the journal made them durable.

:class:`~bookie.storage.base.LedgerStorage` is the interface the bookie uses;
:class:`~bookie.storage.journal_storage.JournalLedgerStorage` is the first cut (entries stay
in the journal segments, indexed in memory). The DbLedgerStorage-style engine replaces it.
"""

from bookie.storage.base import LedgerStorage
from bookie.storage.journal_storage import JournalLedgerStorage
from bookie.storage.ledger_state import LedgerState

__all__ = ["JournalLedgerStorage", "LedgerState", "LedgerStorage"]
