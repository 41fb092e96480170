"""The Grafana dashboards of docker/grafana/dashboards/, written from the panel lists below.

    python docker/grafana/generate_dashboards.py          # rewrite the JSON files
    python docker/grafana/generate_dashboards.py --check  # exit 1 when a file is out of date

One dashboard per thing the tuning reports watch (broker, bookie, BookKeeper client, load
balancer, metadata store); each panel is a title, a unit and its PromQL queries. The JSON is
Grafana's dashboard model (schema 39, Grafana 10/11), provisioned from
docker/grafana/provisioning/ against the data source whose uid is ``prometheus``.

Conventions the queries keep (tests/unit/test_dashboards.py checks the first two, and
tests/cluster/test_prometheus_dashboards.py runs every query against a real Prometheus):

- a histogram is read with ``histogram_quantile`` over ``rate(…_bucket[$__rate_interval])``
  summed ``by (le, …)``; a Summary (``pulsar_broker_publish_latency``) by its ``quantile`` label;
- counters are read with ``rate``/``increase``, never raw;
- the only Grafana variable is ``$__rate_interval``;
- legends name the scrape target (``{{instance}}``) or the series' own label.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

DASHBOARDS_DIR = Path(__file__).resolve().parent / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "prometheus"}
RATE = "$__rate_interval"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = "{{instance}}"


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str
    queries: Sequence[Query]
    description: str = ""


@dataclass(frozen=True)
class Row:
    title: str
    panels: Sequence[Panel]


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    description: str
    rows: Sequence[Row] = field(default_factory=tuple)


def quantile(q: float, histogram: str, by: str = "instance", selector: str = "") -> str:
    """``histogram_quantile`` of a histogram's buckets over the rate interval, per ``by``."""
    return f"histogram_quantile({q}, sum by (le, {by}) (rate({histogram}_bucket{selector}[{RATE}])))"


def p50_p99(histogram: str, *, by: str = "instance", selector: str = "", legend: str = "{{instance}}") -> list[Query]:
    return [
        Query(quantile(0.5, histogram, by, selector), f"p50 {legend}"),
        Query(quantile(0.99, histogram, by, selector), f"p99 {legend}"),
    ]


def rate(counter: str, by: str = "instance") -> str:
    return f"sum by ({by}) (rate({counter}[{RATE}]))"


BK_CLIENT = "pulsar_managedLedger_client_bookkeeper_client_"
OK = '{success="true"}'
BROKERS = '{job="broker"}'
"""The brokers' BookKeeper client (bookies run one too, for autorecovery)."""
BROKERS_OK = '{job="broker",success="true"}'
QUARANTINES = rate(f"{BK_CLIENT}BOOKIE_QUARANTINE{BROKERS}")
QUARANTINE_SKIPS = rate(f"{BK_CLIENT}BOOKIE_QUARANTINE_SKIP{BROKERS}")

