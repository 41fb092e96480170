"""The bookie's Prometheus metrics, named as BookKeeper names them.

BookKeeper exports latencies as summaries in milliseconds with a ``success`` label; the
Python client has no quantile summaries, so latencies are histograms in milliseconds (p99 via
``histogram_quantile``) under the same names. BookKeeper's counters have no ``_total``
suffix; prometheus-client would add one to a Counter, so the few counters whose exact name
matters are monotonically increasing Gauges.

Metric objects are process-wide (one bookie per process); in-process tests that start
several bookies share them.
"""

from __future__ import annotations

import bisect
import re
import weakref

from prometheus_client import REGISTRY, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily

LATENCY_BUCKETS_MS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
GROUP_SIZE_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


class LatencyCounts:
    """Histogram buckets as plain counters, for a per-add hot path (~0.15 µs a record, where a
    prometheus ``Histogram.observe`` takes ~1 µs and a lock). Exported by :class:`FastHistogram`
    when /metrics is scraped.

    Invariant: written by ONE thread only (the event loop, or one journal thread): ``+=`` on a
    list item is not atomic across threads. Readers (the scrape) take a snapshot, which may be
    one record behind — fine for a metric.
    """

    __slots__ = ("bounds_s", "counts", "sum_s")

    def __init__(self, bounds_ms: tuple[float, ...]) -> None:
        self.bounds_s = tuple(bound / 1000 for bound in bounds_ms)
        """Upper bounds in seconds (what ``time.monotonic()`` differences are): no ×1000 per record."""
        self.counts = [0] * (len(bounds_ms) + 1)
        """Per bucket, NOT cumulative; the last one is +Inf."""
        self.sum_s = 0.0

    def record(self, latency_s: float, times: int = 1) -> None:
        """Count ``times`` records that each took ``latency_s`` seconds."""
        self.counts[bisect.bisect_left(self.bounds_s, latency_s)] += times
        self.sum_s += latency_s * times


class FastHistogram:
    """A histogram in milliseconds (prometheus ``_bucket``/``_count``/``_sum``, so p99 is derivable
    with ``histogram_quantile``) fed by :class:`LatencyCounts` objects: one per label set, or one
    per writer thread (:meth:`counts` with ``shared=False``), summed at scrape time."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: tuple[str, ...] = (),
        bounds_ms: tuple[float, ...] = LATENCY_BUCKETS_MS,
    ) -> None:
        self.name, self.documentation, self.labelnames, self.bounds_ms = name, documentation, labelnames, bounds_ms
        self._counts: list[tuple[tuple[str, ...], LatencyCounts]] = []
        self._shared: dict[tuple[str, ...], LatencyCounts] = {}
        REGISTRY.register(self)

    def counts(self, *labelvalues: str, shared: bool = True) -> LatencyCounts:
        """The counters to record into for these label values: the one shared object (for the
        loop), or a new one that only its caller's thread writes (``shared=False``)."""
        assert len(labelvalues) == len(self.labelnames)
        if shared and labelvalues in self._shared:
            return self._shared[labelvalues]
        counts = LatencyCounts(self.bounds_ms)
        self._counts.append((labelvalues, counts))
        if shared:
            self._shared[labelvalues] = counts
        return counts

    def describe(self) -> list:
        return [HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self):
        merged: dict[tuple[str, ...], tuple[list[int], float]] = {}
        for labelvalues, counts in list(self._counts):
            snapshot, sum_s = list(counts.counts), counts.sum_s
            total, total_sum = merged.get(labelvalues, ([0] * len(snapshot), 0.0))
            merged[labelvalues] = ([a + b for a, b in zip(total, snapshot)], total_sum + sum_s)
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labelvalues, (per_bucket, sum_s) in merged.items():
            cumulative, buckets = 0, []
            for bound, count in zip((*(_le(b) for b in self.bounds_ms), "+Inf"), per_bucket):
                cumulative += count
                buckets.append((bound, cumulative))
            family.add_metric(list(labelvalues), buckets, sum_s * 1000)
        yield family


def _le(bound_ms: float) -> str:
    return str(float(bound_ms))


ADD_ENTRY_REQUEST = FastHistogram(
    "bookkeeper_server_ADD_ENTRY_REQUEST", "ADD_ENTRY: request received to response sent (ms)", ("success",)
)
READ_ENTRY_REQUEST = Histogram(
    "bookkeeper_server_READ_ENTRY_REQUEST",
    "READ_ENTRY: request received to response sent (ms)",
    ["success"],
    buckets=LATENCY_BUCKETS_MS,
)
ADD_ENTRY_REQUEST_OK = ADD_ENTRY_REQUEST.counts("true")
ADD_ENTRY_REQUEST_FAILED = ADD_ENTRY_REQUEST.counts("false")
READ_ENTRY_REQUEST_OK = READ_ENTRY_REQUEST.labels(success="true")
READ_ENTRY_REQUEST_FAILED = READ_ENTRY_REQUEST.labels(success="false")

