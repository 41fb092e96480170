"""The BookKeeper client's metrics, under the names a Pulsar broker exports them
(``pulsar_managedLedger_client_`` + BookKeeper's stat names).

BookKeeper's counters carry no ``_total`` suffix; prometheus-client would add one to a
Counter, so counters whose exact name operators query are monotonically increasing Gauges.
Latencies are histograms in milliseconds (BookKeeper exports summaries; p99 is derivable with
``histogram_quantile``). Metric objects are process-wide: one broker per process.

Invariant: every metric here only grows, except the gauges of what is pending or quarantined now.
"""

from __future__ import annotations

from prometheus_client import Gauge, Histogram

PREFIX = "pulsar_managedLedger_client_bookkeeper_client_"
LATENCY_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)

ADD_ENTRY = Histogram(
    PREFIX + "ADD_ENTRY", "Add latency: from add() to its completion (ms)", ["success"], buckets=LATENCY_BUCKETS_MS
)
READ_ENTRY = Histogram(
    PREFIX + "READ_ENTRY", "Read latency of one range read (ms)", ["success"], buckets=LATENCY_BUCKETS_MS
)
LEDGER_RECOVER = Histogram(
    PREFIX + "LEDGER_RECOVER",
    "Duration of ledger recoveries (ms); _count is the number",
    ["success"],
    buckets=LATENCY_BUCKETS_MS,
)
NUM_ENSEMBLE_CHANGE = Gauge(PREFIX + "NUM_ENSEMBLE_CHANGE", "Ensemble changes made by this client (counter)")
SPECULATIVE_READ_COUNT = Gauge(
    PREFIX + "SPECULATIVE_READ_COUNT", "Reads also sent to another replica after speculativeReadTimeout (counter)"
)
READ_ENTRY_DM = Gauge(
    PREFIX + "READ_ENTRY_DM",
    "Entries read whose bytes did not match their digest; the read went to another replica (counter)",
)
BOOKIE_QUARANTINE = Gauge(PREFIX + "BOOKIE_QUARANTINE", "Faulty bookies quarantined (counter)")
BOOKIE_QUARANTINE_SKIP = Gauge(
    PREFIX + "BOOKIE_QUARANTINE_SKIP",
    "Faulty bookies not quarantined because of bookkeeperClientQuarantineRatio (counter)",
)
QUARANTINED_BOOKIES = Gauge(PREFIX + "QUARANTINED_BOOKIES", "Bookies in quarantine now")
NUM_PENDING_ADD = Gauge(PREFIX + "NUM_PENDING_ADD", "Adds not yet completed, all ledgers")
PENDING_ADD_BYTES = Gauge(
    PREFIX + "PENDING_ADD_BYTES", "Add payload bytes not yet answered by every replica, all ledgers"
)
BOOKIE_PENDING_REQUESTS = Gauge(
    PREFIX + "BOOKIE_PENDING_REQUESTS",
    "Requests (adds, reads, fences) awaiting the bookie's answer: the per-bookie request queue as this broker sees it",
    ["bookie"],
)