BROKER = Dashboard(
    uid="minipulsar-broker",
    title="minipulsar / Broker",
    description="Messages and bytes in and out, publish and storage latency, entry cache, publish throttling, backlog.",
    rows=(
        Row(
            "Traffic",
            (
                Panel("Messages in", "short", [Query("sum by (instance) (pulsar_broker_rate_in)")], "msg/s published"),
                Panel(
                    "Messages out", "short", [Query("sum by (instance) (pulsar_broker_rate_out)")], "msg/s dispatched"
                ),
                Panel("Bytes in", "Bps", [Query("sum by (instance) (pulsar_broker_throughput_in)")]),
                Panel("Bytes out", "Bps", [Query("sum by (instance) (pulsar_broker_throughput_out)")]),
                Panel(
                    "Top topics by messages in",
                    "short",
                    [Query(f"topk(10, sum by (topic) (rate(pulsar_in_messages_total[{RATE}])))", "{{topic}}")],
                ),
                Panel(
                    "Topics, producers, consumers",
                    "short",
                    [
                        Query("sum by (instance) (pulsar_topics_count)", "topics {{instance}}"),
                        Query("sum by (instance) (pulsar_producers_count)", "producers {{instance}}"),
                        Query("sum by (instance) (pulsar_consumers_count)", "consumers {{instance}}"),
                    ],
                ),
            ),
        ),
        Row(
            "Latency",
            (
                Panel(
                    "Publish latency",
                    "ms",
                    [
                        Query('pulsar_broker_publish_latency{quantile="0.5"}', "p50 {{instance}}"),
                        Query('pulsar_broker_publish_latency{quantile="0.99"}', "p99 {{instance}}"),
                    ],
                    "SEND received to receipt sent (Pulsar's Summary, one stats interval)",
                ),
                Panel(
                    "Storage write latency",
                    "ms",
                    p50_p99("pulsar_storage_write_latency_ms"),
                    "Add to the managed ledger until durable on the write quorum",
                ),
                Panel(
                    "Storage write latency buckets (Pulsar's exposition)",
                    "short",
                    [
                        Query(f"sum(pulsar_storage_write_latency_le_{bucket})", f"≤ {label} ms")
                        for bucket, label in (("1", "1"), ("5", "5"), ("10", "10"), ("50", "50"), ("200", "200"))
                    ]
                    + [Query("sum(pulsar_storage_write_latency_le_overflow)", "> 1000 ms")],
                    "Adds per bucket in the last stats interval, as Pulsar's community dashboards read them",
                ),
                Panel(
                    "BookKeeper add latency (broker side)", "ms", p50_p99(f"{BK_CLIENT}ADD_ENTRY", selector=BROKERS_OK)
                ),
            ),
        ),
        Row(
            "Entry cache",
            (
                Panel(
                    "Entry cache hit rate",
                    "percentunit",
                    [
                        Query(
                            "sum by (instance) (pulsar_ml_cache_hits_rate) / (sum by (instance) "
                            "(pulsar_ml_cache_hits_rate) + sum by (instance) (pulsar_ml_cache_misses_rate))"
                        )
                    ],
                ),
                Panel("Entry cache size", "bytes", [Query("sum by (instance) (pulsar_ml_cache_used_size)")]),
                Panel(
                    "Entry cache hits, misses, evictions",
                    "ops",
                    [
                        Query(rate("pulsar_ml_cache_hits_total"), "hits {{instance}}"),
                        Query(rate("pulsar_ml_cache_misses_total"), "misses {{instance}}"),
                        Query(rate("pulsar_ml_cache_evictions_total"), "evictions {{instance}}"),
                    ],
                ),
            ),
        ),
        Row(
            "Publish throttling and backlog",
            (
                Panel(
                    "Publish buffer",
                    "bytes",
                    [
                        Query("pulsar_broker_publish_buffer_usage", "in use {{instance}}"),
                        Query("pulsar_broker_publish_buffer_limit", "limit {{instance}}"),
                    ],
                    "maxMessagePublishBufferSizeInMB: bytes read from producers and not yet persisted",
                ),
                Panel(
                    "Throttled connections",
                    "short",
                    [
                        Query("pulsar_broker_throttled_connections", "throttled {{instance}}"),
                        Query(rate("pulsar_broker_publish_buffer_pauses_total"), "pauses/s {{instance}}"),
                    ],
                ),
                Panel("Backlog", "short", [Query("sum by (instance) (pulsar_broker_msg_backlog)")]),
                Panel(
                    "Top subscriptions by backlog",
                    "short",
                    [
                        Query(
                            "topk(10, sum by (topic, subscription) (pulsar_subscription_back_log))",
                            "{{topic}} {{subscription}}",
                        )
                    ],
                ),
            ),
        ),
        Row(
            "Process",
            (
                Panel("CPU", "percentunit", [Query(rate("process_cpu_seconds_total"))], "cores in use"),
                Panel("Resident memory", "bytes", [Query("process_resident_memory_bytes")]),
                Panel(
                    "GC pause time",
                    "percentunit",
                    [Query(rate("python_gc_collection_seconds_sum"))],
                    "share of wall time spent in garbage collection",
                ),
                Panel(
                    "GC pause",
                    "s",
                    p50_p99(
                        "python_gc_collection_seconds",
                        by="instance, generation",
                        legend="gen {{generation}} {{instance}}",
                    ),
                ),
            ),
        ),
    ),
)

