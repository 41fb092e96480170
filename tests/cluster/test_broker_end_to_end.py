"""End to end through real processes: client → broker → bookies → broker → client."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

from minipulsar import Client, ConsumerType, InitialPosition, MessageId, Timeout
from tests.support.cluster import ProcessCluster, make_cluster
from tests.support.process import wait_for
from tests.support.web import metrics_text, topic_stats


@pytest.fixture
async def replicated_cluster(tmp_path: Path):
    async with make_cluster(tmp_path, bookies=3) as cluster:
        yield cluster


async def test_messages_arrive_in_order_with_their_metadata(cluster: ProcessCluster) -> None:
    """Goal: what a producer sends, a consumer receives, in order, with key and properties.
    Method: subscribe first, send 100 messages, receive and acknowledge 100."""
    async with Client(cluster.service_url) as client:
        consumer = await client.subscribe("orders", "sub")
        producer = await client.create_producer("orders")
        ids = [
            await producer.send(f"m-{i}".encode(), properties={"i": str(i)}, partition_key=f"k{i}") for i in range(100)
        ]
        assert ids == sorted(ids) and len(set(ids)) == 100
        for i in range(100):
            message = await consumer.receive(timeout_millis=10_000)
            assert message.data() == f"m-{i}".encode()
            assert message.properties() == {"i": str(i)}
            assert message.partition_key() == f"k{i}"
            assert message.message_id() == ids[i]
            await consumer.acknowledge(message)
        assert (await consumer.get_last_message_id()).entry_id() == ids[-1].entry_id()


async def test_dispatch_stays_within_permits(cluster: ProcessCluster) -> None:
    """Goal: the broker pushes no more messages than the consumer granted permits for.
    Method: receiver queue of 4; publish 20; the broker sends 4; receiving 2 returns 2 permits
    (half the queue) and exactly 2 more arrive."""
    async with Client(cluster.service_url) as client:
        consumer = await client.subscribe("flow", "sub", receiver_queue_size=4)
        producer = await client.create_producer("flow")
        for _i in range(20):
            await producer.send(b"x")

        def delivered() -> int:
            return topic_stats(cluster, "flow")["subscriptions"]["sub"]["consumers"][0]["msgOutCounter"]

        await wait_for(lambda: delivered() == 4, message="the first 4 messages were not dispatched")
        stats = topic_stats(cluster, "flow")["subscriptions"]["sub"]
        assert stats["consumers"][0]["availablePermits"] == 0
        assert delivered() == 4
        await consumer.receive()
        await consumer.receive()
        await wait_for(lambda: delivered() == 6, message="returned permits did not bring 2 more messages")
        await producer.send(b"sync")  # one more round trip through the broker
        assert delivered() == 6


async def test_unacknowledged_messages_go_to_the_next_consumer(cluster: ProcessCluster) -> None:
    """Goal: messages a consumer received but did not acknowledge are redelivered after it leaves."""
    async with Client(cluster.service_url) as client:
        producer = await client.create_producer("redeliver")
        first = await client.subscribe("redeliver", "sub", initial_position=InitialPosition.Earliest)
        for i in range(10):
            await producer.send(str(i).encode())
        got = [await first.receive(timeout_millis=10_000) for _ in range(10)]
        await first.acknowledge(got[0])
        await first.acknowledge(got[1])
        await first.close()
        second = await client.subscribe("redeliver", "sub")
        again = [(await second.receive(timeout_millis=10_000)).data() for _ in range(8)]
        assert again == [str(i).encode() for i in range(2, 10)]


async def test_shared_subscription_spreads_messages_over_consumers(cluster: ProcessCluster) -> None:
    """Goal: Shared consumers each get a part; together they get every message exactly once."""
    async with Client(cluster.service_url) as client:
        consumers = [
            await client.subscribe("shared", "sub", consumer_type=ConsumerType.Shared, receiver_queue_size=10)
            for _ in range(2)
        ]
        producer = await client.create_producer("shared")
        for i in range(40):
            await producer.send(str(i).encode())
        seen: dict[int, list[bytes]] = {0: [], 1: []}
        while len(seen[0]) + len(seen[1]) < 40:
            for index, consumer in enumerate(consumers):
                try:
                    message = await consumer.receive(timeout_millis=200)
                except Timeout:
                    continue
                seen[index].append(message.data())
                await consumer.acknowledge(message)
        assert seen[0] and seen[1]
        assert sorted(seen[0] + seen[1], key=int) == [str(i).encode() for i in range(40)]


async def test_acknowledged_messages_survive_a_broker_crash(replicated_cluster: ProcessCluster) -> None:
    """Goal: after a broker SIGKILL, the subscription resumes after its last acknowledgement and
    every published message is still there (2/2/2 on three bookies).
    Method: publish 50, acknowledge 20, SIGKILL the broker, restart it, consume the rest."""
    cluster = replicated_cluster
    async with Client(cluster.service_url) as client:
        consumer = await client.subscribe("durable", "sub")
        producer = await client.create_producer("durable")
        for i in range(50):
            await producer.send(str(i).encode())
        for _ in range(20):
            await consumer.acknowledge(await consumer.receive(timeout_millis=10_000))
    await cluster.restart_broker(kill=True)
    async with Client(cluster.service_url) as client:
        consumer = await client.subscribe("durable", "sub")
        rest = [(await consumer.receive(timeout_millis=10_000)).data() for _ in range(30)]
        assert rest == [str(i).encode() for i in range(20, 50)]
        producer = await client.create_producer("durable")
        new_id = await producer.send(b"after restart")
        assert new_id > MessageId(-1, 0, 0, -1)
        assert (await consumer.receive(timeout_millis=10_000)).data() == b"after restart"
        ledgers = topic_stats(cluster, "durable")["ledgers"]
        assert len(ledgers) == 2, "the restarted broker rolled to a new ledger"


async def test_broker_serves_pulsar_metrics(cluster: ProcessCluster) -> None:
    async with Client(cluster.service_url) as client:
        producer = await client.create_producer("metered")
        consumer = await client.subscribe("metered", "sub", initial_position=InitialPosition.Earliest)
        for _ in range(3):
            await producer.send(b"abc")
        for _ in range(3):
            await consumer.acknowledge(await consumer.receive(timeout_millis=10_000))
    text = await asyncio.to_thread(metrics_text, cluster.broker)
    labels = '{cluster="standalone",namespace="public/default",topic="persistent://public/default/metered"}'
    assert f"pulsar_in_messages_total{labels} 3.0" in text
    assert f"pulsar_out_messages_total{labels} 3.0" in text, "counted after the consumer left"
    assert f"pulsar_in_bytes_total{labels}" in text
    bk = "pulsar_managedLedger_client_bookkeeper_client_"
    adds = re.search(rf'^{bk}ADD_ENTRY_count{{success="true"}} (\S+)$', text, re.MULTILINE)
    assert adds is not None, "the BookKeeper client's add latency"
    assert float(adds[1]) >= 3 + 2, "3 messages, and the cursor ledger's first position and at least one ack"
    for name in ("NUM_ENSEMBLE_CHANGE", "BOOKIE_QUARANTINE", "NUM_PENDING_ADD", "BOOKIE_PENDING_REQUESTS"):
        assert f"{bk}{name}" in text


def test_a_bad_config_value_stops_the_broker_naming_the_key(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# a real broker.conf holds many keys we do not use\nwebSocketServiceEnabled=false\n"
        "managedLedgerDefaultAckQuorum=two\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "minipulsar", "broker", "--config", str(conf)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "'webSocketServiceEnabled' is not used by minipulsar" in result.stderr
    assert "managedLedgerDefaultAckQuorum='two': expected an integer" in result.stderr
