"""Nothing acknowledged is lost: SIGKILL every process of a standalone cluster and restart it."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from minipulsar import Client, InitialPosition
from tests.support.process import ServerProcess

STANDALONE_ARGS = [
    "--bookies",
    "3",
    "--broker-port",
    "0",
    "--web-port",
    "0",
    "--metastore-port",
    "0",
    "--metastore-http-port",
    "0",
    "--bookie-port",
    "0",
    "--bookie-http-port",
    "0",
]


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children first-level and beyond), from /proc."""
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                found.append(child)
                frontier.append(child)
    return found


def kill_everything(standalone_process: ServerProcess) -> None:
    """SIGKILL the children first (so none gets a polite SIGTERM), then the launcher."""
    assert standalone_process.proc is not None
    children = descendants(standalone_process.proc.pid)
    assert len(children) >= 5, f"expected metastore + 3 bookies + broker, found {children}"
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    standalone_process.kill()
    for pid in children:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass  # not our child: reaped by init once its parent died


def standalone_process(data_dir: Path, log: Path) -> ServerProcess:
    return ServerProcess("standalone", ["--data-dir", str(data_dir), *STANDALONE_ARGS], log)


@pytest.mark.expect_error_log(r"ended unexpectedly")  # the supervisor may see a child die first
async def test_sigkill_of_every_process_loses_no_acknowledged_message(tmp_path: Path) -> None:
    """Goal: after SIGKILL of metastore, bookies and broker at once, a restarted cluster on the
    same data dir delivers every acknowledged message, in order, and none of the acknowledged ones.
    Method: 100 messages produced and acknowledged by the subscription first; then 1,000 produced
    (all receipts in); kill -9 everything; restart; the subscription receives exactly the 1,000."""
    data_dir = tmp_path / "data"
    first = standalone_process(data_dir, tmp_path / "standalone-1.log")
    await asyncio.to_thread(first.start, 60)
    try:
        async with Client(f"pulsar://{first.address}") as client:
            consumer = await client.subscribe("crash", "sub", initial_position=InitialPosition.Earliest)
            producer = await client.create_producer("crash")
            for i in range(100):
                await producer.send(f"acked-{i}".encode())
            for _ in range(100):
                await consumer.acknowledge(await consumer.receive(timeout_millis=10_000))
            sends = [producer.send(f"message-{i}".encode()) for i in range(1000)]
            ids = await asyncio.gather(*sends)
            assert len(set(ids)) == 1000
    finally:
        kill_everything(first)

    second = standalone_process(data_dir, tmp_path / "standalone-2.log")
    await asyncio.to_thread(second.start, 60)
    try:
        async with Client(f"pulsar://{second.address}") as client:
            consumer = await client.subscribe("crash", "sub")
            received = []
            for _ in range(1000):
                message = await consumer.receive(timeout_millis=20_000)
                received.append(message.data())
                await consumer.acknowledge(message)
            assert received == [f"message-{i}".encode() for i in range(1000)]
    finally:
        await asyncio.to_thread(second.stop)
