"""Goal: garbage on a raw socket costs the metastore nothing: each bad input gets an ERROR or a
closed connection, the process keeps running, and a normal client on another connection
keeps working throughout.

Method: one real metastore process; a raw TCP socket sends random bytes, a 2 GiB length
prefix, valid msgpack with an unknown command, MD_* commands with wrong field types or
values; after each, a MetastoreClient writes and reads."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest

from minipulsar.metadata import MetadataStore
from minipulsar.protocol.commands import Connected
from tests.support.fixtures import metastore_fixture
from tests.support.process import ServerProcess
from tests.support.raw_client import RawPeer

metastore = metastore_fixture(per_module=True)


async def open_peer(metastore: ServerProcess, *, handshake: bool = True) -> RawPeer:
    peer = await RawPeer.open(metastore.host, metastore.port)
    if handshake:
        assert isinstance(await peer.handshake(), Connected)
    return peer


async def assert_client_works(store: MetadataStore, metastore: ServerProcess, tag: str) -> None:
    assert metastore.running, metastore.log_tail()
    stat = await store.put(f"/garbage/after-{tag}", tag.encode())
    assert (await store.get(f"/garbage/after-{tag}")).value == tag.encode()
    assert stat.version >= 0


async def test_random_bytes_get_an_error_or_a_closed_connection(metastore: ServerProcess, store: MetadataStore) -> None:
    rng = random.Random(20240611)
    peer = await open_peer(metastore, handshake=False)
    await peer.send(b"\xff\xff\xff\xff" + rng.randbytes(64 * 1024))
    answer = await peer.receive_map()
    assert answer is None or (answer["t"] == "ERROR" and answer["code"] == "TooLarge"), answer
    assert answer is None or await peer.receive_map() is None  # then the connection is closed
    peer.close()
    await assert_client_works(store, metastore, "random")


async def test_well_framed_random_bodies_each_get_an_error_and_the_connection_survives(
    metastore: ServerProcess,
    store: MetadataStore,
) -> None:
    rng = random.Random(7)
    peer = await open_peer(metastore)
    for _ in range(20):
        body = rng.randbytes(rng.randrange(1, 200))
        await peer.send(struct.pack(">I", len(body)) + body)
    for _ in range(20):
        answer = await peer.receive_map()
        assert answer is not None and answer["t"] == "ERROR", answer
    await peer.send({"t": "MD_GET", "id": 42, "path": "/"})
    assert (await peer.receive_map())["t"] == "MD_GET_RESPONSE"
    peer.close()
    await assert_client_works(store, metastore, "framed-random")


async def test_a_2_gib_length_prefix_is_refused_before_buffering(
    metastore: ServerProcess, store: MetadataStore
) -> None:
    peer = await open_peer(metastore)
    await peer.send(struct.pack(">I", 2 * 1024**3) + b"\x00" * 1024)
    answer = await peer.receive_map()
    assert answer is not None and answer["t"] == "ERROR" and answer["code"] == "TooLarge", answer
    assert await peer.receive_map() is None
    peer.close()
    await assert_client_works(store, metastore, "2gib")


async def test_valid_msgpack_with_an_unknown_command(metastore: ServerProcess, store: MetadataStore) -> None:
    peer = await open_peer(metastore)
    await peer.send({"t": "NO_SUCH_COMMAND", "id": 7, "path": "/x"})
    await peer.send({"t": ["not", "a", "name"], "id": 8})
    await peer.send({"id": 9})
    for request_id in (7, 8, 9):
        answer = await peer.receive_map()
        assert answer == {"t": "ERROR", "code": "InvalidCommand", "id": request_id, "message": answer["message"]}, (
            answer
        )
    peer.close()
    await assert_client_works(store, metastore, "unknown")


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
    metastore: ServerProcess,
    store: MetadataStore,
    wire: dict[str, Any],
    code: str,
) -> None:
    peer = await open_peer(metastore)
    await peer.send(wire)
    answer = await peer.receive_map()
    assert answer is not None and answer["t"] == "ERROR" and answer["code"] == code and answer["id"] == 1, answer
    await peer.send({"t": "MD_CHILDREN", "id": 2, "path": "/"})  # the connection still serves
    assert (await peer.receive_map())["t"] == "MD_CHILDREN_RESPONSE"
    peer.close()
    assert await store.get("/g/x") is None
    await assert_client_works(store, metastore, "md-types")


async def test_md_commands_before_connect_are_refused(metastore: ServerProcess, store: MetadataStore) -> None:
    peer = await open_peer(metastore, handshake=False)
    await peer.send({"t": "MD_PUT", "id": 3, "path": "/g/early", "value": b"x"})
    answer = await peer.receive_map()
    assert answer is not None and answer["t"] == "ERROR" and answer["id"] == 3, answer
    assert await peer.receive_map() is None
    peer.close()
    assert await store.get("/g/early") is None
    await assert_client_works(store, metastore, "early")
