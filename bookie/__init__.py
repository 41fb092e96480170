"""The bookie: minipulsar's storage server (docs/design.md §1-2).

- :mod:`bookie.journal` (+ ``journal_thread``, ``journal_files``, ``journal_types``,
  ``journal_set``, ``journal_format``, ``journal_segment``, ``group_commit``): the
  write-ahead log with group commit; an add is acknowledged once its group is durable;
- :mod:`bookie.storage`: ledger storage behind :class:`bookie.storage.base.LedgerStorage`;
- :mod:`bookie.bookie`: add / fence / read on journals + storage;
- :mod:`bookie.server`: the request handlers; :mod:`bookie.service`: the process lifecycle,
  HTTP and :mod:`bookie.registration` under ``/ledgers/available``.

Only :mod:`minipulsar.cli.bookie` imports this package.
"""
