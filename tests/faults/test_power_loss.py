"""Power loss on a minority of bookies, not just process death: every acknowledged entry
survives byte-identical.

A real cluster (metastore, 3 bookies, 1 broker; 2/2/2; dedup on): each bookie keeps its
journal and ledger dirs on its own faultfs mount (tests/support/faultfs), which drops every
write, truncate, create, unlink and rename not yet made durable by an fsync when its power
is cut. Producers (no batching: one message, one entry) send all along and record every
send, its payload, and the message id it was acked with. At seeded moments (half of them
aimed at an instant with unsynced changes) one bookie is SIGKILLed *and* its power is cut
(half the cuts partial: a random half of the unsynced pages, and a prefix of the unsynced
directory changes, made it to the disk, as FoundationDB's simulation does);
every fourth time the broker is SIGKILLed too, so that its ledgers are recovered beside a
bookie that lost its unsynced writes. On some cuts (all on one bookie, so that an entry
never loses two copies) the tail of its newest journal segment or entry log is then torn
or has bits flipped, offline. The bookie restarts on what was durable. At the end:

- every acked message is consumed, once, in send order, and nothing is consumed that was
  never sent;
- every acked entry (but the few acked as duplicates of a resend, whose id is not known) is
  read with READ_ENTRY from each bookie that the ledger's metadata says holds it: the
  replicas are byte-identical and hold the payload. A bookie whose disk was damaged (a torn
  or flipped *synced* tail: the disk lied) may have lost entries acked before that damage,
  but may never answer wrong bytes.

The bookies use tiny journal segments, entry logs and write cache and a 100 ms flush
interval, so cuts land in group commits, checkpoints, entry-log and journal rollovers.
Durability-trading settings are off (journalSyncData=true); the journal and the entry logs
keep their default O_DIRECT writes (faultfs accepts O_DIRECT opens; their writes and syncs
reach it like any other, which the control test below shows). Knobs (environment):
MINIPULSAR_POWERLOSS_SEED, MINIPULSAR_POWERLOSS_CUTS (default 20, for a longer soak raise it),
MINIPULSAR_POWERLOSS_BUDGET_S (time for the cut cycles, default 120 s; 20 cuts take ~80 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from minipulsar import Client, InitialPosition
from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata
from minipulsar.ledger_paths import ledger_path
from minipulsar.metadata import open_metadata_store
from minipulsar.protocol.commands import Error, ReadEntry, ReadEntryResponse, ReadLac, ReadLacResponse
from tests.support.cluster import ProcessCluster
from tests.support.consume import consume_all
from tests.support.faultfs import FaultFs, damage, mount, skip_unless_available
from tests.support.process import wait_for
from tests.support.raw_client import RawBookieClient, is_ack

SEED = int(os.environ.get("MINIPULSAR_POWERLOSS_SEED", "20261201"))
CUTS = int(os.environ.get("MINIPULSAR_POWERLOSS_CUTS", "20"))
BUDGET_S = float(os.environ.get("MINIPULSAR_POWERLOSS_BUDGET_S", "120"))
BOOKIES = 3
DAMAGED_BOOKIE = 0
"""The only bookie whose disk is ever damaged (torn or flipped tails): a minority of one."""
DAMAGE_EVERY = 3
"""Every third cut of DAMAGED_BOOKIE also damages a tail."""
BROKER_EVERY = 4
"""Every fourth cut SIGKILLs the broker too, restarted (same ports) once the bookie is back."""
PARTIAL_FRACTION, PARTIAL_KEEP = 0.5, 0.5
"""Half the cuts are partial: each unsynced page made it to the disk with probability 0.5."""
AIMED_FRACTION = 0.5
"""Cuts aimed at a moment with unsynced changes (the rest land at random instants)."""
TOPICS = ("power-a", "power-b")
BOOKIE_SETTINGS = {
    "journalSyncData": True,
    "journalMaxSizeMB": 1,
    "journalPreAllocSizeMB": 1,
    "dbStorage_writeCacheMaxSizeMb": 1,
    "logSizeLimit": 262144,
    "flushInterval": 100,
    "dbStorage_readAheadCacheMaxSizeMb": 4,
}
BROKER_SETTINGS = {
    "brokerDeduplicationEnabled": True,
    "managedLedgerMaxEntriesPerLedger": 300,
    "managedLedgerMinLedgerRolloverTimeMinutes": 0,
}

pytestmark = pytest.mark.timeout(600)


@dataclass
class AckedSend:
    payload: bytes
    acked: tuple[int, int] | None = None
    """(ledger id, entry id) once acknowledged."""
    acked_at: float = 0.0


@dataclass
class PowerLossHistory:
    sends: dict[str, list[AckedSend]] = field(default_factory=lambda: {topic: [] for topic in TOPICS})
    damaged_at: dict[int, float] = field(default_factory=dict)
    """Bookie index → when its disk was last damaged (entries acked before: may be lost there)."""
    cuts: list[str] = field(default_factory=list)
    """What each cut did and reverted (printed)."""
    cut_count: int = 0


class PowerLossCluster(ProcessCluster):
    """A ProcessCluster whose bookie ``i`` keeps its dirs on faultfs mount ``fs/bookie-i``."""

    def mount(self, index: int) -> FaultFs:
        return mount(self.root / "backing" / f"bookie-{index}", self.root / "fs" / f"bookie-{index}")


@contextlib.asynccontextmanager
async def power_loss_cluster(
    root: Path, bookies: int = BOOKIES, brokers: int = 1, bookie_settings: dict[str, object] | None = None
) -> AsyncIterator[tuple[PowerLossCluster, list[FaultFs]]]:
    cluster = PowerLossCluster(
        root,
        bookies,
        dict(BROKER_SETTINGS),
        broker_count=brokers,
        bookie_settings=dict(bookie_settings or BOOKIE_SETTINGS),
        journal_root=root / "fs",
        ledger_root=root / "fs",
    )
    mounts: list[FaultFs] = []
    try:
        mounts.extend(cluster.mount(i) for i in range(bookies))
        await cluster.start()
        yield cluster, mounts
    except BaseException:
        print(cluster.log_tails())
        raise
    finally:
        await cluster.stop()
        for fs in mounts:
            fs.unmount()


async def power_cycle(
    cluster: PowerLossCluster,
    mounts: list[FaultFs],
    index: int,
    cut: bool = True,
    offline: Callable[[Path], str] | None = None,
    keep: tuple[float, int] = (0.0, 0),
) -> tuple[dict[str, Any], str]:
    """SIGKILL bookie ``index``, cut its power (unless not ``cut``: a plain kill; ``keep``:
    a partial cut's keep probability and seed), run ``offline`` on its backing dir (the
    damage it did, as a note), remount, restart it; the cut's report and the note."""
    await cluster.kill_bookie(index)
    report = await asyncio.to_thread(mounts[index].power_cut, *keep) if cut else {}
    await asyncio.to_thread(mounts[index].unmount)
    note = offline(mounts[index].backing) if offline is not None else ""
    mounts[index] = await asyncio.to_thread(cluster.mount, index)
    await cluster.start_bookie(index)
    return report, note