CHANNEL_WRITE = Histogram(
    "bookkeeper_server_CHANNEL_WRITE",
    "Responses dropped unsent: the peer had not taken its responses for waitTimeoutOnResponseBackpressureMs "
    '(ms since the request arrived; only success="false" is recorded here)',
    ["success"],
    buckets=LATENCY_BUCKETS_MS,
)
CHANNEL_WRITE_FAILED = CHANNEL_WRITE.labels(success="false")


class Totals:
    """Plain counters for the per-request hot path (an int add, not a locked metric update),
    exported through the gauges below when /metrics is scraped."""

    adds_in_progress = 0
    reads_in_progress = 0
    write_bytes = 0
    read_bytes = 0
    journal_queued = 0


TOTALS = Totals()

ADD_ENTRY_IN_PROGRESS = Gauge("bookkeeper_server_ADD_ENTRY_IN_PROGRESS", "Adds received and not yet answered")
ADD_ENTRY_IN_PROGRESS.set_function(lambda: TOTALS.adds_in_progress)
READ_ENTRY_IN_PROGRESS = Gauge("bookkeeper_server_READ_ENTRY_IN_PROGRESS", "Reads received and not yet answered")
READ_ENTRY_IN_PROGRESS.set_function(lambda: TOTALS.reads_in_progress)

JOURNAL_ADD_ENTRY = FastHistogram(
    "bookie_journal_JOURNAL_ADD_ENTRY",
    "Journal: record queued to record durable (ms); each journal "
    "thread records into its own counts (JOURNAL_ADD_ENTRY.counts(shared=False))",
)
JOURNAL_QUEUE_LATENCY = FastHistogram(
    "bookie_journal_JOURNAL_QUEUE_LATENCY",
    "Journal: record queued to the writer thread taking it (ms); each journal thread records "
    'its own counts; only success="true" is recorded',
    ("success",),
)
JOURNAL_QUEUE_LATENCY.counts("true")
JOURNAL_QUEUE_LATENCY.counts("false")
JOURNAL_SYNC = Histogram(
    "bookie_journal_JOURNAL_SYNC", "Journal: one fdatasync of a group (ms)", buckets=LATENCY_BUCKETS_MS
)
JOURNAL_CREATION_LATENCY = Histogram(
    "bookie_journal_JOURNAL_CREATION_LATENCY",
    "Journal: creating (and preallocating) a segment (ms)",
    buckets=LATENCY_BUCKETS_MS,
)
JOURNAL_FORCE_WRITE_GROUPING_COUNT = Histogram(
    "bookie_journal_JOURNAL_FORCE_WRITE_GROUPING_COUNT", "Journal: records per group commit", buckets=GROUP_SIZE_BUCKETS
)
JOURNAL_QUEUE_SIZE = Gauge("bookie_journal_JOURNAL_QUEUE_SIZE", "Journal: records queued and not yet durable")
JOURNAL_QUEUE_SIZE.set_function(lambda: TOTALS.journal_queued)
JOURNAL_WRITE_BYTES = Gauge("bookie_journal_JOURNAL_WRITE_BYTES", "Journal: bytes written (monotonic)")
JOURNAL_NUM_FLUSH = {
    reason: Gauge(
        f"bookie_journal_JOURNAL_NUM_FLUSH_{reason.upper()}",
        f"Journal: group commits triggered by {reason} (monotonic)",
    )
    for reason in ("max_wait", "max_outstanding_bytes", "max_entries", "empty_queue", "shutdown")
}

WRITE_BYTES = Gauge("bookie_WRITE_BYTES", "Entry payload bytes added (monotonic)")
WRITE_BYTES.set_function(lambda: TOTALS.write_bytes)
READ_BYTES = Gauge("bookie_READ_BYTES", "Entry payload bytes read (monotonic)")
READ_BYTES.set_function(lambda: TOTALS.read_bytes)
SERVER_STATUS = Gauge("bookie_SERVER_STATUS", "1 while the bookie is writable, 0 when read-only or stopped")
LEDGERS_COUNT = Gauge("bookie_ledgers_count", "Ledgers this bookie holds")
ENTRIES_COUNT = Gauge("bookie_entries_count", "Entries this bookie holds")

