"""Goal: the metrics the operator's dashboards read are on each process's /metrics, every one
with a sample before the event it counts, and the latency ones count what the cluster does:

- broker: ``pulsar_storage_write_latency_ms`` (histogram), ``pulsar_broker_publish_latency``
  (summary), ``pulsar_lb_unload_bundle_total``, then per persistent topic Pulsar's
  ``pulsar_storage_write_latency_le_*`` / ``_count`` / ``_sum`` of the last stats interval;
- bookie: ``bookie_journal_JOURNAL_QUEUE_LATENCY``, ``bookkeeper_server_READ_ENTRY_BLOCKED``
  and ``…_BLOCKED_WAIT``, ``bookie_ledger_dir_<path>_usage``;
- every process kind (broker, bookie, metastore, autorecovery): ``python_gc_collection_seconds``.

Method: one cluster (metastore, one bookie, one broker, ``statsUpdateFrequencyInSecs=0.2``)
for the module, scraped first before any message; then sends to a persistent and a
non-persistent topic, and the counts read again; an autorecovery process started beside it."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from minipulsar import Client
from minipulsar.bookie.metrics import ledger_dir_usage_name
from tests.support.cluster import ProcessCluster
from tests.support.fixtures import cluster_fixture
from tests.support.process import ServerProcess, started, wait_for
from tests.support.web import metrics_text, required_sample, sample_value

pytestmark = pytest.mark.asyncio(loop_scope="module")

cluster = cluster_fixture(per_module=True, broker_settings={"statsUpdateFrequencyInSecs": 0.2})

CLUSTER = {"cluster": "standalone"}
GENERATIONS = ({"generation": "0"}, {"generation": "1"}, {"generation": "2"})
QUANTILES = ("0.0", "0.5", "0.95", "0.99", "0.999", "0.9999", "1.0")
WRITE_LATENCY_GAUGES = tuple(
    f"pulsar_storage_write_latency_{suffix}"
    for suffix in (
        *(f"le_{bound}" for bound in ("0_5", "1", "5", "10", "20", "50", "100", "200", "1000", "overflow")),
        "count",
        "sum",
    )
)
SENDS = 20


async def scrape(process: ServerProcess) -> str:
    return await asyncio.to_thread(metrics_text, process)


async def send_to(cluster: ProcessCluster, *topics: str) -> None:
    """:data:`SENDS` messages to each topic, one SEND each, every one acknowledged."""
    async with Client(cluster.service_url) as client:
        for topic in topics:
            producer = await client.create_producer(topic, batching_enabled=False)
            for i in range(SENDS):
                await producer.send(f"m{i}".encode())
            await producer.close()


def assert_gc_pauses_exported(text: str) -> None:
    for generation in GENERATIONS:
        required_sample(text, "python_gc_collection_seconds_count", generation)
        required_sample(text, "python_gc_collection_seconds_bucket", {**generation, "le": "+Inf"})


async def test_broker_exports_storage_and_publish_latency_from_start_and_counts_sends(
    cluster: ProcessCluster,
) -> None:
    assert cluster.broker is not None
    fresh = await scrape(cluster.broker)
    assert_gc_pauses_exported(fresh)
    writes_before = required_sample(fresh, "pulsar_storage_write_latency_ms_count", CLUSTER)
    required_sample(fresh, "pulsar_storage_write_latency_ms_bucket", {**CLUSTER, "le": "0.5"})
    publishes_before = required_sample(fresh, "pulsar_broker_publish_latency_count", CLUSTER)
    required_sample(fresh, "pulsar_broker_publish_latency_sum", CLUSTER)
    for quantile in QUANTILES:
        required_sample(fresh, "pulsar_broker_publish_latency", {**CLUSTER, "quantile": quantile})
    for reason in ("Overloaded", "Underloaded", "Balanced"):
        required_sample(fresh, "pulsar_lb_unload_bundle_total", {**CLUSTER, "reason": reason})

    persistent, non_persistent = "persistent://public/default/op-metrics", "non-persistent://public/default/op-metrics"
    await send_to(cluster, persistent, non_persistent)

    topic_labels = {**CLUSTER, "namespace": "public/default", "topic": persistent}

    async def a_stats_round_saw_the_sends() -> bool:
        text = await scrape(cluster.broker)
        count = sample_value(text, "pulsar_storage_write_latency_count", topic_labels)
        return (
            count is not None
            and count > 0
            and not math.isnan(required_sample(text, "pulsar_broker_publish_latency", {**CLUSTER, "quantile": "0.5"}))
        )

    await wait_for(a_stats_round_saw_the_sends, timeout_s=10, message="no stats round counted the sends")
    text = await scrape(cluster.broker)
    assert required_sample(text, "pulsar_storage_write_latency_ms_count", CLUSTER) >= writes_before + SENDS
    assert required_sample(text, "pulsar_storage_write_latency_ms_sum", CLUSTER) > 0
    assert required_sample(text, "pulsar_broker_publish_latency_count", CLUSTER) >= publishes_before + 2 * SENDS
    assert required_sample(text, "pulsar_broker_publish_latency_sum", CLUSTER) > 0
    for name in WRITE_LATENCY_GAUGES:
        required_sample(text, name, topic_labels)
    non_persistent_labels = {**CLUSTER, "namespace": "public/default", "topic": non_persistent}
    assert sample_value(text, "pulsar_storage_write_latency_count", non_persistent_labels) is None, "nothing stored"


async def test_bookie_exports_journal_queue_read_blocking_and_dir_usage(cluster: ProcessCluster) -> None:
    bookie = cluster.bookies[0]
    queued_before = required_sample(
        await scrape(bookie), "bookie_journal_JOURNAL_QUEUE_LATENCY_count", {"success": "true"}
    )
    await send_to(cluster, "persistent://public/default/op-metrics-bookie")
    text = await scrape(bookie)
    assert_gc_pauses_exported(text)
    assert (
        required_sample(text, "bookie_journal_JOURNAL_QUEUE_LATENCY_count", {"success": "true"})
        >= queued_before + SENDS
    )
    required_sample(text, "bookie_journal_JOURNAL_QUEUE_LATENCY_bucket", {"success": "true", "le": "+Inf"})
    required_sample(text, "bookie_journal_JOURNAL_QUEUE_LATENCY_count", {"success": "false"})
    assert required_sample(text, "bookkeeper_server_READ_ENTRY_BLOCKED") == 0, "maxReadsInProgressLimit is 0: unlimited"
    for success in ("true", "false"):
        required_sample(text, "bookkeeper_server_READ_ENTRY_BLOCKED_WAIT_count", {"success": success})
    ledger_dir = cluster.bookie_dirs(0)[1]
    assert 0 < required_sample(text, ledger_dir_usage_name(str(ledger_dir))) <= 1


async def test_metastore_exports_gc_pauses(cluster: ProcessCluster) -> None:
    assert cluster.metastore is not None
    assert_gc_pauses_exported(await scrape(cluster.metastore))


async def test_autorecovery_exports_gc_pauses(cluster: ProcessCluster, tmp_path: Path) -> None:
    process = ServerProcess(
        "autorecovery",
        ["--metadata-url", cluster.metadata_url, "--http-port", "0", "--set", "zkTimeout=2000"],
        tmp_path / "autorecovery.log",
    )
    async with started(process):
        assert_gc_pauses_exported(await scrape(process))
