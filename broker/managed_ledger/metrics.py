"""Process-wide managed-ledger metrics that are events, not per-topic state (per-topic and
per-cursor numbers are attributes the broker's collector reads at scrape time).

Like the BookKeeper client's, counters whose exact names operators query are monotonically
increasing Gauges (prometheus-client would append ``_total`` to a Counter).

``pulsar_storage_write_latency_ms`` (label ``cluster``) is the broker-wide histogram of the
managed ledgers' write latency: from ``add_entry`` to the entry being durable (its add
completed), retries on a next ledger included. It is a
:class:`~minipulsar.bookkeeper.metrics.LoopHistogram` (prometheus-client's exposition, observed
with one bisect: once per entry) in Pulsar's storage-latency buckets; the broker creates its
cluster's child at start. The same samples, per topic and per stats interval, are Pulsar's
``pulsar_storage_write_latency_le_*`` gauges (:mod:`broker.managed_ledger.stats_buckets`).

Invariant: every metric here only grows (a Gauge only where the exact name needs it).
"""

from __future__ import annotations

from prometheus_client import Gauge

from minipulsar.bookkeeper.metrics import LoopHistogram
from minipulsar.broker.managed_ledger.stats_buckets import WRITE_LATENCY_BUCKETS_MS

STORAGE_WRITE_LATENCY = LoopHistogram(
    "pulsar_storage_write_latency_ms",
    "Managed ledger add_entry to the entry durable on the bookies (ms)",
    WRITE_LATENCY_BUCKETS_MS,
    label="cluster",
)

CURSOR_RANGES_OVER_LIMIT = Gauge(
    "pulsar_ml_cursor_nonContiguousDeletedMessagesRange_over_limit",
    "Cursor position writes that persisted only the first managedLedgerMaxUnackedRangesToPersist "
    "individually-acknowledged ranges; the others stay in memory and are redelivered after a crash (counter)",
)
CURSOR_PERSIST_LEDGER_SUCCEED = Gauge(
    "pulsar_ml_cursor_persistLedgerSucceed", "Cursor positions appended to a cursor ledger (counter)"
)
CURSOR_PERSIST_LEDGER_ERRORS = Gauge(
    "pulsar_ml_cursor_persistLedgerErrors",
    "Cursor ledger creations or appends the bookies refused; the position went to the metadata store (counter)",
)
CURSOR_PERSIST_SUCCEED = Gauge(
    "pulsar_ml_cursor_persistZookeeperSucceed",
    "Cursor keys written to the metadata store: a switch to a new cursor ledger, a clean close, a fallback (counter)",
)
CURSOR_PERSIST_ERRORS = Gauge(
    "pulsar_ml_cursor_persistZookeeperErrors", "Cursor key writes to the metadata store that failed (counter)"
)
LEDGERS_ROLLED = Gauge("pulsar_ml_ledgers_rolled", "Ledgers closed by rollover or a write failure (counter)")
LEDGERS_TRIMMED = Gauge(
    "pulsar_ml_ledgers_trimmed", "Consumed ledgers deleted by trimming, outside retention (counter)"
)
