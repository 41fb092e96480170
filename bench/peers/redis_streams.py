"""Redis Streams as a peer: XADD with an append-only file, ``appendfsync always`` or ``everysec``.

The server is the machine's ``redis-server`` (``make bench-peers`` installs Debian's package
where it can), run on a free loopback port with its data dir on the journal mount, no RDB
snapshots, ``appendonly yes``. Producer: one connection pipelining ``XADD <stream> * d
<payload>`` (:mod:`bench.peers.resp`), acknowledged by the reply (the entry id). Consumer:
another connection looping ``XREAD BLOCK 100 COUNT 1000 STREAMS <stream> <last id>``.

Durability as Redis documents it: with ``always`` the AOF is fsynced before the replies of
each event-loop round are sent (so a pipelined round shares one fsync: group commit); with
``everysec`` a background thread fsyncs once a second and a reply means "in the OS's cache":
up to ~1 s of acknowledged writes can be lost on power failure.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from bench.peers.resp import RespConnection, encode
from bench.peers.server import free_port, running_server
from bench.peers.workload import Done, PeerWorkload, ReceiveCounter, run_workload

MODES = {
    "always": "appendonly yes, appendfsync always: AOF fsynced before replies (one fsync per event-loop round)",
    "everysec": "appendonly yes, appendfsync everysec: acked before fsync; up to ~1 s lost on power failure",
}
STREAM = "bench"


def unavailable_reason() -> str | None:
    """None when a redis-server binary is on PATH; else why this peer is skipped."""
    if shutil.which("redis-server") is None:
        return "redis-server not found (make bench-peers tries `apt-get install -y redis-server`)"
    return None


def server_argv(port: int, data_dir: Path, appendfsync: str) -> list[str]:
    return [
        "redis-server",
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        str(data_dir),
        "--appendonly",
        "yes",
        "--appendfsync",
        appendfsync,
        "--save",
        "",
        "--protected-mode",
        "no",
        "--daemonize",
        "no",
        "--logfile",
        "",
    ]


async def run(appendfsync: str, data_dir: Path, log_path: Path, workload: PeerWorkload, emit: Any) -> dict[str, Any]:
    """One row: the workload against a fresh redis-server with ``appendfsync``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with running_server(server_argv(port, data_dir, appendfsync), port, log_path):
        producer = await RespConnection.open("127.0.0.1", port)
        consumer = await RespConnection.open("127.0.0.1", port)
        receiver = ReceiveCounter()
        reader = asyncio.get_running_loop().create_task(_consume(consumer, receiver))
        command = encode("XADD", STREAM, "*", "d", b"x" * workload.size_bytes)
        send = producer.send

        def issue(done: Done) -> None:
            send(command, lambda _reply, error: done(error))

        try:
            figures = await run_workload(issue, receiver, workload, f"redis appendfsync {appendfsync}", emit)
            figures["server_version"] = (
                (await producer.call("INFO", "server")).decode().split("redis_version:")[1].split()[0]
            )
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            producer.close()
            consumer.close()
    return figures | {"durability": MODES[appendfsync]}


async def _consume(connection: RespConnection, receiver: ReceiveCounter) -> None:
    last_id = b"0"
    while True:
        reply = await connection.call("XREAD", "BLOCK", 100, "COUNT", 1000, "STREAMS", STREAM, last_id)
        if not reply:
            continue
        entries = reply[0][1]
        if entries:
            last_id = entries[-1][0]
            receiver.add(len(entries))