async def produce_recording(
    service_url: str, topic: str, rng: random.Random, sends: list[AckedSend], stop: asyncio.Event
) -> None:
    async with Client(service_url) as client:
        producer = await client.create_producer(
            topic, producer_name=f"{topic}-p", batching_enabled=False, send_timeout_millis=60_000
        )
        while not stop.is_set():
            send = AckedSend(f"{topic}:{len(sends)}:".encode() + rng.randbytes(rng.choice((10, 200, 1500, 6000))))
            sends.append(send)
            message_id = await producer.send(send.payload)
            send.acked, send.acked_at = (message_id.ledger_id(), message_id.entry_id()), time.monotonic()


def newest_file(directory: Path, suffix: str) -> Path | None:
    files = sorted((p for p in directory.rglob(f"*{suffix}") if p.is_file()), key=lambda p: p.name)
    return files[-1] if files else None


def damage_tail(backing: Path, rng: random.Random) -> str:
    """Tear or flip the tail of the newest journal segment or entry log in ``backing``."""
    target = newest_file(backing / "journal", ".txn") if rng.random() < 0.5 else newest_file(backing, ".log")
    if target is None:
        return "no file to damage"
    if rng.random() < 0.5:
        start, end = damage.tear_tail(target, rng.choice((1, 17, 512, 4096)))
        return f"tore {target.name} [{start}, {end})"
    return f"flipped {target.name} at {damage.flip_bits(target, rng, count=rng.choice((1, 3)))}"


