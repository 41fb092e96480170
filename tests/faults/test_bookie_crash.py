"""SIGKILL a real bookie process again and again while a writer keeps adding: after every
restart, every acknowledged entry reads back byte-identical.

The bookie runs with a tiny write cache, tiny entry logs and journal segments and a 100 ms
flush interval, so that checkpoints (write-cache flush → entry logs → index → lastMark →
journal trimming) and journal rollovers happen all the time. Each kill is aimed, by a seeded
RNG, either at a checkpoint (right after its "started" line appears in the bookie's DEBUG
log), at a journal rollover (right after "rolling over"), or at a random instant. After the
kill the log says where it landed: a checkpoint or a rollover that started and never
finished. The test requires at least 20 kills, some inside checkpoints and some inside
rollovers.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from minipulsar.net import connect
from minipulsar.protocol.commands import AddEntry, ReadEntry
from tests.support.entries import payload_of_varied_size
from tests.support.process import ServerProcess, started
from tests.support.raw_client import RawClient
from tests.support.servers import bookie_process

SEED = int(os.environ.get("MINIPULSAR_CRASH_SEED", "20240603"))
KILLS_MIN = 20
KILLS_IN_CHECKPOINT_MIN = 3
KILLS_IN_ROLLOVER_MIN = 2
TIME_BUDGET_S = 75.0
"""Stop starting new kill cycles after this (the whole test stays under ~90 s)."""
LEDGERS = 6
WINDOW = 24
"""Adds in flight at once (pipelined on one connection)."""

CHECKPOINT_STARTED = re.compile(r"checkpoint (\d+) started")
CHECKPOINT_DONE = re.compile(r"checkpoint (\d+) done")
ROLLING = re.compile(r"journal (\S+): rolling over (from segment|ahead of time)")
"""A roll switches to a segment created ahead of time (bookie/journal/directory.py): its creation is the
part of a rollover that touches the disk, so a kill during it counts as one mid-rollover."""
ROLLED = re.compile(r"journal (\S+): (rolled over to segment|created segment \S+ ahead of time)")


PAYLOAD_SIZES = (0, 50, 300, 800, 1500, 3000, 6000, 20_000)
JOURNALS, LEDGER_DIRS = ("journal-a", "journal-b"), ("ledgers-a", "ledgers-b")
CRASH_BOOKIE = {
    "journalMaxSizeMB": 1,
    "dbStorage_writeCacheMaxSizeMb": 1,
    "logSizeLimit": 262144,
    "flushInterval": 100,
    "dbStorage_readAheadCacheMaxSizeMb": 4,
}
"""Tiny journal segments, write cache and entry logs, a 100 ms flush interval: checkpoints and
rollovers all the time (see the module docstring)."""


def crash_payload(ledger_id: int, entry_id: int) -> bytes:
    return payload_of_varied_size(ledger_id, entry_id, PAYLOAD_SIZES, seed=SEED)


def crash_bookie(root: Path, metadata_url: str, port: int, cycle: int) -> ServerProcess:
    """The bookie of kill cycle ``cycle``, logging at DEBUG (the kill trigger reads its log)."""
    return bookie_process(
        root,
        metadata_url,
        port=port,
        journals=JOURNALS,
        ledgers=LEDGER_DIRS,
        settings=CRASH_BOOKIE,
        name=f"bookie-{cycle:02d}",
        args=("--log-level", "DEBUG"),
    )


@dataclass
class Ledgers:
    """What the writer attempted and what the bookie acknowledged."""

    next_entry: list[int] = field(default_factory=lambda: [0] * LEDGERS)
    acked: list[set[int]] = field(default_factory=lambda: [set() for _ in range(LEDGERS)])

    def unacked(self) -> list[tuple[int, int]]:
        return [
            (ledger_id, entry_id)
            for ledger_id in range(LEDGERS)
            for entry_id in range(self.next_entry[ledger_id])
            if entry_id not in self.acked[ledger_id]
        ]

    @property
    def total_acked(self) -> int:
        return sum(len(a) for a in self.acked)


def send_add(conn: RawClient, ledgers: Ledgers, ledger_id: int, entry_id: int) -> asyncio.Future:
    """One pipelined add; its entry counts as acknowledged once its response came."""
    future = conn.request(
        AddEntry, ledger_id=ledger_id, entry_id=entry_id, lac=entry_id - 1, payload=crash_payload(ledger_id, entry_id)
    )

    def done(f: asyncio.Future) -> None:
        if not f.cancelled() and f.exception() is None:
            ledgers.acked[ledger_id].add(entry_id)

    future.add_done_callback(done)
    return future


async def write_until_cancelled(conn: RawClient, ledgers: Ledgers, rng: random.Random) -> None:
    """Pipelined adds to random ledgers, ``WINDOW`` in flight; errors (the kill) end nothing
    here — the task is cancelled by the test once the bookie is dead."""
    window = asyncio.Semaphore(WINDOW)
    while True:
        await window.acquire()
        ledger_id = rng.randrange(LEDGERS)
        entry_id = ledgers.next_entry[ledger_id]
        ledgers.next_entry[ledger_id] += 1
        send_add(conn, ledgers, ledger_id, entry_id).add_done_callback(lambda f: (f.exception(), window.release()))


async def resend_unacked(conn: RawClient, ledgers: Ledgers) -> None:
    """Re-send what the kill left unanswered (as a BookKeeper client would to a new ensemble):
    the same ids and bytes, so ledgers stay gapless. Some were durable already: re-adding
    them replaces them with the same bytes."""
    await asyncio.gather(*(send_add(conn, ledgers, ledger, entry) for ledger, entry in ledgers.unacked()))
    assert not ledgers.unacked()


async def verify_all(conn: RawClient, ledgers: Ledgers) -> None:
    for ledger_id in range(LEDGERS):
        expected = ledgers.next_entry[ledger_id]
        got: list[tuple[int, bytes]] = []
        while len(got) < expected:
            response = await conn.request(ReadEntry, ledger_id=ledger_id, first_entry_id=len(got), count=2000)
            assert response.entries, f"ledger {ledger_id}: nothing at entry {len(got)} of {expected}"
            got.extend((e, p) for e, p in response.entries)
        assert [e for e, _ in got] == list(range(expected)), f"ledger {ledger_id}: entry ids differ"
        for entry_id, payload in got:
            assert payload == crash_payload(ledger_id, entry_id), f"entry {ledger_id}:{entry_id} differs"


class LogTail:
    """New lines of a bookie's log, read as they are written (the kill trigger)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = ""

    def new_lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(data)
        text = self._partial + data.decode(errors="replace")
        lines = text.split("\n")
        self._partial = lines.pop()
        return lines


