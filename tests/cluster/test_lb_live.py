"""Live check of the load manager on 3 real brokers.

All bundles start on broker 0 (the others are stopped while the topics are created and their
producers attach); then brokers 1 and 2 come back, and ThresholdShedder, run every 3 seconds by
the leader, unloads bundles from broker 0 to them while the producers keep sending.

The brokers report bandwidth against a tiny NIC (``loadBalancerOverrideBrokerNicSpeedGbps``)
so that a few hundred KB/s of test traffic reads as an overloaded broker.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from minipulsar import Client
from minipulsar.metadata import open_metadata_store
from tests.support.cluster import make_cluster
from tests.support.process import wait_for
from tests.support.web import metrics_text, sample_value

SETTINGS = {
    "loadBalancerLoadSheddingStrategy": "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
    "loadBalancerSheddingIntervalMinutes": 0.05,
    "loadBalancerSheddingGracePeriodMinutes": 10,
    "loadBalancerReportUpdateMinIntervalMillis": 300,
    "loadBalancerHostUsageCheckIntervalMinutes": 0.01,
    "loadBalancerOverrideBrokerNicSpeedGbps": 0.0001,  # 100 kbit/s: the test's traffic overloads it
    "loadBalancerBundleUnloadMinThroughputThreshold": 0,
    "statsUpdateFrequencyInSecs": 0.5,
    "defaultNumberOfNamespaceBundles": 4,
}
TOPICS = [f"persistent://public/default/lb-live-{i}" for i in range(8)]


async def reported_bundles(store, broker_id: str) -> set[str]:
    found = await store.get(f"/loadbalance/brokers/{broker_id}")
    return set(json.loads(found.value).get("bundles", [])) if found is not None else set()


async def send_counting_acks(producer, acked: list[int], stop: asyncio.Event) -> None:
    payload = b"x" * 1024
    while not stop.is_set():
        await producer.send(payload)
        acked[0] += 1


async def test_threshold_shedder_moves_bundles_off_the_loaded_broker(tmp_path: Path) -> None:
    """Goal: with every bundle on one broker and ThresholdShedder on, the leader unloads bundles to
    the two idle brokers within a few shedding intervals while producers keep publishing.
    Method: 3 brokers; stop brokers 1 and 2; create 8 topics (4 bundles) with a producer each
    through broker 0; start brokers 1 and 2; wait until their load reports list bundles; check
    every producer still gets acks after the move and the leader counted the unloads."""
    async with make_cluster(tmp_path, bookies=1, brokers=3, broker_settings=SETTINGS) as cluster:
        await asyncio.gather(cluster.stop_broker(1), cluster.stop_broker(2))
        store = await open_metadata_store(cluster.metadata_url)
        stop = asyncio.Event()
        try:
            async with Client(cluster.service_url) as client:
                producers = [await client.create_producer(topic) for topic in TOPICS]
                counts = [[0] for _ in producers]
                senders = [asyncio.ensure_future(send_counting_acks(p, c, stop)) for p, c in zip(producers, counts)]
                first = cluster.broker_id(0)
                await wait_for(
                    lambda: _has_bundles(store, first, 4),
                    timeout_s=20,
                    message="broker 0 does not report the 4 bundles",
                )
                await asyncio.gather(cluster.start_broker(1), cluster.start_broker(2))
                others = [cluster.broker_id(1), cluster.broker_id(2)]

                async def moved() -> bool:
                    return any([await reported_bundles(store, b) for b in others])

                await wait_for(
                    moved, timeout_s=30, interval_s=0.2, message="no bundle moved to broker 1 or 2 within 30 s"
                )
                before = [c[0] for c in counts]
                await wait_for(
                    lambda: all(c[0] > b + 5 for c, b in zip(counts, before)),
                    timeout_s=30,
                    message="some producer stopped getting acks after its bundle moved",
                )
                stop.set()
                await asyncio.gather(*senders)
        finally:
            stop.set()
            await store.close()
        texts = [metrics_text(cluster.brokers[i]) for i in range(3)]
        leaders = [i for i, text in enumerate(texts) if sample_value(text, "pulsar_lb_is_leader") == 1.0]
        assert len(leaders) == 1, "\n".join(line for t in texts for line in t.splitlines() if "pulsar_lb" in line)
        assert (
            sample_value(
                metrics_text(cluster.brokers[leaders[0]]),
                "pulsar_lb_unload_bundle_total",
                {"cluster": "standalone", "reason": "Overloaded"},
            )
            >= 1
        )


async def _has_bundles(store, broker: str, count: int) -> bool:
    return len(await reported_bundles(store, broker)) >= count
