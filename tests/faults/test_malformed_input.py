"""Bad bytes on a raw socket get an ERROR or a closed connection; no server dies; others are served.

Each of the broker, a bookie and the metastore is sent, on its own raw connection: random
bytes; a length prefix of 2 GiB; valid msgpack naming an unknown command; a known command
with wrong field types. Meanwhile a normal client on another connection keeps working.
"""

from __future__ import annotations

import asyncio
import random
import struct

import msgpack

from minipulsar import Client
from minipulsar.metadata import open_metadata_store
from minipulsar.net import connect
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.codec import CommandDecoder, encode_bytes
from tests.support.cluster import ProcessCluster
from tests.support.raw_client import RawClient

CONNECT = encode_bytes(cmd.Connect(id=1, protocol_version=cmd.PROTOCOL_VERSION))


def frame(value: object) -> bytes:
    body = msgpack.packb(value, use_bin_type=True)
    return struct.pack(">I", len(body)) + body


WRONG_TYPES = {
    "broker": frame({"t": "SEND", "producer_id": "one", "sequence_id": [], "payload": 7}),
    "bookie": frame({"t": "ADD_ENTRY", "id": 5, "ledger_id": "x", "entry_id": 1.5, "payload": "text"}),
    "metastore": frame({"t": "MD_PUT", "id": 5, "path": 42, "value": {"not": "bytes"}}),
}

CASES = {
    "random bytes": lambda role: random.Random(7).randbytes(4096),
    "2 GiB length prefix": lambda role: struct.pack(">I", 2**31) + b"\x00" * 64,
    "unknown command": lambda role: CONNECT + frame({"t": "LAUNCH_ROCKETS", "id": 2}),
    "wrong field types": lambda role: CONNECT + WRONG_TYPES[role],
}


async def answer_to(
    host: str, port: int, data: bytes, until_closed: bool, timeout_s: float = 10.0
) -> tuple[list, bool]:
    """Send ``data``; return (commands received, whether the server closed the connection).

    Reads until the first ERROR, or with ``until_closed`` until the server closes.
    """
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(data)
    await writer.drain()
    decoder, received, closed = CommandDecoder(), [], False
    try:
        while until_closed or not any(isinstance(c, cmd.Error) for c in received):
            try:
                chunk = await asyncio.wait_for(reader.read(65536), timeout_s)
            except ConnectionResetError:  # closed with our unread garbage still in its buffer
                chunk = b""
            if not chunk:
                closed = True
                break
            decoder.feed(chunk)
            while (command := decoder.next_command()) is not None:
                received.append(command)
    finally:
        writer.close()
    return received, closed


async def normal_traffic_works(cluster: ProcessCluster, client: Client, round_: int) -> None:
    producer = await client.create_producer("healthy")
    consumer = await client.subscribe("healthy", f"sub-{round_}")
    await producer.send(b"still here")
    assert (await consumer.receive(timeout_millis=10_000)).data() == b"still here"
    await producer.close()
    await consumer.close()


async def test_every_server_survives_garbage(cluster: ProcessCluster) -> None:
    servers = {"broker": cluster.broker, "bookie": cluster.bookies[0], "metastore": cluster.metastore}
    store = await open_metadata_store(cluster.metadata_url, session_timeout_ms=5000)
    bookie = await connect(RawClient, cluster.bookies[0].host, cluster.bookies[0].port)
    async with Client(cluster.service_url) as client:
        for round_, (case, make) in enumerate(CASES.items()):
            for role, server in servers.items():
                expect_close = case in ("random bytes", "2 GiB length prefix")
                received, closed = await answer_to(server.host, server.port, make(role), expect_close)
                errors = [c for c in received if isinstance(c, cmd.Error)]
                assert errors or closed, f"{role} / {case}: neither an ERROR nor a close"
                if case in ("unknown command", "wrong field types"):
                    assert errors and errors[0].code == "InvalidCommand", f"{role} / {case}: {received}"
                if case == "2 GiB length prefix":
                    assert errors and errors[0].code == "TooLarge" and closed, f"{role} / {case}"
                assert server.running, f"{role} died on {case}\n{server.log_tail()}"
            await normal_traffic_works(cluster, client, round_)
            await store.put(f"/healthy/{round_}", b"ok")
            assert (await store.get(f"/healthy/{round_}")).value == b"ok"
            added = await bookie.request(cmd.AddEntry, ledger_id=999, entry_id=round_, payload=b"x")
            assert added.entry_id == round_
    bookie.close()
    await store.close()