BOOKIE = Dashboard(
    uid="minipulsar-bookie",
    title="minipulsar / Bookie",
    description="Add and read latency, journal, write cache, request queues, read throttles, disks, state.",
    rows=(
        Row(
            "Requests",
            (
                Panel("Add entry latency", "ms", p50_p99("bookkeeper_server_ADD_ENTRY_REQUEST", selector=OK)),
                Panel("Read entry latency", "ms", p50_p99("bookkeeper_server_READ_ENTRY_REQUEST", selector=OK)),
                Panel(
                    "Requests in progress",
                    "short",
                    [
                        Query("bookkeeper_server_ADD_ENTRY_IN_PROGRESS", "adds {{instance}}"),
                        Query("bookkeeper_server_READ_ENTRY_IN_PROGRESS", "reads {{instance}}"),
                    ],
                ),
                Panel(
                    "Bytes written and read",
                    "Bps",
                    [
                        Query(rate("bookie_WRITE_BYTES"), "written {{instance}}"),
                        Query(rate("bookie_READ_BYTES"), "read {{instance}}"),
                    ],
                ),
            ),
        ),
        Row(
            "Journal",
            (
                Panel("Journal write throughput", "Bps", [Query(rate("bookie_journal_JOURNAL_WRITE_BYTES"))]),
                Panel("Journal add latency", "ms", p50_p99("bookie_journal_JOURNAL_ADD_ENTRY")),
                Panel("Journal fsync latency", "ms", p50_p99("bookie_journal_JOURNAL_SYNC")),
                Panel(
                    "Journal creation latency",
                    "ms",
                    p50_p99("bookie_journal_JOURNAL_CREATION_LATENCY"),
                    "Creating (or pre-allocating) a new journal file",
                ),
                Panel(
                    "Journal queue",
                    "short",
                    [Query("bookie_journal_JOURNAL_QUEUE_SIZE")],
                    "adds waiting for the journal writer",
                ),
                Panel("Journal queue latency", "ms", p50_p99("bookie_journal_JOURNAL_QUEUE_LATENCY", selector=OK)),
            ),
        ),
        Row(
            "Ledger storage",
            (
                Panel("Write cache size", "bytes", [Query("sum by (instance) (bookie_write_cache_size)")]),
                Panel("Write cache flush latency", "ms", p50_p99("bookie_flush")),
                Panel(
                    "Entry read from entry log",
                    "ms",
                    p50_p99("bookie_read_entry"),
                    "a read that missed the write and read caches",
                ),
                Panel(
                    "Ledger disk usage",
                    "percentunit",
                    [Query('{__name__=~"bookie_ledger_dir_.+_usage"}', "{{instance}} {{__name__}}")],
                ),
            ),
        ),
        Row(
            "Queues and throttles",
            (
                Panel(
                    "Read thread pool queues",
                    "short",
                    [Query('sum by (instance) ({__name__=~"bookkeeper_server_BookieReadThreadPool_queue_[0-9]+"})')],
                ),
                Panel(
                    "Read queue wait time",
                    "ms",
                    p50_p99("bookkeeper_server_BookieReadThreadPool_task_queued"),
                ),
                Panel(
                    "Read throttles",
                    "ops",
                    [
                        Query(rate("bookkeeper_server_READ_ENTRY_BLOCKED"), "blocked {{instance}}"),
                        Query(rate("bookkeeper_server_READ_ENTRY_REJECTED"), "rejected {{instance}}"),
                    ],
                    "maxReadsInProgressLimit reached (blocked), read queue full (rejected)",
                ),
                Panel("Read blocked wait", "ms", p50_p99("bookkeeper_server_READ_ENTRY_BLOCKED_WAIT", selector=OK)),
                Panel(
                    "Write throttles",
                    "ops",
                    [
                        Query(rate("bookie_throttled_write_requests"), "throttled {{instance}}"),
                        Query(rate("bookie_rejected_write_requests"), "rejected {{instance}}"),
                    ],
                    "write cache full",
                ),
            ),
        ),
        Row(
            "State",
            (
                Panel(
                    "Writable (1) or read-only (0)",
                    "short",
                    [Query("bookie_SERVER_STATUS")],
                ),
                Panel("Writable ledger dirs", "short", [Query("bookie_ledger_writable_dirs")]),
                Panel("Ledgers stored", "short", [Query("bookie_ledgers_count")]),
                Panel("GC pause time", "percentunit", [Query(rate("python_gc_collection_seconds_sum"))]),
            ),
        ),
    ),
)

