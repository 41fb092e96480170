"""The bookie: minipulsar's storage server (DESIGN §1-2).

- :mod:`bookie.journal`: the write-ahead log with group commit; an add is acknowledged once
  its group is durable;
- :mod:`bookie.storage`: ledger storage behind :class:`bookie.storage.base.LedgerStorage`;
- :mod:`bookie.bookie`: add / fence / read on journals + storage;
- :mod:`bookie.server`: the request handlers; :mod:`bookie.service`: the process lifecycle,
  HTTP and :mod:`bookie.registration` under ``/ledgers/available``.

Only :mod:`minipulsar.cli.bookie` imports this package.
"""