@dataclass(frozen=True)
class CutPlan:
    """One cut, drawn from the seeded rng before it happens."""

    number: int
    bookie: int
    aimed: bool
    """Wait for unsynced changes (at most ``wait_s``) instead of sleeping ``wait_s``."""
    wait_s: float
    with_broker: bool
    damage: bool
    keep: tuple[float, int]
    """A partial cut's keep probability and seed; (0.0, 0): everything unsynced is dropped."""

    @classmethod
    def draw(cls, number: int, rng: random.Random, damaged_cuts: int) -> CutPlan:
        bookie, aimed = rng.randrange(BOOKIES), rng.random() < AIMED_FRACTION
        wait_s = rng.uniform(0.5, 2.0) if aimed else rng.uniform(0.0, 1.5)
        partial = rng.random() < PARTIAL_FRACTION
        return cls(
            number,
            bookie,
            aimed,
            wait_s,
            with_broker=number % BROKER_EVERY == BROKER_EVERY - 1,
            damage=bookie == DAMAGED_BOOKIE and (damaged_cuts + 1) % DAMAGE_EVERY == 0,
            keep=(PARTIAL_KEEP, rng.randrange(1 << 30)) if partial else (0.0, 0),
        )

    def describe(self, report: dict[str, Any], damage_note: str) -> str:
        how = "".join(
            text
            for text, on in (
                (" (aimed)", self.aimed),
                (" (partial)", self.keep[0]),
                (" with the broker", self.with_broker),
            )
            if on
        )
        lost = f"{report['bytes_dropped']}+{report['bytes_restored']} bytes, {report['entries_reverted']} entries"
        return f"cut {self.number}{how}: bookie-{self.bookie} lost {lost}{'; ' + damage_note if damage_note else ''}"


def acked_counts(history: PowerLossHistory) -> list[int]:
    return [sum(1 for s in sends if s.acked) for sends in history.sends.values()]


def progressed(history: PowerLossHistory, before: list[int]) -> bool:
    """Every topic has had 10 more acks since ``before``: each is loaded and writing, so every
    cut lands on a cluster that is doing work (not on one still recovering from the last)."""
    return all(now >= then + 10 for now, then in zip(acked_counts(history), before, strict=True))


async def cut_cycles(
    cluster: PowerLossCluster, mounts: list[FaultFs], history: PowerLossHistory, rng: random.Random
) -> None:
    deadline = time.monotonic() + BUDGET_S
    damaged_cuts = 0
    for number in range(CUTS):
        if time.monotonic() > deadline:
            break
        before = acked_counts(history)
        await wait_for(lambda b=before: progressed(history, b), timeout_s=60, message="every topic writes between cuts")
        plan = CutPlan.draw(number, rng, damaged_cuts)
        damaged_cuts += plan.bookie == DAMAGED_BOOKIE
        await one_cut(cluster, mounts, history, plan, rng)


async def one_cut(
    cluster: PowerLossCluster, mounts: list[FaultFs], history: PowerLossHistory, plan: CutPlan, rng: random.Random
) -> None:
    if plan.aimed:
        await unsynced_moment(mounts[plan.bookie], timeout_s=plan.wait_s)
    else:
        await asyncio.sleep(plan.wait_s)  # the seeded moment (not synchronisation)
    if plan.with_broker:  # overlapping: the broker dies with the bookie, its ledgers get recovered
        await cluster.kill_broker(0)
    offline = (lambda backing: damage_tail(backing, rng)) if plan.damage else None
    report, damage_note = await power_cycle(cluster, mounts, plan.bookie, offline=offline, keep=plan.keep)
    if plan.damage:
        history.damaged_at[plan.bookie] = time.monotonic()
    if plan.with_broker:
        await cluster.start_broker(0, same_ports=True)
    assert not report["unrevertible"], report
    history.cut_count += 1
    history.cuts.append(plan.describe(report, damage_note))
    history.cuts.extend(f"    {line}" for line in report["reverted"])


