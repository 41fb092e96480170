"""Load reports, leader election and auto split on real brokers."""

from __future__ import annotations

import json
from pathlib import Path

from minipulsar import Client
from minipulsar.metadata import open_metadata_store
from tests.support.cluster import make_cluster
from tests.support.process import wait_for
from tests.support.web import broker_web_url, get_json, metrics_text, sample_value

FAST = {
    "loadBalancerReportUpdateMinIntervalMillis": 200,
    "loadBalancerHostUsageCheckIntervalMinutes": 0.005,
    "loadBalancerSheddingIntervalMinutes": 0.02,
    "loadBalancerSheddingEnabled": False,
    "statsUpdateFrequencyInSecs": 0.5,
}


async def test_a_broker_reports_its_bundles_traffic_and_usage(tmp_path: Path) -> None:
    """Goal: the broker's /loadbalance/brokers value is a LocalBrokerData with the traffic of its
    bundles. Method: one producer publishing 1 KiB messages; read the key until it shows the
    topic's bundle with a message rate, then check the usages and the lb metrics."""
    settings = {**FAST, "loadBalancerOverrideBrokerNicSpeedGbps": 0.001, "defaultNumberOfNamespaceBundles": 1}
    async with make_cluster(tmp_path, bookies=1, brokers=1, broker_settings=settings) as cluster:
        store = await open_metadata_store(cluster.metadata_url)
        key = f"/loadbalance/brokers/{cluster.broker_id(0)}"
        try:
            async with Client(cluster.service_url) as client:
                producer = await client.create_producer("persistent://public/default/reported")

                async def reported() -> dict | None:
                    for _ in range(20):
                        await producer.send(b"x" * 1024)
                    report = json.loads((await store.get(key)).value)
                    return report if report["msgRateIn"] > 0 else None

                await wait_for(reported, timeout_s=20, message="the report never showed traffic")
                report = await reported()
        finally:
            await store.close()
        bundle = "public/default/0x00000000_0xffffffff"
        assert report["pulsarServiceUrl"] == cluster.service_url
        assert bundle in report["bundles"] and report["numBundles"] == 1
        assert report["lastStats"][bundle]["topics"] == 1 and report["lastStats"][bundle]["producerCount"] == 1
        assert report["lastStats"][bundle]["msgThroughputIn"] > 0
        assert report["bandwidthIn"]["limit"] == 1000 and report["bandwidthIn"]["usage"] > 0  # kbit/s
        assert report["cpu"]["limit"] >= 100 and report["memory"]["usage"] > 0
        metrics = metrics_text(cluster.brokers[0])
        assert sample_value(metrics, "pulsar_lb_bandwidth_in_usage") > 0
        assert sample_value(metrics, "pulsar_lb_is_leader") == 1.0  # alone: it leads
        assert sample_value(metrics, "pulsar_lb_bundles_count", {"broker": cluster.broker_id(0)}) == 1


async def test_the_leader_moves_when_the_leading_broker_dies(tmp_path: Path) -> None:
    """Goal: /loadbalance/leader is re-elected when the leader's session ends. Method: 2 brokers;
    SIGKILL the leader; the other one leads within the session timeout (2 s) plus slack and counts
    the change."""
    async with make_cluster(tmp_path, bookies=1, brokers=2, broker_settings=FAST) as cluster:
        store = await open_metadata_store(cluster.metadata_url)
        try:

            async def leader() -> str | None:
                found = await store.get("/loadbalance/leader")
                return json.loads(found.value)["brokerId"] if found is not None else None

            await wait_for(leader, timeout_s=10, message="no leader elected")
            first = await leader()
            dying = [cluster.broker_id(i) for i in range(2)].index(first)
            survivor = 1 - dying
            await cluster.kill_broker(dying)
            await wait_for(
                lambda: _leads(leader, cluster.broker_id(survivor)),
                timeout_s=15,
                message="the surviving broker did not take over",
            )
        finally:
            await store.close()
        metrics = metrics_text(cluster.brokers[survivor])
        assert sample_value(metrics, "pulsar_lb_is_leader") == 1.0
        assert sample_value(metrics, "pulsar_lb_leader_changes_total") >= 2


async def _leads(leader, expected: str) -> bool:
    return await leader() == expected


async def test_the_leader_splits_a_bundle_with_too_many_topics(tmp_path: Path) -> None:
    """Goal: loadBalancerAutoBundleSplitEnabled splits a bundle over loadBalancerNamespaceBundleMaxTopics.
    Method: 2 brokers, namespace with 1 bundle, max 2 topics per bundle; load 3 topics; the
    namespace ends with 2 bundles and the leader counts the split."""
    settings = {
        **FAST,
        "loadBalancerAutoBundleSplitEnabled": True,
        "loadBalancerNamespaceBundleMaxTopics": 2,
        "defaultNumberOfNamespaceBundles": 1,
    }
    async with make_cluster(tmp_path, bookies=1, brokers=2, broker_settings=settings) as cluster:
        async with Client(cluster.service_url) as client:
            for i in range(3):
                producer = await client.create_producer(f"persistent://public/default/split-{i}")
                await producer.send(b"x")

            def bundles() -> int:
                return (
                    len(get_json(f"{broker_web_url(cluster)}/admin/v2/namespaces/public/default/bundles")["boundaries"])
                    - 1
                )

            await wait_for(lambda: bundles() >= 2, timeout_s=20, message="the bundle was not split")

        def splits_counted() -> float:  # the leader counts once the owner answered (after unloading the halves)
            return max(
                sample_value(metrics_text(cluster.brokers[i]), "pulsar_lb_bundles_split_total") for i in range(2)
            )

        await wait_for(lambda: splits_counted() >= 1, timeout_s=10, message="the leader did not count the split")


async def test_the_load_report_endpoint_answers_the_report_as_of_now(tmp_path: Path) -> None:
    """Goal: GET /admin/v2/broker-stats/load-report is the broker's current report (as Pulsar's,
    which generates one), not the copy the write policy last let into the store.
    Method: a write policy that rewrites the key only every 15 minutes unless usage moves by
    100 %; the endpoint's ``lastUpdate`` advances past the stored one while the key stays."""
    settings = {
        **FAST,
        "loadBalancerReportUpdateThresholdPercentage": 100,
        "loadBalancerReportUpdateMaxIntervalMinutes": 15,
    }
    async with make_cluster(tmp_path, bookies=1, brokers=1, broker_settings=settings) as cluster:
        store = await open_metadata_store(cluster.metadata_url)
        try:
            found = await store.get(f"/loadbalance/brokers/{cluster.broker_id(0)}")
            assert found is not None
            stored = json.loads(found.value)
            url = f"{broker_web_url(cluster)}/admin/v2/broker-stats/load-report"

            def advanced() -> bool:
                return int(get_json(url)["lastUpdate"]) > stored["lastUpdate"] + 1000

            await wait_for(advanced, timeout_s=10, interval_s=0.2, message="the endpoint answers the stored report")
            again = await store.get(f"/loadbalance/brokers/{cluster.broker_id(0)}")
            assert again is not None and again.version == found.version
            live = get_json(url)
            assert live["pulsarServiceUrl"] == stored["pulsarServiceUrl"] and live["bundles"] == stored["bundles"]
        finally:
            await store.close()
