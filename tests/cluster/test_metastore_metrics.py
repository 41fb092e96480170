"""Goal: the metastore serves /metrics on its own HTTP port (the ``http=`` of its READY line)
with ZooKeeper's names — keys, ephemeral keys, sessions, connections, watches, read and update
latency, WAL fsync and snapshot time — and its clients count their calls with Pulsar's names.

Method: a real metastore process (``snapCount=20`` so writes roll a snapshot) and a client in
the test process; the metastore's /metrics is scraped, the client's values read from the test
process's registry."""

from __future__ import annotations

import asyncio

import prometheus_client

from minipulsar.metadata import MetadataStore
from tests.support.fixtures import metastore_fixture
from tests.support.process import ServerProcess, wait_for
from tests.support.web import metrics_text, sample_value

metastore = metastore_fixture(settings={"snapCount": 20})


async def test_metastore_exports_zookeepers_metrics_on_its_http_port(
    metastore: ServerProcess, store: MetadataStore
) -> None:
    assert metastore.http_port > 0
    puts_before = prometheus_client.REGISTRY.get_sample_value(
        "pulsar_metadata_store_ops_latency_ms_count", {"name": "metadata-store", "type": "put", "status": "success"}
    )
    store.watch("/m", lambda _: None)
    for i in range(30):
        await store.put(f"/m/k{i}", b"v" * 10)
    await store.put("/m/mine", b"", ephemeral=True)
    assert await store.children("/m")

    text = await asyncio.to_thread(metrics_text, metastore)

    def value(name: str, **labels: str) -> float:
        found = sample_value(text, name, labels)
        assert found is not None, f"{name} {labels} missing from the metastore's /metrics"
        return found

    assert value("znode_count") >= 33  # root, /m, 30 keys, the ephemeral one
    assert value("ephemerals_count") == 1
    assert value("global_sessions") >= 1 and value("num_alive_connections") >= 1
    assert value("watch_count") >= 1
    assert value("updatelatency_count") >= 31 and value("readlatency_count") >= 1
    assert value("avg_latency") > 0
    assert value("minipulsar_metastore_request_latency_ms_count", type="MD_PUT") >= 31
    assert value("fsynctime_count") >= 1
    assert value("snapshottime_count") >= 2  # at start, and after 20 changes

    puts_after = prometheus_client.REGISTRY.get_sample_value(
        "pulsar_metadata_store_ops_latency_ms_count", {"name": "metadata-store", "type": "put", "status": "success"}
    )
    assert puts_after == (puts_before or 0) + 31


async def test_ephemeral_keys_leave_the_gauges_with_their_session(
    metastore: ServerProcess, store: MetadataStore
) -> None:
    await store.put("/e/one", b"", ephemeral=True)

    async def ephemerals() -> float | None:
        return sample_value(await asyncio.to_thread(metrics_text, metastore), "ephemerals_count")

    async def none_left() -> bool:
        return await ephemerals() == 0

    assert await ephemerals() == 1
    await store.close()
    await wait_for(none_left, 10, message="the closed session's ephemeral key still counted")
