"""Topic stats, internal stats and metrics on a real cluster, with
Pulsar's field and metric names; rates come from the counters every statsUpdateFrequencyInSecs."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import pytest

from minipulsar import Client, InitialPosition
from tests.support.cluster import ProcessCluster
from tests.support.fixtures import cluster_fixture
from tests.support.process import wait_for
from tests.support.web import metrics_text, sample_value, topic_stats

TOPIC = "persistent://public/default/observed"


async def observed_stats(cluster: ProcessCluster, kind: str = "stats", topic: str = "observed") -> dict:
    return await asyncio.to_thread(topic_stats, cluster, topic, kind)


cluster = cluster_fixture(broker_settings={"statsUpdateFrequencyInSecs": 0.2})


async def test_stats_internal_stats_and_metrics_carry_pulsars_names(cluster: ProcessCluster) -> None:
    async with Client(cluster.service_url) as client:
        producer = await client.create_producer(TOPIC, producer_name="writer")
        consumer = await client.subscribe(
            TOPIC, "sub", receiver_queue_size=10, initial_position=InitialPosition.Earliest
        )
        for i in range(50):
            await producer.send(f"m-{i:02d}".encode())
        for _ in range(30):
            await consumer.acknowledge(await consumer.receive(timeout_millis=10_000))

        topic = await observed_stats(cluster)
        for field in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut", "averageMsgSize"):
            assert isinstance(topic[field], (int, float)), field
        assert topic["msgInCounter"] == 50 and topic["bytesInCounter"] > 50 * 5
        assert topic["msgOutCounter"] >= 30 and topic["bytesOutCounter"] > 0
        assert topic["storageSize"] > 0 and 0 < topic["backlogSize"] < topic["storageSize"]
        [publisher] = topic["publishers"]
        assert publisher["producerName"] == "writer" and publisher["msgInCounter"] == 50
        assert {"producerId", "address", "connectedSince", "msgRateIn", "msgThroughputIn"} <= set(publisher)
        subscription = topic["subscriptions"]["sub"]
        assert subscription["type"] == "Exclusive" and subscription["msgBacklog"] == 20
        for field in ("msgRateOut", "msgRateRedeliver", "unackedMessages", "consumers"):
            assert field in subscription, field
        [consumer_stats] = subscription["consumers"]
        assert {
            "consumerName",
            "availablePermits",
            "unackedMessages",
            "blockedConsumerOnUnackedMsgs",
            "msgRateOut",
        } <= set(consumer_stats)
        assert consumer_stats["unackedMessages"] == subscription["unackedMessages"] <= 10

        internal = await observed_stats(cluster, "internalStats")
        assert internal["entriesAddedCounter"] == 50 and internal["numberOfEntries"] == 50
        assert internal["totalSize"] == topic["storageSize"] > 0
        assert internal["currentLedgerEntries"] == 50 and internal["currentLedgerSize"] == internal["totalSize"]
        [ledger] = internal["ledgers"]
        assert ledger["entries"] == 50 and ledger["size"] == internal["totalSize"]
        assert internal["lastConfirmedEntry"] == f"{ledger['ledgerId']}:49"
        cursor = internal["cursors"]["sub"]
        assert cursor["markDeletePosition"] == f"{ledger['ledgerId']}:29"
        assert {"readPosition", "individuallyDeletedMessages", "messagesConsumedCounter"} <= set(cursor)

        # Rates: the producer keeps sending; msgRateIn turns positive within a few intervals.
        sending = asyncio.ensure_future(send_until_cancelled(producer))
        try:
            await wait_for(lambda: rate_in_positive(cluster), timeout_s=10, message="msgRateIn stayed 0")
        finally:
            sending.cancel()

    text = await asyncio.to_thread(metrics_text, cluster.broker)
    topic_labels = {"cluster": "standalone", "namespace": "public/default", "topic": TOPIC}
    for name in (
        "pulsar_in_bytes_total",
        "pulsar_in_messages_total",
        "pulsar_out_bytes_total",
        "pulsar_out_messages_total",
        "pulsar_rate_in",
        "pulsar_rate_out",
        "pulsar_throughput_in",
        "pulsar_throughput_out",
        "pulsar_storage_size",
        "pulsar_msg_backlog",
    ):
        assert sample_value(text, name, topic_labels, exact=True) is not None, name
    assert sample_value(text, "pulsar_in_messages_total", topic_labels, exact=True) >= 50
    for name in (
        "pulsar_subscription_back_log",
        "pulsar_subscription_unacked_messages",
        "pulsar_subscription_msg_rate_out",
    ):
        assert sample_value(text, name, {**topic_labels, "subscription": "sub"}, exact=True) is not None, name
    for name in (
        "pulsar_ml_cache_hits_rate",
        "pulsar_ml_cache_misses_rate",
        "pulsar_ml_cache_used_size",
        "pulsar_broker_publish_buffer_usage",
        "pulsar_broker_throttled_connections",
        "pulsar_broker_rate_in",
        "pulsar_broker_rate_out",
    ):
        assert sample_value(text, name, {"cluster": "standalone"}, exact=True) is not None, name
    # The metadata layer (minipulsar/metadata/stats.py), on the broker and the bookie alike.
    for process in (cluster.broker, cluster.bookies[0]):
        process_text = text if process is cluster.broker else await asyncio.to_thread(metrics_text, process)
        puts = {"name": "metadata-store", "type": "put", "status": "success"}
        assert sample_value(process_text, "pulsar_metadata_store_ops_latency_ms_count", puts) > 0, process.role
        assert sample_value(process_text, "pulsar_metadata_store_put_bytes_total", {"name": "metadata-store"}) > 0


async def send_until_cancelled(producer) -> None:
    while True:
        await producer.send(b"more")


async def rate_in_positive(cluster: ProcessCluster) -> bool:
    return (await observed_stats(cluster))["msgRateIn"] > 0


async def test_consumer_metrics_and_unknown_topics(cluster: ProcessCluster) -> None:
    async with Client(cluster.service_url) as client:
        await client.subscribe(TOPIC, "sub", receiver_queue_size=7)

        async def permits_exported() -> bool:  # the FLOW follows the subscription's SUCCESS
            text = await asyncio.to_thread(metrics_text, cluster.broker)
            return sample_value(text, "pulsar_consumer_available_permits", {"subscription": "sub"}) == 7.0

        await wait_for(permits_exported, timeout_s=10, message="the consumer's permits are not exported")
    with pytest.raises(urllib.error.HTTPError) as missing:
        await observed_stats(cluster, topic="never-created")
    assert missing.value.code == 404
