"""Goal: the ZooKeeper leader SIGKILLed under load costs nothing (issue 20, "done when" 2): the
ensemble elects a new leader, every session survives (its clients reconnect to another node
within the session timeout), no acknowledged message is lost, none is delivered again after
the consumer acknowledged it, and the bookie and broker registrations
(``/ledgers/available/…``, ``/loadbalance/brokers/…``) are there after the election — the same
sessions, or re-registered.

Method: a 3-node ensemble (Debian's ZooKeeper, tests/support/zookeeper.py), 2 bookies and 2
brokers on it with 20 s sessions (a leader election takes a few seconds). Per topic, a
producer sends with receipts, paced, and a consumer acknowledges every message, recording each
delivery and each acknowledgement; a second subscription, made before the first send, reads
everything back at the end. The leader is SIGKILLed once the first receipts came; the sends
go on until receipts came after the new leader serves; the killed node is restarted at the
end."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path

from minipulsar import Client, ConsumerType, InitialPosition, Timeout
from minipulsar.bookkeeper.bookie_registry import AVAILABLE_PATH
from minipulsar.broker.loadbalance.reporter import BROKERS_PATH
from minipulsar.metadata import open_metadata_store
from tests.support.cluster import make_cluster
from tests.support.process import wait_for
from tests.support.zookeeper import ZooKeeperEnsemble, zookeeper_fixture

ensemble = zookeeper_fixture(nodes=3, name="ensemble")

TOPICS = [f"persistent://public/default/zk-leader-{i}" for i in range(2)]
SESSION_TIMEOUT_MS = 20_000
SETTINGS = {"brokerDeduplicationEnabled": True, "metadataStoreSessionTimeoutMillis": SESSION_TIMEOUT_MS}
BEFORE_KILL, AFTER_ELECTION = 100, 100
"""Receipts per topic before the kill, and after the new leader serves."""
PACE_S = 0.005
SESSION_LOST = re.compile(r"session \S+ lost|metadata session lost")
"""What the ZooKeeper store and the namespace service log when a session expired."""


@dataclass
class TopicRun:
    """One topic's producer receipts, and its consumer's deliveries and acknowledgements."""

    topic: str
    acked: list[bytes] = field(default_factory=list)
    failed: list[bytes] = field(default_factory=list)
    delivered_after_ack: list[bytes] = field(default_factory=list)
    acknowledged: set[bytes] = field(default_factory=set)
    deliveries: int = 0


async def produce_with_receipts(client: Client, run: TopicRun, stop: asyncio.Event) -> None:
    producer = await client.create_producer(run.topic, producer_name=run.topic.rsplit("/", 1)[1])
    number = 0
    while not stop.is_set():
        data = b"%d" % number
        number += 1

        def done(error: BaseException | None, _: object, data: bytes = data) -> None:
            (run.failed if error is not None else run.acked).append(data)

        producer.send_async(data, done)
        await asyncio.sleep(PACE_S)
    await asyncio.wait_for(producer.flush(), 60)
    await producer.close()


async def consume_acking(client: Client, run: TopicRun, stop: asyncio.Event) -> None:
    consumer = await client.subscribe(
        run.topic, "acker", consumer_type=ConsumerType.Shared, initial_position=InitialPosition.Earliest
    )
    while not stop.is_set():
        try:
            message = await consumer.receive(timeout_millis=500)
        except Timeout:
            continue
        run.deliveries += 1
        if message.data() in run.acknowledged:
            run.delivered_after_ack.append(message.data())
        await consumer.acknowledge(message)
        run.acknowledged.add(message.data())
    await consumer.close()


async def test_the_zookeeper_leader_killed_under_load_loses_and_redelivers_nothing(
    tmp_path: Path, ensemble: ZooKeeperEnsemble
) -> None:
    async with make_cluster(
        tmp_path,
        zookeeper=ensemble,
        bookies=2,
        brokers=2,
        broker_settings=SETTINGS,
        bookie_settings={"zkTimeout": SESSION_TIMEOUT_MS},
    ) as cluster:
        store = await open_metadata_store(ensemble.url)
        try:
            await _kill_the_leader_under_load(cluster, ensemble, store)
        finally:
            await store.close()


async def _kill_the_leader_under_load(cluster, ensemble: ZooKeeperEnsemble, store) -> None:  # type: ignore[no-untyped-def]
    bookie_ids = sorted(b.address for b in cluster.bookies)
    broker_ids = sorted(cluster.broker_id(i) for i in range(len(cluster.brokers)))
    service_url = "pulsar://" + ",".join(b.address for b in cluster.brokers)
    runs = [TopicRun(topic) for topic in TOPICS]
    killed: list[int] = []
    try:
        async with Client(service_url, operation_timeout_seconds=60) as client:
            for run in runs:  # the read-back subscription exists before the first send
                await (await client.subscribe(run.topic, "audit", initial_position=InitialPosition.Earliest)).close()
            await _load_through_a_leader_kill(ensemble, client, runs, killed)
            assert sorted(set(await store.children(AVAILABLE_PATH)) - {"readonly"}) == bookie_ids
            assert sorted(await store.children(BROKERS_PATH)) == broker_ids
            for process in (*cluster.bookies, *cluster.brokers):  # the same sessions, no bundle dropped
                log = process.log_path.read_text(errors="replace")
                assert SESSION_LOST.search(log) is None, f"{process.log_path.name}: a session was lost"
            for run in runs:
                print(
                    f"{run.topic}: {len(run.acked)} acked, {len(run.failed)} failed, "
                    f"{run.deliveries} deliveries, {len(run.delivered_after_ack)} after their ack"
                )
                assert run.delivered_after_ack == [], f"{run.topic}: delivered again after the ack"
                await _read_back(client, run)
    finally:
        if killed:
            await asyncio.to_thread(ensemble.restart, killed[0])


async def _load_through_a_leader_kill(
    ensemble: ZooKeeperEnsemble, client: Client, runs: list[TopicRun], killed: list[int]
) -> None:
    stop_producing, stop_consuming = asyncio.Event(), asyncio.Event()
    producing = [asyncio.create_task(produce_with_receipts(client, run, stop_producing)) for run in runs]
    consuming = [asyncio.create_task(consume_acking(client, run, stop_consuming)) for run in runs]
    try:
        await wait_for(lambda: all(len(r.acked) >= BEFORE_KILL for r in runs), 60, 0.05, "no receipts")
        leader = ensemble.leader()
        assert leader is not None
        await asyncio.to_thread(ensemble.kill, leader)
        killed.append(leader)

        def new_leader() -> bool:
            found = ensemble.leader()
            return found is not None and found != leader

        await wait_for(lambda: asyncio.to_thread(new_leader), 60, 0.2, "no new ZooKeeper leader")
        counts = [len(r.acked) for r in runs]
        await wait_for(
            lambda: all(len(r.acked) >= c + AFTER_ELECTION for r, c in zip(runs, counts)),
            90,
            0.05,
            "no receipts after the election",
        )
        stop_producing.set()
        await asyncio.gather(*producing)
        try:
            await wait_for(lambda: all(set(r.acked) <= r.acknowledged for r in runs), 60, 0.1)
        except AssertionError:
            missing = {r.topic: sorted(int(d) for d in set(r.acked) - r.acknowledged) for r in runs}
            crashed = [repr(t.exception()) for t in consuming if t.done() and t.exception() is not None]
            raise AssertionError(f"acked, never acknowledged by the consumer: {missing}; {crashed}") from None
    finally:
        stop_producing.set()
        stop_consuming.set()
        results = await asyncio.gather(*producing, *consuming, return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    assert failures == [], f"a producer or consumer failed: {failures}"


async def _read_back(client: Client, run: TopicRun) -> None:
    """Through the subscription made before the first send: every acked message, once, in order."""
    audit = await client.subscribe(run.topic, "audit", initial_position=InitialPosition.Earliest)
    stored: list[bytes] = []
    while True:
        try:
            message = await audit.receive(timeout_millis=3_000)
        except Timeout:
            break
        stored.append(message.data())
        await audit.acknowledge(message)
    assert len(stored) == len(set(stored)), f"{run.topic}: stored twice"
    assert set(run.acked) <= set(stored), f"{run.topic}: acked but lost"
    numbers = [int(d) for d in stored]
    assert numbers == sorted(numbers), f"{run.topic}: out of order"