async def unsynced_moment(fs: FaultFs, timeout_s: float) -> bool:
    """Wait (at most ``timeout_s``) for a moment when the bookie on ``fs`` has written more
    than sqlite's shared-memory file without syncing it, or changed a directory without
    syncing it: a cut then has something to drop. Whether it still has when the kill lands
    is up to the race."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pending = await asyncio.to_thread(fs.pending)
        if pending["files"] > 1 or pending["entries"] > 0:
            return True
        await asyncio.sleep(0.005)
    return False


async def create_subscriptions(service_url: str) -> None:
    async with Client(service_url) as client:
        for topic in TOPICS:
            consumer = await client.subscribe(topic, "check", initial_position=InitialPosition.Earliest)
            await consumer.close()


async def ledger_metadata(cluster: PowerLossCluster, ledger_ids: set[int]) -> dict[int, LedgerMetadata]:
    store = await open_metadata_store(cluster.metadata_url, session_timeout_ms=10_000)
    try:
        found = {}
        for ledger_id in ledger_ids:
            result = await store.get(ledger_path(ledger_id))
            assert result is not None, f"ledger {ledger_id} of an acked entry has no metadata"
            found[ledger_id] = LedgerMetadata.from_bytes(ledger_id, result.value, result.version)
        return found
    finally:
        await store.close()


async def read_replicas(
    cluster: PowerLossCluster, acked: list[AckedSend], metadata: dict[int, LedgerMetadata]
) -> dict[tuple[str, int, int], bytes | None]:
    """READ_ENTRY of every acked entry from every bookie its ledger's metadata names for it."""
    wanted: dict[str, list[tuple[int, int]]] = {}
    for send in acked:
        assert send.acked is not None
        ledger_id, entry_id = send.acked
        for bookie in metadata[ledger_id].write_set(entry_id):
            wanted.setdefault(bookie, []).append((ledger_id, entry_id))
    answers: dict[tuple[str, int, int], bytes | None] = {}
    for bookie, entries in wanted.items():
        host, port = bookie.rsplit(":", 1)
        client = await RawBookieClient.connected(host, int(port))
        try:
            for start in range(0, len(entries), 200):
                chunk = entries[start : start + 200]
                requests = [ReadEntry(id=client.next_id(), ledger_id=lid, first_entry_id=eid) for lid, eid in chunk]
                await client.send(requests)
                responses = await client.answers(requests)
                for request, (lid, eid) in zip(requests, chunk, strict=True):
                    response = responses[request.id]
                    payloads = dict(response.entries) if isinstance(response, ReadEntryResponse) else {}
                    answers[(bookie, lid, eid)] = payloads.get(eid)
        finally:
            client.close()
    return answers


def bookie_ids(cluster: PowerLossCluster) -> dict[str, int]:
    return {f"{b.host}:{b.port}": i for i, b in enumerate(cluster.bookies)}


async def check_consumption(service_url: str, topic: str, sends: list[AckedSend]) -> None:
    """Every acked message consumed once, in send order; nothing consumed that was not sent."""
    acked = [s.payload for s in sends if s.acked]
    consumed = await consume_all(service_url, topic, len(acked))
    print(f"{topic}: {len(sends)} sent, {len(acked)} acked, {len(consumed)} consumed")
    sent = {s.payload for s in sends}
    assert [p for p in consumed if p not in sent] == [], "consumed what was never sent"
    assert len(consumed) == len(set(consumed)), "a message consumed twice (dedup is on)"
    positions = {p: i for i, p in enumerate(consumed)}
    lost = [p[:20] for p in acked if p not in positions]
    assert lost == [], f"{topic}: {len(lost)} of {len(acked)} acked messages lost: {lost[:5]}"
    assert [positions[p] for p in acked] == sorted(positions[p] for p in acked), "out of send order"


async def check_replicas(cluster: PowerLossCluster, history: PowerLossHistory) -> None:
    """Every acked entry on every bookie its ledger's metadata names, byte-identical (a
    damaged bookie may lack those acked before its damage, never hold wrong bytes)."""
    acked = [s for sends in history.sends.values() for s in sends if s.acked and s.acked[0] >= 0]
    metadata = await ledger_metadata(cluster, {s.acked[0] for s in acked if s.acked})
    replicas = await read_replicas(cluster, acked, metadata)
    index_of = bookie_ids(cluster)
    missing, wrong = [], []
    for send in acked:
        assert send.acked is not None
        ledger_id, entry_id = send.acked
        copies = {b: replicas[(b, ledger_id, entry_id)] for b in metadata[ledger_id].write_set(entry_id)}
        present = {b: data for b, data in copies.items() if data is not None}
        if len(set(present.values())) > 1 or any(send.payload not in data for data in present.values()):
            wrong.append((ledger_id, entry_id, sorted(present)))
        for bookie, data in copies.items():
            damaged_at = history.damaged_at.get(index_of[bookie])
            if data is None and (damaged_at is None or send.acked_at > damaged_at):
                missing.append((bookie, ledger_id, entry_id))
    print(f"{len(acked)} acked entries checked on {len(replicas)} replicas after {history.cut_count} cuts")
    assert wrong == [], f"replicas that differ or lack the payload: {wrong[:10]}"
    assert missing == [], f"{len(missing)} acked entries missing on a bookie that held them: {missing[:10]}"


