"""Goal: garbage on a raw socket costs the metastore nothing: each bad input gets an ERROR or a
closed connection, the process keeps running, and a normal client on another connection
keeps working throughout.

Method: one real metastore process; a raw TCP socket sends random bytes, a 2 GiB length
prefix, valid msgpack with an unknown command, MD_* commands with wrong field types or
values; after each, a MetastoreClient writes and reads."""

from __future__ import annotations

import asyncio
import random
import struct
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgpack
import pytest
import pytest_asyncio

from minipulsar.metadata import MetadataStore, open_metadata_store
from minipulsar.protocol.commands import PROTOCOL_VERSION
from minipulsar.protocol.frames import FrameDecoder
from tests.support.process import ServerProcess

READ_TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("garbage")
    process = ServerProcess("metastore", ["--port", "0", "--data-dir", str(tmp / "data")], tmp / "metastore.log")
    process.start()
    yield process
    assert process.stop() == 0, process.log_tail()


@pytest_asyncio.fixture
async def client(server: ServerProcess) -> AsyncIterator[MetadataStore]:
    store = await open_metadata_store(server.url)
    yield store
    await store.close()


class RawPeer:
    """A bare socket: send bytes, read back decoded frames (or see the server hang up)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.frames = FrameDecoder(max_frame_size=1 << 30)

    @classmethod
    async def open(cls, server: ServerProcess, *, handshake: bool = True) -> RawPeer:
        peer = cls(*await asyncio.open_connection(server.host, server.port))
        if handshake:
            peer.send_map({"t": "CONNECT", "id": 0, "protocol_version": PROTOCOL_VERSION})
            assert (await peer.read())["t"] == "CONNECTED"
        return peer

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    def send_map(self, wire: dict[str, Any]) -> None:
        body = msgpack.packb(wire, use_bin_type=True)
        self.send(struct.pack(">I", len(body)) + body)

    async def read(self) -> dict[str, Any] | None:
        """The next frame, or None once the server closed the connection."""
        while True:
            body = self.frames.next_frame()
            if body is not None:
                self.frames.compact()
                return msgpack.unpackb(body, raw=False)
            try:
                chunk = await asyncio.wait_for(self.reader.read(65536), READ_TIMEOUT_S)
            except ConnectionResetError:  # closed with our unread garbage still in its buffer
                return None
            if not chunk:
                return None
            self.frames.feed(chunk)

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except OSError:
            pass


async def assert_client_works(client: MetadataStore, server: ServerProcess, tag: str) -> None:
    assert server.running, server.log_tail()
    stat = await client.put(f"/garbage/after-{tag}", tag.encode())
    assert (await client.get(f"/garbage/after-{tag}")).value == tag.encode()
    assert stat.version >= 0


async def test_random_bytes_get_an_error_or_a_closed_connection(server: ServerProcess, client: MetadataStore) -> None:
    rng = random.Random(20240611)
    peer = await RawPeer.open(server, handshake=False)
    peer.send(b"\xff\xff\xff\xff" + rng.randbytes(64 * 1024))
    answer = await peer.read()
    assert answer is None or (answer["t"] == "ERROR" and answer["code"] == "TooLarge"), answer
    assert answer is None or await peer.read() is None  # then the connection is closed
    await peer.close()
    await assert_client_works(client, server, "random")


async def test_well_framed_random_bodies_each_get_an_error_and_the_connection_survives(
    server: ServerProcess,
    client: MetadataStore,
) -> None:
    rng = random.Random(7)
    peer = await RawPeer.open(server)
    for _ in range(20):
        body = rng.randbytes(rng.randrange(1, 200))
        peer.send(struct.pack(">I", len(body)) + body)
    for _ in range(20):
        answer = await peer.read()
        assert answer is not None and answer["t"] == "ERROR", answer
    peer.send_map({"t": "MD_GET", "id": 42, "path": "/"})
    assert (await peer.read())["t"] == "MD_GET_RESPONSE"
    await peer.close()
    await assert_client_works(client, server, "framed-random")


async def test_a_2_gib_length_prefix_is_refused_before_buffering(server: ServerProcess, client: MetadataStore) -> None:
    peer = await RawPeer.open(server)
    peer.send(struct.pack(">I", 2 * 1024**3) + b"\x00" * 1024)
    answer = await peer.read()
    assert answer is not None and answer["t"] == "ERROR" and answer["code"] == "TooLarge", answer
    assert await peer.read() is None
    await peer.close()
    await assert_client_works(client, server, "2gib")


async def test_valid_msgpack_with_an_unknown_command(server: ServerProcess, client: MetadataStore) -> None:
    peer = await RawPeer.open(server)
    peer.send_map({"t": "NO_SUCH_COMMAND", "id": 7, "path": "/x"})
    peer.send_map({"t": ["not", "a", "name"], "id": 8})
    peer.send_map({"id": 9})
    for request_id in (7, 8, 9):
        answer = await peer.read()
        assert answer == {"t": "ERROR", "code": "InvalidCommand", "id": request_id, "message": answer["message"]}, (
            answer
        )
    await peer.close()
    await assert_client_works(client, server, "unknown")


@pytest.mark.parametrize(
    "wire, code",
    [
        ({"t": "MD_PUT", "id": 1, "path": 123, "value": "text"}, "InvalidCommand"),
        ({"t": "MD_PUT", "id": 1, "path": "/g/x", "value": b"", "expected_version": "zero"}, "InvalidCommand"),
        ({"t": "MD_PUT", "id": 1, "path": "/g/x", "value": b"", "ephemeral": "yes"}, "InvalidCommand"),
        ({"t": "MD_PUT", "id": 1, "path": "no-slash", "value": b""}, "InvalidCommand"),
        ({"t": "MD_PUT", "id": 1, "path": "/g//x", "value": b""}, "InvalidCommand"),
        ({"t": "MD_PUT", "id": 1, "path": "/g/x", "value": b"", "expected_version": -7}, "InvalidCommand"),
        ({"t": "MD_PUT", "id": 1, "path": "/g/x", "value": b"", "ephemeral": True}, "InvalidCommand"),
        (
            {"t": "MD_PUT", "id": 1, "path": "/g/x", "value": b"", "ephemeral": True, "session_id": 987654},
            "SessionExpired",
        ),
        ({"t": "MD_DELETE", "id": 1, "path": "/"}, "InvalidCommand"),
        ({"t": "MD_WATCH", "id": 1, "path": {"a": 1}}, "InvalidCommand"),
        ({"t": "MD_SESSION_CREATE", "id": 1, "timeout_ms": 1.5}, "InvalidCommand"),
        ({"t": "MD_SESSION_KEEPALIVE", "id": 1, "session_id": 424242}, "SessionExpired"),
    ],
)
async def test_md_commands_with_wrong_field_types_or_values(
    server: ServerProcess,
    client: MetadataStore,
    wire: dict[str, Any],
    code: str,
) -> None:
    peer = await RawPeer.open(server)
    peer.send_map(wire)
    answer = await peer.read()
    assert answer is not None and answer["t"] == "ERROR" and answer["code"] == code and answer["id"] == 1, answer
    peer.send_map({"t": "MD_CHILDREN", "id": 2, "path": "/"})  # the connection still serves
    assert (await peer.read())["t"] == "MD_CHILDREN_RESPONSE"
    await peer.close()
    assert await client.get("/g/x") is None
    await assert_client_works(client, server, "md-types")


async def test_md_commands_before_connect_are_refused(server: ServerProcess, client: MetadataStore) -> None:
    peer = await RawPeer.open(server, handshake=False)
    peer.send_map({"t": "MD_PUT", "id": 3, "path": "/g/early", "value": b"x"})
    answer = await peer.read()
    assert answer is not None and answer["t"] == "ERROR" and answer["id"] == 3, answer
    assert await peer.read() is None
    await peer.close()
    assert await client.get("/g/early") is None
    await assert_client_works(client, server, "early")
