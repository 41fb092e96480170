"""AutoRecovery in a real cluster: a bookie lost for good has its ledgers re-replicated onto the
others, and a live bookie can be drained (decommissioned) while producers keep publishing."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from pathlib import Path

from minipulsar import Client, InitialPosition
from minipulsar.ledger_paths import cookie_path
from minipulsar.metadata import open_metadata_store
from tests.support.cli import run_cli
from tests.support.cluster import make_cluster
from tests.support.process import ServerProcess, wait_for
from tests.support.replication import fully_replicated, no_underreplicated_ledger, topic_ledgers
from tests.support.web import metrics_text, sample_value

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


async def bookie_audits(bookies: list[ServerProcess]) -> float:
    """Bookie audits done so far by whichever of ``bookies`` is (or was) the auditor."""
    total = 0.0
    for bookie in bookies:
        text = await asyncio.to_thread(metrics_text, bookie)
        total += sample_value(text, "auditor_AUDIT_BOOKIES_TIME_count") or 0.0
    return total


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


async def test_disabled_autorecovery_marks_nothing_until_recover_and_enable(tmp_path: Path) -> None:
    """Goal: with ``autorecovery disable`` a lost bookie's ledgers are neither marked nor
    re-replicated; ``recover BOOKIE --no-wait`` marks them; ``enable`` lets the workers run, and
    the ledgers end fully replicated with the replication metrics counting the copies.
    Method: 4 bookies at 2/2/2, 12 acked messages at 5 per ledger; the verbs as child processes."""
    topic = "autorecovery-disabled"
    async with make_cluster(
        tmp_path,
        bookies=4,
        broker_settings=AUTORECOVERY_BROKER_SETTINGS,
        bookie_settings=AUTORECOVERY_BOOKIE_SETTINGS,
    ) as cluster:
        store = await open_metadata_store(cluster.metadata_url, session_timeout_ms=2000)

        def verb(*args: str) -> str:
            result = run_cli("admin", "bookies", "--metadata-url", cluster.metadata_url, *args)
            assert result.returncode == 0, result.stderr
            return result.stdout

        try:
            async with Client(cluster.service_url) as client:
                consumer = await client.subscribe(topic, "keep", initial_position=InitialPosition.Earliest)
                await consumer.close()
                producer = await client.create_producer(topic)
                for i in range(12):
                    await producer.send(b"m-%d" % i)
                ledgers = await topic_ledgers(store, topic)
                victim = ledgers[min(ledgers)].last_ensemble[0]
                await asyncio.to_thread(verb, "autorecovery", "disable")
                by_id = {bookie.address: bookie for bookie in cluster.bookies}
                survivors = [bookie for bookie in cluster.bookies if bookie.address != victim]
                audits_before = await bookie_audits(survivors)
                await asyncio.to_thread(by_id[victim].kill)
                await wait_for(
                    lambda: victim not in json.loads(verb("list"))["writable"], timeout_s=20, message="still registered"
                )
                for i in range(6):  # the writer replaces the dead bookie and rolls: the open ledger closes
                    await producer.send(b"after-%d" % i)

                async def audited() -> bool:
                    return await bookie_audits(survivors) > audits_before

                # the audit the registration change starts (no periodic one is due before it)
                await wait_for(audited, timeout_s=20, interval_s=0.2, message="no bookie audit after the loss")
                assert (await asyncio.to_thread(verb, "list-underreplicated")).strip() == ""
                marked = (await asyncio.to_thread(verb, "recover", victim, "--no-wait")).split()
                assert marked, "recover marked the ledgers on the lost bookie"
                listed = (await asyncio.to_thread(verb, "list-underreplicated")).split()
                assert victim in listed, listed
                await asyncio.sleep(2)  # a negative check: disabled workers leave the marks for this long
                assert (await asyncio.to_thread(verb, "list-underreplicated")).strip(), "workers are disabled"
                await asyncio.to_thread(verb, "autorecovery", "enable")
                live = set(by_id) - {victim}

                async def recovered() -> bool:
                    current = await topic_ledgers(store, topic)
                    return await no_underreplicated_ledger(store) and await fully_replicated(current, live)

                await wait_for(recovered, timeout_s=REPLICATED_WITHIN_S, interval_s=0.5, message="not re-replicated")
                written = 0.0
                for bookie in cluster.bookies:
                    if bookie.address in live:
                        text = await asyncio.to_thread(metrics_text, bookie)
                        written += sample_value(text, "replication_worker_NUM_ENTRIES_WRITTEN") or 0.0
                assert written > 0
        finally:
            await store.close()
