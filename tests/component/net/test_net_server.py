"""Goal: the server side of a connection refuses bad peers with a typed ERROR — a command
before CONNECT, a wrong protocol version, an oversized frame, an unknown command — and
keeps serving everyone else (and, for a bad body, that same connection)."""

from __future__ import annotations

import asyncio

import pytest

from minipulsar.errors import ErrorCode, UnsupportedVersionError
from minipulsar.net.client import connect
from minipulsar.protocol.commands import (
    PROTOCOL_VERSION,
    Connect,
    Connected,
    Error,
    Lookup,
    LookupResponse,
    Ping,
    Pong,
)
from minipulsar.protocol.frames import LENGTH
from tests.support.net import TestClientConnection
from tests.support.process import wait_for
from tests.support.raw_client import RawPeer


@pytest.fixture
async def raw(server):
    peers: list[RawPeer] = []

    async def open_peer() -> RawPeer:
        peer = await RawPeer.open(server.host, server.port)
        peers.append(peer)
        return peer

    yield open_peer
    for peer in peers:
        peer.close()


async def test_handshake_answers_connected_with_the_frame_limit(server, raw) -> None:
    peer = await raw()
    connected = await peer.handshake()
    assert connected == Connected(
        id=0, protocol_version=PROTOCOL_VERSION, max_frame_size=connected.max_frame_size, server_version="minipulsar"
    )
    assert connected.max_frame_size > 5 * 1024 * 1024


async def test_command_before_connect_gets_error_and_closed_connection(server, raw) -> None:
    peer = await raw()
    await peer.send(Lookup(id=5, topic="t"))
    error = await peer.receive()
    assert isinstance(error, Error)
    assert (error.code, error.id) == (ErrorCode.INVALID_COMMAND.value, 5)
    assert "CONNECT" in error.message
    assert await peer.receive() is None  # closed


async def test_frames_behind_a_refused_handshake_are_never_handled(server, raw) -> None:
    """Goal: a refused connection drops the rest of its input, even what came in the same read
    (found by tests/faults/test_fuzz_ports.py: a CONNECT behind the refused frame completed the
    handshake, and the commands behind it ran). Method: one write of LOOKUP, CONNECT, LOOKUP."""
    peer = await raw()
    await wait_for(lambda: len(server.connections) == 1)
    (connection,) = server.connections
    await peer.send(
        [Lookup(id=5, topic="t"), Connect(id=6, protocol_version=PROTOCOL_VERSION), Lookup(id=7, topic="u")]
    )
    error = await peer.receive()
    assert isinstance(error, Error) and error.id == 5
    assert await peer.receive() is None  # closed
    assert not connection.handshake_done
    assert [type(command) for command in connection.sent] == [Error]


async def test_protocol_version_mismatch_is_unsupported_version(server, clients) -> None:
    loop = asyncio.get_running_loop()
    _, client = await loop.create_connection(TestClientConnection, server.host, server.port)
    clients.append(client)
    with pytest.raises(UnsupportedVersionError, match=f"protocol version {PROTOCOL_VERSION + 1}"):
        await asyncio.wait_for(client.request(Connect, protocol_version=PROTOCOL_VERSION + 1), 5)
    await asyncio.wait_for(client.wait_closed(), 5)


@pytest.mark.parametrize("handshake", [True, False], ids=["after-connect", "before-connect"])
async def test_two_gib_length_prefix_gets_too_large_and_closed_connection(server, raw, clients, handshake) -> None:
    bystander = await connect(TestClientConnection, server.host, server.port)
    clients.append(bystander)
    peer = await raw()
    if handshake:
        await peer.handshake()
    await peer.send(LENGTH.pack(2**31))
    error = await peer.receive()
    assert isinstance(error, Error) and error.code == ErrorCode.TOO_LARGE.value
    assert await peer.receive() is None
    assert (await bystander.request(Lookup, topic="alive")).broker_url == "alive"


