"""A 3-bookie cluster at 2/2/2 survives the loss of one bookie of a topic's ensemble together
with a broker crash: the restarted broker recovers the open ledger by replacing the dead bookie
(BookKeeper's ensemble change during recovery), serves every acknowledged message from the
surviving replica, and takes new sends, while the dead bookie stays down."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from minipulsar import Client, InitialPosition
from minipulsar.bookkeeper import BookKeeper, BookKeeperSettings
from minipulsar.errors import MiniPulsarError
from minipulsar.metadata import MetadataStore, open_metadata_store
from tests.support.cluster import ProcessCluster, make_cluster
from tests.support.process import ServerProcess

TOPIC = "durable"
ML_PATH = f"/managed-ledgers/public/default/persistent/{TOPIC}"
LOAD_DEADLINE_S = 30.0
ACKED = 50


async def last_ledger_ensemble(store: MetadataStore) -> tuple[int, list[str]]:
    """The topic's last ledger id and that ledger's last ensemble, from the metadata store."""
    info = await store.get(ML_PATH)
    assert info is not None, "the topic's managed ledger has no info yet"
    ledger_id = json.loads(info.value)["ledgers"][-1]["ledgerId"]
    ledger = await store.get(f"/ledgers/L{ledger_id}")
    assert ledger is not None
    return ledger_id, list(json.loads(ledger.value)["ensembles"][-1][1])


def process_of_bookie(cluster: ProcessCluster, bookie_id: str) -> ServerProcess:
    return next(b for b in cluster.bookies if b.address == bookie_id)


async def send_acked(service_url: str, prefix: str, count: int) -> list[bytes]:
    """``count`` messages, each acknowledged by the broker before the next is sent."""
    sent = []
    async with Client(service_url) as client:
        producer = await client.create_producer(TOPIC)
        for i in range(count):
            payload = f"{prefix}-{i}".encode()
            await producer.send(payload)
            sent.append(payload)
    return sent


async def receive_expected(service_url: str, expected: list[bytes]) -> float:
    """Subscribe from the earliest message and receive ``expected`` in order (after the topic
    loads, which must take under LOAD_DEADLINE_S); returns when the first arrived (monotonic)."""
    async with Client(service_url, operation_timeout_seconds=LOAD_DEADLINE_S) as client:
        consumer = await client.subscribe(TOPIC, "check", initial_position=InitialPosition.Earliest)
        first = await consumer.receive(timeout_millis=int(LOAD_DEADLINE_S * 1000))
        loaded_s = time.monotonic()
        received = [first.data()] + [(await consumer.receive(timeout_millis=10_000)).data() for _ in expected[1:]]
        await consumer.close()
    assert received == expected
    return loaded_s


async def subscribe_check(service_url: str) -> None:
    """Create the durable subscription ``receive_expected`` reads (it keeps the ledgers from trimming)."""
    async with Client(service_url) as client:
        consumer = await client.subscribe(TOPIC, "check", initial_position=InitialPosition.Earliest)
        await consumer.close()


async def send_after_restart(cluster: ProcessCluster, prefix: str) -> list[bytes]:
    sent = await asyncio.wait_for(send_acked(cluster.service_url, prefix, 10), LOAD_DEADLINE_S)
    assert len(sent) == 10
    return sent


@pytest.mark.parametrize("position", [0, 1])
async def test_broker_and_ensemble_bookie_killed_together_topic_loads_without_it(tmp_path: Path, position: int) -> None:
    """Goal: SIGKILL of the broker and of the bookie at ``position`` of the topic's current
    ensemble, then a restart of the broker only: the topic loads within 30 s, every acked
    message is consumed in order, new sends are acked; a second broker restart works too.
    Method: 50 acked sends; kill both; restart the broker; consume from the earliest; send 10;
    SIGKILL and restart the broker again; consume all 60."""
    async with make_cluster(tmp_path, bookies=3) as cluster:
        store = await open_metadata_store(cluster.metadata_url, session_timeout_ms=2000)
        try:
            acked = await send_acked(cluster.service_url, "acked", ACKED)
            _, ensemble = await last_ledger_ensemble(store)
            victim = process_of_bookie(cluster, ensemble[position])
            await asyncio.gather(cluster.kill_broker(0), asyncio.to_thread(victim.kill))
            restarted = time.monotonic()
            await cluster.start_broker(0)
            loaded_s = await receive_expected(cluster.service_url, acked) - restarted
            print(f"first message {loaded_s:.1f} s after the broker restart began")
            assert loaded_s < LOAD_DEADLINE_S
            acked += await send_after_restart(cluster, "after")
            await cluster.restart_broker(kill=True)
            await receive_expected(cluster.service_url, acked)
            acked += await send_after_restart(cluster, "again")
            await receive_expected(cluster.service_url, acked)
            assert not victim.running
        finally:
            await store.close()


@pytest.mark.parametrize("sends_between", [0, 5])
async def test_ensemble_bookie_dies_first_then_the_broker(tmp_path: Path, sends_between: int) -> None:
    """Goal: a bookie of the ensemble dies while the broker serves, the broker crashes later: the
    restarted broker loads the topic within 30 s and serves everything, twice.
    Method: 50 acked sends; SIGKILL the bookie at position 0; ``sends_between`` more acked sends
    (the writer's own ensemble change replaces the bookie; with 0 the ledger still names it);
    SIGKILL the broker; restart it; consume; send; SIGKILL and restart the broker; consume all."""
    async with make_cluster(tmp_path, bookies=3) as cluster:
        store = await open_metadata_store(cluster.metadata_url, session_timeout_ms=2000)
        try:
            acked = await send_acked(cluster.service_url, "acked", ACKED)
            _, ensemble = await last_ledger_ensemble(store)
            victim = process_of_bookie(cluster, ensemble[0])
            await asyncio.to_thread(victim.kill)
            acked += await asyncio.wait_for(send_acked(cluster.service_url, "between", sends_between), 30)
            await cluster.kill_broker(0)
            restarted = time.monotonic()
            await cluster.start_broker(0)
            loaded_s = await receive_expected(cluster.service_url, acked) - restarted
            print(f"first message {loaded_s:.1f} s after the broker restart began")
            assert loaded_s < LOAD_DEADLINE_S
            acked += await send_after_restart(cluster, "after")
            await cluster.restart_broker(kill=True)
            await receive_expected(cluster.service_url, acked)
            assert not victim.running
        finally:
            await store.close()


async def test_a_topic_over_many_ledgers_loads_and_reads_fast_with_a_dead_bookie(tmp_path: Path) -> None:
    """Goal: no step of the topic load or of the catch-up read waits a request timeout per ledger
    on the dead bookie. Method: 10 entries per ledger, 80 acked sends (8 ledgers, the dead bookie
    in some of their ensembles); SIGKILL broker and a bookie of the last ensemble; restart the
    broker; everything is consumed well within one bookie request timeout (30 s)."""
    settings = {"managedLedgerMaxEntriesPerLedger": 10, "managedLedgerMinLedgerRolloverTimeMinutes": 0}
    async with make_cluster(tmp_path, bookies=3, broker_settings=settings) as cluster:
        store = await open_metadata_store(cluster.metadata_url, session_timeout_ms=2000)
        try:
            await subscribe_check(cluster.service_url)
            acked = await send_acked(cluster.service_url, "acked", 80)
            _, ensemble = await last_ledger_ensemble(store)
            victim = process_of_bookie(cluster, ensemble[1])
            await asyncio.gather(cluster.kill_broker(0), asyncio.to_thread(victim.kill))
            restarted = time.monotonic()
            await cluster.start_broker(0)
            await receive_expected(cluster.service_url, acked)
            took_s = time.monotonic() - restarted
            print(f"broker restart and catch-up read of 80 messages over 8 ledgers: {took_s:.1f} s")
            assert took_s < 20, f"took {took_s:.1f} s: something waited on the dead bookie"
        finally:
            await store.close()


@pytest.mark.parametrize("writer_busy", [False, True])
async def test_two_clients_recovering_at_once_with_a_dead_bookie_agree_on_one_close(
    tmp_path: Path, writer_busy: bool
) -> None:
    """Goal: recoveries racing each other and the live old writer stay safe on real bookies.
    Method: 4 bookies, no broker; a writer acknowledges 200 entries of a 2/2/2 ledger (busy: and
    keeps 50 more in flight, so it changes its ensemble itself; idle: the recoverers must replace
    the bookie); an ensemble bookie is SIGKILLed; two other clients open the ledger with recovery
    at once. Both get the same closed ledger, holding every acknowledged entry (read back through
    the surviving replica and the replacement); the writer cannot add again."""
    async with make_cluster(tmp_path, bookies=4, brokers=0) as cluster:
        stores = [await open_metadata_store(cluster.metadata_url, session_timeout_ms=2000) for _ in range(3)]
        clients = [BookKeeper(store, BookKeeperSettings(timeout_s=10.0)) for store in stores]
        try:
            for client in clients:
                await client.start()
            writer = await clients[0].create_ledger(2, 2, 2)
            acked = {await writer.add(b"entry-%d" % e): b"entry-%d" % e for e in range(200)}
            in_flight = [writer.add(b"entry-%d" % e) for e in range(200, 250 if writer_busy else 200)]
            victim = process_of_bookie(cluster, writer.metadata.last_ensemble[0])
            await asyncio.to_thread(victim.kill)
            first, second = await asyncio.gather(
                clients[1].open_ledger(writer.ledger_id, recovery=True),
                clients[2].open_ledger(writer.ledger_id, recovery=True),
            )
            for outcome in await asyncio.gather(*in_flight, return_exceptions=True):
                if isinstance(outcome, int):
                    acked[outcome] = b"entry-%d" % outcome
            late = await asyncio.gather(writer.add(b"late"), return_exceptions=True)

            assert first.metadata == second.metadata and first.metadata.is_closed
            assert first.metadata == await clients[0].read_metadata(writer.ledger_id)
            last = first.last_entry_id
            assert set(acked) <= set(range(last + 1)), "every acknowledged entry is in the closed ledger"
            content = dict(await second.read(0, last))
            assert all(content[e] == payload for e, payload in acked.items())
            assert isinstance(late[0], MiniPulsarError)
            if not writer_busy:
                assert victim.address not in first.metadata.last_ensemble, "recovery replaced the dead bookie"
        finally:
            for client in clients:
                await client.close()
            for store in stores:
                await store.close()


async def test_a_hung_ensemble_bookie_and_a_broker_crash_cost_no_request_timeout(tmp_path: Path) -> None:
    """Goal: a SIGSTOPped (not dead) ensemble bookie and a broker crash: the restarted broker's
    recovery counts the silent bookie failed after the fence grace instead of waiting a 30 s
    add timeout, and (with speculative reads, as Pulsar needs for a silent replica) the topic
    serves everything well within 30 s. Method: 50 acked sends; SIGSTOP the bookie at position 0
    and SIGKILL the broker; restart it; consume all; send; the bookie stays stopped."""
    settings = {"bookkeeperClientSpeculativeReadTimeoutInMillis": 500}
    async with make_cluster(tmp_path, bookies=3, broker_settings=settings) as cluster:
        store = await open_metadata_store(cluster.metadata_url, session_timeout_ms=2000)
        try:
            acked = await send_acked(cluster.service_url, "acked", ACKED)
            _, ensemble = await last_ledger_ensemble(store)
            victim = process_of_bookie(cluster, ensemble[0])
            await asyncio.gather(cluster.kill_broker(0), asyncio.to_thread(victim.pause))
            try:
                restarted = time.monotonic()
                await cluster.start_broker(0)
                loaded_s = await receive_expected(cluster.service_url, acked) - restarted
                print(f"first message {loaded_s:.1f} s after the broker restart began")
                assert loaded_s < 15, f"{loaded_s:.1f} s: something waited a request timeout"
                await send_after_restart(cluster, "after")
            finally:
                victim.resume()
        finally:
            await store.close()


async def test_opening_without_recovery_reads_to_the_lac_with_a_dead_bookie_and_fences_nothing(
    tmp_path: Path,
) -> None:
    """Goal: the open-without-recovery path works with one bookie of the ensemble down.
    Method: 3 bookies, no broker; a writer acknowledges 100 entries of a 2/2/2 ledger; an ensemble
    bookie is SIGKILLed; another client opens the ledger without recovery: its LAC is the
    survivor's (98: the last entry's LAC rides on the next add), entries up to it read back, and
    the writer still adds (its own ensemble change replaces the dead bookie)."""
    async with make_cluster(tmp_path, bookies=3, brokers=0) as cluster:
        stores = [await open_metadata_store(cluster.metadata_url, session_timeout_ms=2000) for _ in range(2)]
        writer_bk, reader_bk = (BookKeeper(store, BookKeeperSettings(timeout_s=10.0)) for store in stores)
        try:
            await writer_bk.start()
            await reader_bk.start()
            writer = await writer_bk.create_ledger(2, 2, 2)
            for e in range(100):
                await writer.add(b"entry-%d" % e)
            await asyncio.to_thread(process_of_bookie(cluster, writer.metadata.last_ensemble[1]).kill)

            reader = await asyncio.wait_for(reader_bk.open_ledger(writer.ledger_id, recovery=False), 10)

            assert reader.last_add_confirmed == 98
            assert [p for _, p in await reader.read(0, 98)] == [b"entry-%d" % e for e in range(99)]
            assert await asyncio.wait_for(writer.add(b"entry-100"), 20) == 100
            assert writer.ensemble_changes == 1
        finally:
            await writer_bk.close()
            await reader_bk.close()
            for store in stores:
                await store.close()