BOOKKEEPER_CLIENT = Dashboard(
    uid="minipulsar-bookkeeper-client",
    title="minipulsar / BookKeeper client",
    description="The brokers' BookKeeper client: quarantine, pending adds, ensemble changes, speculative reads.",
    rows=(
        Row(
            "Quarantine",
            (
                Panel("Quarantined bookies", "short", [Query(f"{BK_CLIENT}QUARANTINED_BOOKIES{BROKERS}")]),
                Panel(
                    "Quarantine ratio",
                    "percentunit",
                    [Query(f"{QUARANTINES} / ({QUARANTINES} + {QUARANTINE_SKIPS})")],
                    "bookkeeperClientQuarantineRatio in effect: quarantines / (quarantines + skipped)",
                ),
                Panel(
                    "Quarantine decisions",
                    "ops",
                    [
                        Query(rate(BK_CLIENT + "BOOKIE_QUARANTINE" + BROKERS), "quarantined {{instance}}"),
                        Query(rate(BK_CLIENT + "BOOKIE_QUARANTINE_SKIP" + BROKERS), "skipped {{instance}}"),
                    ],
                ),
            ),
        ),
        Row(
            "Adds",
            (
                Panel("Pending adds", "short", [Query(f"{BK_CLIENT}NUM_PENDING_ADD{BROKERS}")]),
                Panel("Pending add bytes", "bytes", [Query(f"{BK_CLIENT}PENDING_ADD_BYTES{BROKERS}")]),
                Panel("Add latency", "ms", p50_p99(f"{BK_CLIENT}ADD_ENTRY", selector=BROKERS_OK)),
                Panel(
                    "Pending requests per bookie",
                    "short",
                    [Query(f"sum by (bookie) ({BK_CLIENT}BOOKIE_PENDING_REQUESTS{BROKERS})", "{{bookie}}")],
                ),
            ),
        ),
        Row(
            "Ensembles and reads",
            (
                Panel("Ensemble changes", "ops", [Query(rate(f"{BK_CLIENT}NUM_ENSEMBLE_CHANGE{BROKERS}"))]),
                Panel("Speculative reads", "ops", [Query(rate(f"{BK_CLIENT}SPECULATIVE_READ_COUNT{BROKERS}"))]),
                Panel("Read latency", "ms", p50_p99(f"{BK_CLIENT}READ_ENTRY", selector=BROKERS_OK)),
            ),
        ),
    ),
)

LOAD_BALANCER = Dashboard(
    uid="minipulsar-load-balancer",
    title="minipulsar / Load balancer",
    description="Per-broker resource usage as the load manager sees it, bundles per broker, unloads and splits.",
    rows=(
        Row(
            "Resource usage (reported by the leader)",
            (
                Panel("CPU usage", "percentunit", [Query("max by (broker) (pulsar_lb_cpu_usage)", "{{broker}}")]),
                Panel("Memory usage", "percentunit", [Query("max by (broker) (pulsar_lb_memory_usage)", "{{broker}}")]),
                Panel(
                    "Bandwidth usage",
                    "percentunit",
                    [
                        Query("max by (broker) (pulsar_lb_bandwidth_in_usage)", "in {{broker}}"),
                        Query("max by (broker) (pulsar_lb_bandwidth_out_usage)", "out {{broker}}"),
                    ],
                ),
                Panel(
                    "Shedder's view: max resource usage",
                    "percentunit",
                    [
                        Query('max by (broker) (pulsar_lb_resource_usage{feature="max"})', "now {{broker}}"),
                        Query('max by (broker) (pulsar_lb_resource_usage{feature="max_ema"})', "smoothed {{broker}}"),
                    ],
                    "what ThresholdShedder compares with the cluster average plus "
                    "loadBalancerBrokerThresholdShedderPercentage",
                ),
            ),
        ),
        Row(
            "Bundles",
            (
                Panel("Bundles per broker", "short", [Query("sum by (instance) (pulsar_broker_bundles_count)")]),
                Panel(
                    "Shedder's decisions",
                    "short",
                    [
                        Query(f"sum(increase(pulsar_lb_unload_broker_total[{RATE}]))", "brokers unloaded"),
                        Query(f"sum(increase(pulsar_lb_unload_bundle_total[{RATE}]))", "bundles unloaded"),
                        Query(f"sum(increase(pulsar_lb_unload_failures_total[{RATE}]))", "unload failures"),
                    ],
                ),
                Panel(
                    "Bundle unloads and splits",
                    "short",
                    [
                        Query(
                            f"sum by (instance) (increase(pulsar_broker_bundle_unloads_total[{RATE}]))",
                            "unloads {{instance}}",
                        ),
                        Query(f"sum(increase(pulsar_lb_bundles_split_total[{RATE}]))", "splits"),
                    ],
                ),
                Panel("Load-balancer leader", "short", [Query("max by (broker) (pulsar_lb_is_leader)", "{{broker}}")]),
            ),
        ),
    ),
)

