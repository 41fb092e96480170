"""The bookie: minipulsar's storage server (docs/design.md §1-2), in BookKeeper's names.

- :mod:`bookie.bookie_server`: :class:`BookieServer`, the process's root — it builds and wires
  everything below, starts it in order (cookies, replay, port, registration) and stops it;
- :mod:`bookie.server_connection`: :class:`BookieServerConnection`, the request handler of one
  peer's connection (ADD_ENTRY, READ_ENTRY, READ_LAC, BOOKIE_INFO);
- :mod:`bookie.bookie_impl`: :class:`BookieImpl`, the storage engine — journals + ledger
  storage, and the add / fence / read operations on them (network-free);
- :mod:`bookie.journal`: the write-ahead log with group commit; an add is acknowledged once
  its group is durable;
- :mod:`bookie.storage`: the ledger storage behind :class:`bookie.storage.base.LedgerStorage`;
- :mod:`bookie.state_manager`: :class:`BookieStateManager`, whether the bookie takes adds
  (writable or read-only, and why); :mod:`bookie.bookie_status`: the operator's read-only
  choice as persisted across restarts (``BOOKIE_STATUS``);
- around them: :mod:`bookie.registration` under ``/ledgers/available``, :mod:`bookie.http_api`,
  :mod:`bookie.disk_monitor`, :mod:`bookie.load`, :mod:`bookie.read_pool`, :mod:`bookie.read_permits`,
  :mod:`bookie.cookie`.

Only :mod:`minipulsar.cli.bookie` imports this package.
"""
