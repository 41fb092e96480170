"""AutoRecovery's metrics, with BookKeeper's names (``ReplicationStats``: the ``auditor`` and
``replication_worker`` scopes, as Pulsar's Grafana dashboards read them).

Counters are monotonically increasing Gauges (BookKeeper's counters have no ``_total``
suffix; see :mod:`minipulsar.bookie.metrics`); times are histograms in milliseconds.
Process-wide: exported on the /metrics of the bookie or autorecovery process that runs them.
"""

from __future__ import annotations

from prometheus_client import Gauge, Histogram

TIME_BUCKETS_MS = (1, 5, 10, 50, 100, 500, 1000, 5000, 10000, 60000, 300000)

NUM_UNDER_REPLICATED_LEDGERS = Gauge(
    "auditor_NUM_UNDER_REPLICATED_LEDGERS", "Ledgers marked under-replicated, as the auditor last counted them"
)
UNDER_REPLICATED_LEDGERS_TOTAL_SIZE = Gauge(
    "auditor_UNDER_REPLICATED_LEDGERS_TOTAL_SIZE",
    "Bytes of the ledgers marked under-replicated",
)
AUDIT_BOOKIES_TIME = Histogram(
    "auditor_AUDIT_BOOKIES_TIME", "Time (ms) of one audit of the bookies", buckets=TIME_BUCKETS_MS
)
CHECK_ALL_LEDGERS_TIME = Histogram(
    "auditor_CHECK_ALL_LEDGERS_TIME", "Time (ms) of one periodic check of every ledger", buckets=TIME_BUCKETS_MS
)
URL_PUBLISH_TIME_FOR_LOST_BOOKIE = Histogram(
    "auditor_URL_PUBLISH_TIME_FOR_LOST_BOOKIE",
    "Time (ms) to mark the ledgers of lost bookies under-replicated",
    buckets=TIME_BUCKETS_MS,
)
NUM_LEDGERS_CHECKED = Gauge("auditor_NUM_LEDGERS_CHECKED", "Ledgers checked by the periodic check")
NUM_BOOKIE_AUDITS_DELAYED = Gauge(
    "auditor_NUM_BOOKIE_AUDITS_DELAYED", "Bookie audits postponed by lostBookieRecoveryDelay"
)
ELECTION_ATTEMPTS = Gauge("auditor_election_attempts", "Auditor elections this process took part in")

REREPLICATE_TIME = Histogram(
    "replication_worker_rereplicate", "Time (ms) to re-replicate one ledger", ["success"], buckets=TIME_BUCKETS_MS
)
NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED = Gauge(
    "replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED", "Ledgers of which fragments were re-replicated"
)
NUM_ENTRIES_READ = Gauge("replication_worker_NUM_ENTRIES_READ", "Entries read from surviving replicas")
NUM_BYTES_READ = Gauge("replication_worker_NUM_BYTES_READ", "Bytes read from surviving replicas")
NUM_ENTRIES_WRITTEN = Gauge("replication_worker_NUM_ENTRIES_WRITTEN", "Entries written to replacement bookies")
NUM_BYTES_WRITTEN = Gauge("replication_worker_NUM_BYTES_WRITTEN", "Bytes written to replacement bookies")
NUM_DEFER_LEDGER_LOCK_RELEASE_OF_FAILED_LEDGER = Gauge(
    "replication_worker_NUM_DEFER_LEDGER_LOCK_RELEASE_OF_FAILED_LEDGER",
    "Ledgers put aside for a while after re-replicating them failed",
)
NUM_ENTRIES_UNABLE_TO_READ_FOR_REPLICATION = Gauge(
    "replication_worker_NUM_ENTRIES_UNABLE_TO_READ_FOR_REPLICATION", "Entries no surviving replica could serve"
)
