"""AutoRecovery (BookKeeper's ``org.apache.bookkeeper.replication``): the Auditor finds ledgers
with fragments on lost bookies and marks them under-replicated; ReplicationWorkers copy the lost
fragments to other bookies and swap them into the ledger metadata.

One concept per module: :mod:`.paths` (the metadata layout), :mod:`.underreplication_manager`,
:mod:`.fragments` (LedgerFragment and the pure computation of lost fragments),
:mod:`.ledger_checker`, :mod:`.fragment_replicator` (the only caller of BookieClient here),
:mod:`.replication_worker`, :mod:`.auditor`, :mod:`.auditor_elector`, :mod:`.autorecovery_main`,
:mod:`.admin` (the operator verbs), :mod:`.settings`, :mod:`.metrics`.
"""