@pytest.mark.expect_error_log(r"checksum mismatch", r"no such record at log")  # reads of the tails damaged on purpose
async def test_acked_entries_survive_power_cuts_on_a_minority_of_bookies(tmp_path: Path) -> None:
    skip_unless_available()
    rng = random.Random(SEED)
    history = PowerLossHistory()
    async with power_loss_cluster(tmp_path) as (cluster, mounts):
        await create_subscriptions(cluster.service_url)  # else rolled-over ledgers are deleted unread
        stop = asyncio.Event()
        producers = [
            asyncio.create_task(
                produce_recording(cluster.service_url, t, random.Random(rng.random()), history.sends[t], stop)
            )
            for t in TOPICS
        ]
        try:
            await cut_cycles(cluster, mounts, history, rng)
            await asyncio.sleep(1.0)
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*producers), timeout=120)
        print("\n".join(history.cuts))
        assert history.cut_count >= min(CUTS, 20), f"only {history.cut_count} cuts in {BUDGET_S} s"
        for topic in TOPICS:
            await check_consumption(cluster.service_url, topic, history.sends[topic])
        await check_replicas(cluster, history)


@pytest.mark.parametrize(
    ("sync_data", "cut", "kept"),
    [(True, True, 50), (False, False, 50), (False, True, 0)],
    ids=["synced-journal-cut", "unsynced-journal-kill-only", "unsynced-journal-cut"],
)
async def test_a_power_cut_keeps_what_was_synced_and_nothing_more(
    tmp_path: Path, sync_data: bool, cut: bool, kept: int
) -> None:
    """The control: with journalSyncData=false the adds are acked unsynced; a SIGKILL keeps
    them (the page cache survives), a power cut does not. With the sync, a cut keeps all."""
    skip_unless_available()
    settings = {**BOOKIE_SETTINGS, "journalSyncData": sync_data, "flushInterval": 600_000}
    async with power_loss_cluster(tmp_path, bookies=1, brokers=0, bookie_settings=settings) as (cluster, mounts):
        bookie = cluster.bookies[0]
        client = await RawBookieClient.connected(bookie.host, bookie.port)
        try:
            adds = [client.add(7, entry_id, f"entry {entry_id} ".encode() * 20) for entry_id in range(50)]
            await client.send(adds)
            answers = await client.answers(adds)
            assert all(is_ack(answers[add.id], add) for add in adds)
        finally:
            client.close()
        await power_cycle(cluster, mounts, 0, cut=cut)
        bookie = cluster.bookies[0]
        client = await RawBookieClient.connected(bookie.host, bookie.port)
        try:
            reads = [ReadEntry(id=client.next_id(), ledger_id=7, first_entry_id=add.entry_id) for add in adds]
            await client.send(reads)
            answers = await client.answers(reads)
        finally:
            client.close()
        found = {
            entry_id: payload
            for response in answers.values()
            if isinstance(response, ReadEntryResponse)
            for entry_id, payload in response.entries
        }
        assert len(found) == kept
        assert all(found[add.entry_id] == add.payload for add in adds if add.entry_id in found)


async def test_a_fence_survives_a_power_cut(tmp_path: Path) -> None:
    """A fence is answered only once durable: after a cut, the old writer's adds still get
    LedgerFenced (else two brokers could both write one ledger)."""
    skip_unless_available()
    async with power_loss_cluster(tmp_path, bookies=1, brokers=0) as (cluster, mounts):
        bookie = cluster.bookies[0]
        client = await RawBookieClient.connected(bookie.host, bookie.port)
        try:
            assert is_ack(await client.request(add := client.add(9, 0, b"before the fence")), add)
            fenced = await client.request(ReadLac(id=client.next_id(), ledger_id=9, fence=True))
            assert isinstance(fenced, ReadLacResponse), fenced
        finally:
            client.close()
        await power_cycle(cluster, mounts, 0)
        bookie = cluster.bookies[0]
        client = await RawBookieClient.connected(bookie.host, bookie.port)
        try:
            refused = await client.request(client.add(9, 1, b"from the old writer"))
        finally:
            client.close()
        assert isinstance(refused, Error) and refused.code == "LedgerFenced", refused
