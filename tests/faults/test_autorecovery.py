"""AutoRecovery in a real cluster: a bookie lost for good has its ledgers re-replicated onto the
others, and a live bookie can be drained (decommissioned) while producers keep publishing."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from pathlib import Path

from minipulsar import Client, InitialPosition
from minipulsar.ledger_paths import cookie_path
from minipulsar.metadata import open_metadata_store
from tests.support.cli import run_cli
from tests.support.cluster import make_cluster
from tests.support.process import wait_for
from tests.support.replication import fully_replicated, no_underreplicated_ledger, topic_ledgers

AUTORECOVERY_BROKER_SETTINGS = {
    "managedLedgerMaxEntriesPerLedger": 5,
    "managedLedgerMinLedgerRolloverTimeMinutes": 0,
}
AUTORECOVERY_BOOKIE_SETTINGS = {
    "autoRecoveryDaemonEnabled": True,
    "lostBookieRecoveryDelay": 0,
    "openLedgerRereplicationGracePeriod": 3000,
    "lockReleaseOfFailedLedgerGracePeriod": 5000,
}
REPLICATED_WITHIN_S = 60.0


async def test_lost_bookie_is_rereplicated_and_a_second_loss_loses_nothing(tmp_path: Path) -> None:
    """Goal: issue 18's Done-when: 4 bookies at 2/2/2, lostBookieRecoveryDelay=0; after one
    ensemble bookie is SIGKILLed for good, within 60 s every entry of every ledger of the topic
    is on its Qw live bookies (read from each bookie directly) and nothing is marked
    under-replicated; a second bookie of the original ensembles is then killed and every acked
    message is still consumed.
    Method: 5 entries per ledger, 23 messages acked before the kill and 12 after (the writer
    replaces the dead bookie, then rolls); a durable subscription made first keeps the ledgers."""
    topic = "autorecovery-lost"
    async with make_cluster(
        tmp_path,
        bookies=4,
        broker_settings=AUTORECOVERY_BROKER_SETTINGS,
        bookie_settings=AUTORECOVERY_BOOKIE_SETTINGS,
    ) as cluster:
        store = await open_metadata_store(cluster.metadata_url, session_timeout_ms=2000)
        try:
            async with Client(cluster.service_url) as client:
                consumer = await client.subscribe(topic, "keep", initial_position=InitialPosition.Earliest)
                await consumer.close()
                producer = await client.create_producer(topic)
                acked = [b"before-%d" % i for i in range(23)]
                for payload in acked:
                    await producer.send(payload)
                original = await topic_ledgers(store, topic)
                assert len(original) >= 4, original
                uses = Counter(b for md in original.values() for _, ensemble in md.ensembles for b in set(ensemble))
                victim = max(sorted(uses), key=lambda bookie: uses[bookie])
                by_id = {bookie.address: bookie for bookie in cluster.bookies}
                await asyncio.to_thread(by_id[victim].kill)
                started = time.monotonic()
                for i in range(12):
                    payload = b"after-%d" % i
                    await producer.send(payload)
                    acked.append(payload)
                live = set(by_id) - {victim}

                async def recovered() -> bool:
                    ledgers = await topic_ledgers(store, topic)
                    return await no_underreplicated_ledger(store) and await fully_replicated(ledgers, live)

                await wait_for(
                    recovered, timeout_s=REPLICATED_WITHIN_S, interval_s=0.5, message="ledgers not re-replicated"
                )
                print(f"re-replicated within {time.monotonic() - started:.1f} s of the kill")
                partners = [
                    b
                    for b in sorted(live)
                    if any(victim in e and b in e for md in original.values() for _, e in md.ensembles)
                ]
                second = partners[0]
                await asyncio.to_thread(by_id[second].kill)
                consumer = await client.subscribe(topic, "keep", initial_position=InitialPosition.Earliest)
                received = [(await consumer.receive(timeout_millis=20_000)).data() for _ in acked]
                assert received == acked
        finally:
            await store.close()


async def test_decommission_drains_a_live_bookie_while_the_producer_keeps_getting_receipts(tmp_path: Path) -> None:
    """Goal: ``admin bookies decommission`` drains a LIVE bookie while a producer publishes: it
    ends with no ledger naming the bookie, every entry on its write set of the other bookies,
    the cookie gone, and no send failed or stalled. An idle topic whose open ledger is on the
    bookie is fenced after the grace period, and its next send rolls to a new ledger.
    Method: the bookie is one of the idle topic's current ensemble; a producer sends every
    10 ms to another topic throughout; the verb (a child process) turns the bookie read-only,
    marks its ledgers and waits; then every acked message of both topics is consumed."""
    topic = "autorecovery-decommission"
    idle_topic = "autorecovery-idle"
    async with make_cluster(
        tmp_path,
        bookies=4,
        broker_settings=AUTORECOVERY_BROKER_SETTINGS,
        bookie_settings=AUTORECOVERY_BOOKIE_SETTINGS,
    ) as cluster:
        store = await open_metadata_store(cluster.metadata_url, session_timeout_ms=2000)
        try:
            async with Client(cluster.service_url) as client:
                for name in (topic, idle_topic):
                    consumer = await client.subscribe(name, "keep", initial_position=InitialPosition.Earliest)
                    await consumer.close()
                idle_producer = await client.create_producer(idle_topic)
                idle_acked = [b"idle-%d" % i for i in range(7)]
                for payload in idle_acked:
                    await idle_producer.send(payload)
                producer = await client.create_producer(topic)
                acked: list[bytes] = []
                receipts_at: list[float] = []
                stop = asyncio.Event()

                async def publish() -> None:
                    while not stop.is_set():
                        payload = b"m-%d" % len(acked)
                        await producer.send(payload)
                        acked.append(payload)
                        receipts_at.append(time.monotonic())
                        await asyncio.sleep(0.01)

                publishing = asyncio.ensure_future(publish())
                await wait_for(lambda: len(acked) >= 30, timeout_s=30, message="no receipts")
                idle_ledgers = await topic_ledgers(store, idle_topic)
                victim = idle_ledgers[max(idle_ledgers)].last_ensemble[0]
                started = time.monotonic()
                result = await asyncio.to_thread(
                    run_cli,
                    "admin",
                    "bookies",
                    "--metadata-url",
                    cluster.metadata_url,
                    "decommission",
                    victim,
                    "--timeout",
                    "90",
                    timeout_s=120,
                )
                drained_s = time.monotonic() - started
                during = [t for t in receipts_at if t >= started]
                assert result.returncode == 0, result.stderr
                assert not publishing.done(), publishing
                stop.set()
                await publishing
                print(f"decommissioned in {drained_s:.1f} s; {len(during)} receipts meanwhile")
                assert len(during) > 10, "the producer kept getting receipts"
                gaps = [b - a for a, b in itertools.pairwise(during)]
                assert max(gaps, default=0) < 20, f"a send stalled {max(gaps):.1f} s"
                live = {b.address for b in cluster.bookies} - {victim}
                ledgers = await topic_ledgers(store, topic)
                assert await fully_replicated(ledgers, live)
                assert not any(victim in e for md in ledgers.values() for _, e in md.ensembles)
                assert await store.get(cookie_path(victim)) is None
                idle_ledgers = await topic_ledgers(store, idle_topic)
                assert all(md.is_closed for md in idle_ledgers.values()), "fenced and closed by the worker"
                assert not any(victim in e for md in idle_ledgers.values() for _, e in md.ensembles)
                idle_acked.append(b"idle-after")
                await asyncio.wait_for(idle_producer.send(b"idle-after"), 30)
                idle_consumer = await client.subscribe(idle_topic, "keep", initial_position=InitialPosition.Earliest)
                assert [(await idle_consumer.receive(timeout_millis=20_000)).data() for _ in idle_acked] == idle_acked
                consumer = await client.subscribe(topic, "keep", initial_position=InitialPosition.Earliest)
                received = [(await consumer.receive(timeout_millis=20_000)).data() for _ in acked]
                assert received == acked
        finally:
            await store.close()