LEDGER_WRITABLE_DIRS = Gauge(
    "bookie_ledger_writable_dirs",
    "Ledger dirs that take new entries: neither full (diskUsageThreshold, ENOSPC) nor failed",
)
LEDGER_NUM_DIRS = Gauge("bookie_ledger_num_dirs", "Ledger dirs configured (ledgerDirectories)")

DISK_MONITORS: weakref.WeakSet = weakref.WeakSet()
"""Open :class:`bookie.disk_monitor.LedgerDirsMonitor` objects (one per bookie; tests may hold several)."""
_NOT_IN_A_NAME = re.compile(r"[^a-zA-Z0-9_]")


def ledger_dir_usage_name(directory: str) -> str:
    """BookKeeper's gauge of a ledger dir's usage: ``bookie_ledger_dir_<path>_usage``, every
    character of the path but ``[a-zA-Z0-9_]`` made ``_`` (``/data/ledgers``:
    ``bookie_ledger_dir__data_ledgers_usage``)."""
    return f"bookie_ledger_dir_{_NOT_IN_A_NAME.sub('_', directory)}_usage"


class _LedgerDirUsage:
    """One ``bookie_ledger_dir_<path>_usage`` gauge per ledger dir: the used fraction (0..1) of
    its filesystem at the disk monitor's last check; 0 before the first check and for a dir
    that failed (BookKeeper exports percent; minipulsar's fractions, as diskUsageThreshold)."""

    def describe(self) -> list:
        return []  # names depend on the config: do not reserve them at registration

    def collect(self):
        seen: set[str] = set()
        for monitor in list(DISK_MONITORS):
            for directory, used in monitor.used_fractions().items():
                name = ledger_dir_usage_name(str(directory))
                if name in seen:
                    continue
                seen.add(name)
                family = GaugeMetricFamily(name, f"Used fraction of the filesystem of ledger dir {directory}")
                family.add_metric([], used)
                yield family


REGISTRY.register(_LedgerDirUsage())

# -- the read thread pool (bookie/read_pool.py) ----------------------------------------------------

READ_ENTRY_BLOCKED = Gauge(
    "bookkeeper_server_READ_ENTRY_BLOCKED",
    "Reads that waited for a permit: maxReadsInProgressLimit reads were in progress (monotonic)",
)
READ_ENTRY_BLOCKED_WAIT = Histogram(
    "bookkeeper_server_READ_ENTRY_BLOCKED_WAIT",
    'How long a blocked read waited for its permit (ms); success="false": it gave up (its connection closed)',
    ["success"],
    buckets=LATENCY_BUCKETS_MS,
)
READ_ENTRY_BLOCKED_WAIT_OK = READ_ENTRY_BLOCKED_WAIT.labels(success="true")
READ_ENTRY_BLOCKED_WAIT_FAILED = READ_ENTRY_BLOCKED_WAIT.labels(success="false")
READ_ENTRY_REJECTED = Gauge(
    "bookkeeper_server_READ_ENTRY_REJECTED",
    "Reads refused with TooManyRequests: their read thread's queue was full (monotonic)",
)
READ_POOL_TASK_QUEUED = Histogram(
    "bookkeeper_server_BookieReadThreadPool_task_queued",
    "Read thread pool: task submitted to task started (ms)",
    buckets=LATENCY_BUCKETS_MS,
)
READ_POOL_TASK_EXECUTION = Histogram(
    "bookkeeper_server_BookieReadThreadPool_task_execution",
    "Read thread pool: task run time (ms)",
    buckets=LATENCY_BUCKETS_MS,
)
READ_POOLS: weakref.WeakSet = weakref.WeakSet()
"""Open :class:`bookie.read_pool.ReadThreadPool` objects (one per bookie; tests may hold several)."""


class _ReadPoolQueues:
    """``bookkeeper_server_BookieReadThreadPool_queue_<i>``: tasks pending on read thread i (the
    per-thread names of BookKeeper's OrderedExecutor), and the configured bound per thread."""

    def describe(self) -> list:
        return []  # names depend on the thread count: do not reserve them at registration

    def collect(self):
        pools = list(READ_POOLS)
        threads = max((len(pool.pending) for pool in pools), default=0)
        for index in range(threads):
            family = GaugeMetricFamily(
                f"bookkeeper_server_BookieReadThreadPool_queue_{index}",
                f"Reads queued or running on read thread {index}",
            )
            family.add_metric([], sum(pool.pending[index] for pool in pools if index < len(pool.pending)))
            yield family
        family = GaugeMetricFamily(
            "bookkeeper_server_BookieReadThreadPool_max_queue_size",
            "maxPendingReadRequestsPerThread: reads past it are rejected",
        )
        family.add_metric([], max((pool.pending_per_thread_max for pool in pools), default=0))
        yield family


REGISTRY.register(_ReadPoolQueues())