METADATA_STORE = Dashboard(
    uid="minipulsar-metadata-store",
    title="minipulsar / Metadata store",
    description="Clients' metadata operations (brokers and bookies) and the metastore's or ZooKeeper's own view.",
    rows=(
        Row(
            "Clients",
            (
                Panel(
                    "Operation latency p99",
                    "ms",
                    [
                        Query(
                            quantile(0.99, "pulsar_metadata_store_ops_latency_ms", "job, type", '{status="success"}'),
                            "{{job}} {{type}}",
                        )
                    ],
                ),
                Panel(
                    "Operations",
                    "ops",
                    [
                        Query(
                            rate("pulsar_metadata_store_ops_latency_ms_count", "job, type, status"),
                            "{{job}} {{type}} {{status}}",
                        )
                    ],
                ),
                Panel("Bytes written", "Bps", [Query(rate("pulsar_metadata_store_put_bytes_total", "job"), "{{job}}")]),
                Panel(
                    "Session events",
                    "short",
                    [
                        Query(
                            f"sum by (job, event) (increase(pulsar_metadata_store_session_events_total[{RATE}]))",
                            "{{job}} {{event}}",
                        )
                    ],
                ),
            ),
        ),
        Row(
            "Server",
            (
                Panel(
                    "Server latency",
                    "ms",
                    [Query('avg_latency{job="metastore"}', "avg"), Query('max_latency{job="metastore"}', "max")],
                ),
                Panel("Znodes", "short", [Query('znode_count{job="metastore"}', "znodes")]),
                Panel(
                    "Connections and watches",
                    "short",
                    [
                        Query('num_alive_connections{job="metastore"}', "connections"),
                        Query('watch_count{job="metastore"}', "watches"),
                        Query('ephemerals_count{job="metastore"}', "ephemerals"),
                    ],
                ),
                Panel(
                    "fsync time",
                    "ms",
                    [
                        Query(
                            f'rate(fsynctime_sum{{job="metastore"}}[{RATE}])'
                            f' / rate(fsynctime_count{{job="metastore"}}[{RATE}])',
                            "avg",
                        )
                    ],
                ),
            ),
        ),
    ),
)

DASHBOARDS = (BROKER, BOOKIE, BOOKKEEPER_CLIENT, LOAD_BALANCER, METADATA_STORE)

PANEL_WIDTH = 8
PANEL_HEIGHT = 8
GRID_COLUMNS = 24


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, object]:
    return {
        "id": panel_id,
        "type": "timeseries",
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": PANEL_HEIGHT, "w": PANEL_WIDTH, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": panel.unit, "custom": {"fillOpacity": 10}}, "overrides": []},
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": [
            {"refId": chr(ord("A") + index), "datasource": DATASOURCE, "expr": query.expr, "legendFormat": query.legend}
            for index, query in enumerate(panel.queries)
        ],
    }


def dashboard_json(dashboard: Dashboard) -> dict[str, object]:
    """Grafana's model of ``dashboard``: a row panel per row, its panels three to a line."""
    panels: list[dict[str, object]] = []
    y = 0
    for row in dashboard.rows:
        panels.append(
            {
                "id": len(panels) + 1,
                "type": "row",
                "title": row.title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": GRID_COLUMNS, "x": 0, "y": y},
                "panels": [],
            }
        )
        y += 1
        for index, panel in enumerate(row.panels):
            column = index % (GRID_COLUMNS // PANEL_WIDTH)
            if index and column == 0:
                y += PANEL_HEIGHT
            panels.append(_panel_json(panel, len(panels) + 1, column * PANEL_WIDTH, y))
        y += PANEL_HEIGHT
    return {
        "uid": dashboard.uid,
        "title": dashboard.title,
        "description": dashboard.description,
        "tags": ["minipulsar"],
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "10s",
        "time": {"from": "now-30m", "to": "now"},
        "timezone": "browser",
        "annotations": {"list": []},
        "templating": {"list": []},
        "links": [{"type": "dashboards", "tags": ["minipulsar"], "asDropdown": True, "title": "minipulsar"}],
        "panels": panels,
    }


def rendered() -> dict[Path, str]:
    """File → its text, for every dashboard."""
    return {
        DASHBOARDS_DIR / f"{dashboard.uid}.json": json.dumps(dashboard_json(dashboard), indent=2, ensure_ascii=False)
        + "\n"
        for dashboard in DASHBOARDS
    }


def main(argv: Sequence[str]) -> int:
    files = rendered()
    if "--check" in argv:
        stale = [path.name for path, text in files.items() if not path.exists() or path.read_text() != text]
        if stale:
            print(f"out of date (run {Path(__file__).name}): {', '.join(stale)}", file=sys.stderr)
        return 1 if stale else 0
    DASHBOARDS_DIR.mkdir(exist_ok=True)
    for path, text in files.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
