"""Goal: a broker SIGSTOPped past its metadata session timeout loses its bundles to another
broker and, once SIGCONTed, acknowledges no further send for them (docs/design.md §4.1, the
session rules and the fencing argument): every acknowledged message is stored once, in order
per producer, and the woken broker drops the bundle on its own.

Method: on the metastore and on a one-node ZooKeeper, 3 bookies (2/2/2), 2 brokers with
deduplication and a 2 s session timeout. Producer
P1 and a consumer connect to the broker A that owns topic T; P1 sends with receipts. A is
SIGSTOPped; once its registration has gone with its session, a new client's producer P2 looks
T up through broker B, which takes the bundle (opening the managed ledger fences A's ledger),
and sends with receipts. P1 queues more sends while A is stopped, and more after SIGCONT. Every
receipt is recorded with the broker it came from (the connection it arrived on) and its
ledger. Then: no send P1 issued after the SIGSTOP was acknowledged by A or stored in a ledger
A wrote, A logged dropping its bundles, and the consumer reads T back — every acked message
present, in order per producer, none twice, nothing unsent."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from minipulsar import Client, InitialPosition, Timeout
from minipulsar.broker.loadbalance.reporter import BROKERS_PATH
from minipulsar.metadata import open_metadata_store
from tests.support.cluster import make_cluster
from tests.support.process import ServerProcess, wait_for

TOPIC = "persistent://public/default/session-expiry"
BEFORE, DURING, AFTER, BY_P2 = 20, 10, 20, 20
"""P1's sends before the SIGSTOP, while A is stopped, after the SIGCONT; P2's sends."""
SETTINGS = {"brokerDeduplicationEnabled": True, "metadataStoreSessionTimeoutMillis": 2000}


@dataclass
class PhasedSend:
    phase: str
    data: bytes
    acked_by: str | None = None
    ledger_id: int | None = None
    entry_id: int | None = None
    error: str | None = None


@dataclass
class ProducerView:
    """One producer's sends and, for each receipt, the broker it came from."""

    name: str
    producer: object = None
    sends: list[PhasedSend] = field(default_factory=list)

    def send(self, phase: str, number: int) -> PhasedSend:
        send = PhasedSend(phase, f"{self.name}-{number}".encode())
        self.sends.append(send)

        def done(error: BaseException | None, message_id: object) -> None:
            if error is not None:
                send.error = repr(error)
                return
            connection = self.producer._connection  # type: ignore[attr-defined]
            send.acked_by = connection.peer if connection is not None else "?"
            send.ledger_id, send.entry_id = message_id.ledger_id(), message_id.entry_id()  # type: ignore[attr-defined]

        self.producer.send_async(send.data, done)  # type: ignore[attr-defined]
        return send

    def settled(self) -> bool:
        return all(s.acked_by is not None or s.error is not None for s in self.sends)

    def table(self, names: dict[str, str]) -> str:
        """One row per run of sends with the same phase, acknowledging broker, ledger and error."""
        rows = [f"{self.name}'s view: phase, messages, acked by, ledger:entries / error"]
        runs: list[list[PhasedSend]] = []
        for send in self.sends:
            key = (send.phase, send.acked_by, send.ledger_id, send.error)
            if runs and (runs[-1][0].phase, runs[-1][0].acked_by, runs[-1][0].ledger_id, runs[-1][0].error) == key:
                runs[-1].append(send)
            else:
                runs.append([send])
        for run in runs:
            first, last = run[0], run[-1]
            by = names.get(first.acked_by, first.acked_by) if first.acked_by else "nobody"
            where = f"{first.ledger_id}:{first.entry_id}..{last.entry_id}" if first.acked_by else first.error
            rows.append(f"  {first.phase:<7} {first.data.decode()}..{last.data.decode():<8} {by:<6} {where}")
        return "\n".join(rows)


def dropped_bundles(broker: ServerProcess) -> bool:
    return "metadata session lost: dropping" in broker.log_path.read_text(errors="replace")