def where_it_landed(log_path: Path) -> set[str]:
    """``{"checkpoint", "rollover"}``: what had started and not finished when the process died."""
    text = log_path.read_text(errors="replace")
    started = [int(m) for m in CHECKPOINT_STARTED.findall(text)]
    done = {int(m) for m in CHECKPOINT_DONE.findall(text)}
    landed = set()
    if started and started[-1] not in done:
        landed.add("checkpoint")
    rolling: dict[str, int] = {}
    for line in text.splitlines():
        if (m := ROLLING.search(line)) is not None:
            rolling[m.group(1)] = rolling.get(m.group(1), 0) + 1
        elif (m := ROLLED.search(line)) is not None:
            rolling[m.group(1)] -= 1
    if any(count > 0 for count in rolling.values()):
        landed.add("rollover")
    return landed


async def kill_when(process: ServerProcess, tail: LogTail, target: str, rng: random.Random) -> None:
    """Write for a little while, then SIGKILL at the next event of ``target`` (or at once for
    ``random``), a few hundred microseconds into it."""
    await asyncio.sleep(rng.uniform(0.05, 0.4))
    pattern = {"checkpoint": CHECKPOINT_STARTED, "rollover": ROLLING}.get(target)
    deadline = time.monotonic() + 3.0
    tail.new_lines()  # only events from now on
    while pattern is not None and time.monotonic() < deadline:
        if any(pattern.search(line) for line in tail.new_lines()):
            if rng.random() < 0.5:
                time.sleep(rng.uniform(0, 0.003))  # blocking on purpose: land deeper inside it
            break
        await asyncio.sleep(0.001)
    process.kill()


async def test_acknowledged_entries_survive_repeated_sigkills(tmp_path: Path, metastore: ServerProcess) -> None:
    """Goal: no acknowledged add is ever lost or altered, whatever instant the bookie dies at:
    mid-checkpoint (any step of the flush), mid-rollover, or anywhere else.
    Method: >= 20 cycles of: start the bookie on the same port and dirs; re-send the adds the
    last kill left unanswered; read back every acknowledged entry; write pipelined adds to
    6 ledgers; SIGKILL aimed at a checkpoint, a rollover or a random instant (seeded)."""
    rng = random.Random(SEED)
    ledgers = Ledgers()
    landed = {"checkpoint": 0, "rollover": 0}
    kills, port, started_at = 0, 0, time.monotonic()
    reused = 0
    while (
        kills < KILLS_MIN
        or landed["checkpoint"] < KILLS_IN_CHECKPOINT_MIN
        or landed["rollover"] < KILLS_IN_ROLLOVER_MIN
    ):
        assert time.monotonic() - started_at < TIME_BUDGET_S, (
            f"only {kills} kills, {landed} landed in checkpoints/rollovers within {TIME_BUDGET_S}s (seed {SEED})"
        )
        process = crash_bookie(tmp_path, metastore.url, port, kills)
        await asyncio.to_thread(process.start)
        port = process.port
        conn = await connect(RawClient, process.host, process.port)
        writer: asyncio.Future | None = None
        try:
            await resend_unacked(conn, ledgers)
            await verify_all(conn, ledgers)
            target = _next_target(rng, landed, kills)
            writer = asyncio.ensure_future(write_until_cancelled(conn, ledgers, rng))
            await kill_when(process, LogTail(process.log_path), target, rng)
            kills += 1
            for where in where_it_landed(process.log_path):
                landed[where] += 1
            reused += process.log_path.read_text(errors="replace").count("is written over recycled")
        finally:
            if writer is not None:
                writer.cancel()
            conn.abort()
            process.kill()
        await asyncio.sleep(0)  # let the failed requests' callbacks run
    # One last start: everything acknowledged is there, and nothing was lost on the way.
    process = crash_bookie(tmp_path, metastore.url, port, kills)
    async with started(process):
        conn = await connect(RawClient, process.host, process.port)
        await resend_unacked(conn, ledgers)
        await verify_all(conn, ledgers)
        conn.close()
    assert reused > 0, "journalReuseFiles: some segments were written over trimmed ones between kills"
    print(
        f"crash test: {kills} kills ({landed}), {reused} segments reused, {ledgers.total_acked} entries acked, "
        f"{time.monotonic() - started_at:.1f}s, seed {SEED}"
    )


def _next_target(rng: random.Random, landed: dict[str, int], kills: int) -> str:
    """Mostly aim where the required kills are still missing; otherwise anywhere."""
    if landed["rollover"] < KILLS_IN_ROLLOVER_MIN and rng.random() < 0.6:
        return "rollover"
    if landed["checkpoint"] < KILLS_IN_CHECKPOINT_MIN and rng.random() < 0.6:
        return "checkpoint"
    return rng.choice(["checkpoint", "rollover", "random", "random"])
