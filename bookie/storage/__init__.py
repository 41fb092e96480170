"""Ledger storage: where entries live once the journal made them durable.

:class:`~bookie.storage.base.LedgerStorage` is the interface the bookie uses;
:class:`~bookie.storage.db_ledger_storage.DbLedgerStorage` implements it the way BookKeeper's
DbLedgerStorage does, one :mod:`~bookie.storage.single_directory` storage per ledger dir:

- :mod:`~bookie.storage.write_cache`: the double-buffered write cache;
- :mod:`~bookie.storage.entry_log` / :mod:`~bookie.storage.entry_logger`: append-only entry logs;
- :mod:`~bookie.storage.index_db`: ``index.db`` (sqlite3) holding
  :mod:`~bookie.storage.entry_location_index`, :mod:`~bookie.storage.ledger_metadata_index`
  and :mod:`~bookie.storage.entry_log_metadata` (per-log usage, for GC);
- :mod:`~bookie.storage.read_cache`: the read-ahead cache;
- :mod:`~bookie.storage.checkpoint`: the journal marks (``lastMark``) that let journals be trimmed;
- :mod:`~bookie.storage.read_executor`: where blocking reads run;
- :mod:`~bookie.storage.gc` / :mod:`~bookie.storage.compaction`: garbage collection of deleted
  ledgers and dead entry logs, and compaction of sparse ones.
"""

from minipulsar.bookie.storage.base import LedgerStorage
from minipulsar.bookie.storage.ledger_state import LedgerState

__all__ = ["LedgerState", "LedgerStorage"]