@pytest.mark.parametrize("backend", ["metastore", "zookeeper"])
async def test_a_broker_stopped_past_its_session_timeout_acknowledges_nothing_after_it_wakes(
    tmp_path: Path, backend: str
) -> None:
    zookeeper_nodes = 1 if backend == "zookeeper" else 0
    async with make_cluster(
        tmp_path, bookies=3, brokers=2, broker_settings=SETTINGS, zookeeper_nodes=zookeeper_nodes
    ) as cluster:
        store = await open_metadata_store(cluster.metadata_url)
        try:
            await _stop_owner_past_its_session(cluster, store)
        finally:
            await store.close()


async def _stop_owner_past_its_session(cluster, store) -> None:  # type: ignore[no-untyped-def]
    first = cluster.brokers[0]
    async with Client(f"pulsar://{first.address}", operation_timeout_seconds=60) as client1:
        consumer = await client1.subscribe(TOPIC, "check", initial_position=InitialPosition.Earliest)
        p1 = ProducerView("p1")
        p1.producer = await client1.create_producer(TOPIC, producer_name="p1", batching_enabled=False)
        for n in range(BEFORE):
            p1.send("before", n)
        await p1.producer.flush()  # type: ignore[attr-defined]
        assert all(s.acked_by for s in p1.sends), p1.sends
        owner = p1.sends[0].acked_by
        index_a = next(i for i, b in enumerate(cluster.brokers) if b.address == owner)
        a, b = cluster.brokers[index_a], cluster.brokers[1 - index_a]
        names = {a.address: "A", b.address: "B"}
        ledgers_of_a = {s.ledger_id for s in p1.sends}

        a.pause()
        try:
            for n in range(BEFORE, BEFORE + DURING):  # queued in A's socket: read after SIGCONT
                p1.send("during", n)
            broker_a = cluster.broker_id(index_a)

            async def a_unregistered() -> bool:
                return broker_a not in await store.children(BROKERS_PATH)

            await wait_for(a_unregistered, 30, 0.1, "A's session never expired")
            async with Client(f"pulsar://{b.address}", operation_timeout_seconds=60) as client2:
                p2 = ProducerView("p2")
                p2.producer = await client2.create_producer(TOPIC, producer_name="p2", batching_enabled=False)
                for n in range(BY_P2):
                    p2.send("by-p2", n)
                await asyncio.wait_for(p2.producer.flush(), 60)  # type: ignore[attr-defined]
                assert [s.acked_by for s in p2.sends] == [b.address] * BY_P2, p2.table(names)
        finally:
            a.resume()
        for n in range(BEFORE + DURING, BEFORE + DURING + AFTER):
            p1.send("after", n)
        await wait_for(p1.settled, 90, 0.1, "P1's sends never settled")
        await wait_for(lambda: dropped_bundles(a), 30, 0.1, "A never dropped its bundles on its own")
        print(p1.table(names))
        print(p2.table(names))

        late = [s for s in p1.sends if s.phase != "before"]
        assert not [s for s in late if s.acked_by == a.address], "A acknowledged a send after its session expired"
        assert not [s for s in late if s.acked_by and s.ledger_id in ledgers_of_a], "stored in A's ledger"
        assert [s.acked_by for s in p1.sends if s.phase == "before"] == [a.address] * BEFORE

        acked = {s.data for view in (p1, p2) for s in view.sends if s.acked_by}
        sent = {s.data for view in (p1, p2) for s in view.sends}
        received: list[bytes] = []
        while True:
            try:
                message = await consumer.receive(timeout_millis=5_000)
            except Timeout:
                break
            received.append(message.data())
            await consumer.acknowledge(message)
        assert len(received) == len(set(received)), "a message was stored twice"
        assert acked <= set(received), f"acked but lost: {sorted(acked - set(received))}"
        assert set(received) <= sent, "stored but never sent"
        for name in ("p1", "p2"):
            numbers = [int(d.split(b"-")[1]) for d in received if d.startswith(name.encode())]
            assert numbers == sorted(numbers), f"{name}'s messages out of order: {numbers}"