async def test_unknown_command_gets_invalid_command_and_connection_stays_usable(server, raw) -> None:
    peer = await raw()
    await peer.handshake()
    await peer.send({"t": "NO_SUCH_COMMAND", "id": 7})
    error = await peer.receive()
    assert isinstance(error, Error)
    assert (error.code, error.id) == (ErrorCode.INVALID_COMMAND.value, 7)
    await peer.send(Lookup(id=8, topic="next"))
    assert await peer.receive() == LookupResponse(id=8, kind="connect", broker_url="next")


@pytest.mark.parametrize(
    "body",
    [
        {"t": "LOOKUP", "id": 11, "topic": 42},
        {"t": "LOOKUP", "id": 11},
        {"t": "LOOKUP", "id": 11, "topic": "t", "authoritative": 1},
    ],
    ids=["wrong-type", "missing-field", "int-as-bool"],
)
async def test_known_command_with_bad_fields_gets_invalid_command_with_its_id(server, raw, body) -> None:
    peer = await raw()
    await peer.handshake()
    await peer.send(body)
    error = await peer.receive()
    assert isinstance(error, Error)
    assert (error.code, error.id) == (ErrorCode.INVALID_COMMAND.value, 11)
    await peer.send(Lookup(id=12, topic="next"))
    assert (await peer.receive()).id == 12


@pytest.mark.parametrize(
    ("field", "value"), [("sub_type", "KeyShared"), ("initial_position", "latest"), ("key_shared_mode", "")]
)
async def test_value_outside_a_wire_enumeration_gets_invalid_command_with_its_id(server, raw, field, value) -> None:
    """Refused when the frame is decoded, naming the field (a handler would have said the
    command is not served here), and the connection stays usable."""
    peer = await raw()
    await peer.handshake()
    await peer.send({"t": "SUBSCRIBE", "id": 13, "topic": "t", "subscription": "s", "consumer_id": 1, field: value})
    error = await peer.receive()
    assert isinstance(error, Error)
    assert (error.code, error.id) == (ErrorCode.INVALID_COMMAND.value, 13)
    assert f"SUBSCRIBE.{field}: expected one of" in error.message
    await peer.send(Lookup(id=14, topic="next"))
    assert (await peer.receive()).id == 14


async def test_garbage_body_gets_invalid_command_without_id(server, raw) -> None:
    peer = await raw()
    await peer.handshake()
    await peer.send(LENGTH.pack(3) + b"\xc1\xc1\xc1")
    error = await peer.receive()
    assert isinstance(error, Error) and (error.code, error.id) == (ErrorCode.INVALID_COMMAND.value, None)
    await peer.send(Lookup(id=1, topic="x"))
    assert (await peer.receive()).id == 1


async def test_command_served_elsewhere_gets_invalid_command(server, raw) -> None:
    """A valid command this server has no handler for (READ_LAC) is refused by name."""
    peer = await raw()
    await peer.handshake()
    await peer.send({"t": "READ_LAC", "id": 3, "ledger_id": 1})
    error = await peer.receive()
    assert (error.code, error.id) == (ErrorCode.INVALID_COMMAND.value, 3)
    assert "READ_LAC" in error.message


async def test_ping_is_answered_with_pong(server, raw) -> None:
    peer = await raw()
    await peer.handshake()
    await peer.send(Ping())
    assert await peer.receive(keepalive=True) == Pong()


async def test_listener_close_closes_every_connection(server, clients) -> None:
    client = await connect(TestClientConnection, server.host, server.port)
    clients.append(client)
    await wait_for(lambda: len(server.connections) == 1, timeout_s=5)
    await server.listener.close()
    await asyncio.wait_for(client.wait_closed(), 5)
    assert not server.connections


async def test_error_from_the_peer_is_logged_not_answered(server, raw) -> None:
    """An ERROR that completes none of our requests is logged, never answered with an ERROR
    (two servers would bounce errors forever)."""
    peer = await raw()
    await peer.handshake()
    await peer.send(Error(code=ErrorCode.TOO_LARGE.value, message="your frame"))
    await peer.send(Lookup(id=2, topic="t"))
    assert await peer.receive() == LookupResponse(id=2, kind="connect", broker_url="t")
