"""Goal: keep-alive (Pulsar's keepAliveIntervalSeconds): an idle but healthy connection
trades PING/PONG and stays open; a peer that goes silent is closed after ~2 intervals."""

from __future__ import annotations

import asyncio
import time

import pytest

from minipulsar.errors import ConnectionClosedError
from minipulsar.net.client import connect
from minipulsar.protocol.codec import CommandDecoder, encode_bytes
from minipulsar.protocol.commands import PROTOCOL_VERSION, Connect, Connected, MdGet, Ping, Pong
from tests.support.net import TestClientConnection
from tests.support.process import wait_for
from tests.support.raw_client import RawPeer

INTERVAL_S = 0.2
CLOSE_SLACK_S = 1.0
"""Closing may lag 2 intervals by a check period plus scheduling noise on a busy machine."""


async def test_idle_connection_exchanges_ping_pong_and_stays_open(server, clients) -> None:
    """Method: client interval 0.2 s, server interval 30 s; after the client has sent 4 PINGs
    (over 2 intervals of idleness without the PONGs), both ends are still open."""
    client = await connect(lambda: TestClientConnection(keepalive_interval_s=INTERVAL_S), server.host, server.port)
    clients.append(client)
    (server_connection,) = server.connections
    await wait_for(
        lambda: client.sent_of(Ping) >= 4 and server_connection.sent_of(Pong) >= 3,
        timeout_s=10,
        interval_s=0.02,
        message="no PING/PONG exchange",
    )
    assert client.is_open and server_connection.is_open
    assert client.close_reason is None


async def test_both_sides_with_short_intervals_stay_open(server, clients) -> None:
    server.connection_kwargs = {"keepalive_interval_s": INTERVAL_S}
    client = await connect(lambda: TestClientConnection(keepalive_interval_s=INTERVAL_S), server.host, server.port)
    clients.append(client)
    (server_connection,) = server.connections
    started = time.monotonic()
    await wait_for(
        lambda: time.monotonic() - started > 5 * INTERVAL_S and client.sent_of(Ping) >= 2, timeout_s=10, interval_s=0.02
    )
    assert client.is_open and server_connection.is_open


async def test_server_closes_a_peer_that_stops_answering(server) -> None:
    """Method: a raw socket completes CONNECT, then never reads nor answers PING; the
    server must close it about two intervals after its last byte."""
    server.connection_kwargs = {"keepalive_interval_s": INTERVAL_S}
    peer = await RawPeer.open(server.host, server.port)
    try:
        assert isinstance(await peer.handshake(), Connected)
        silent_since = time.monotonic()
        await peer.wait_eof()
        elapsed_s = time.monotonic() - silent_since
        assert 2 * INTERVAL_S - 0.05 <= elapsed_s < 2 * INTERVAL_S + CLOSE_SLACK_S
        await wait_for(lambda: not server.connections, timeout_s=5)
    finally:
        peer.close()


async def test_client_closes_a_server_that_stops_answering(clients) -> None:
    """Method: a raw server answers CONNECTED, then goes silent; the client connection closes
    with a keep-alive ConnectionClosedError and fails its pending request."""

    async def silent_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = CommandDecoder()
        while (command := decoder.next_command()) is None:
            decoder.feed(await reader.read(4096))
        assert isinstance(command, Connect)
        writer.write(encode_bytes(Connected(id=command.id, protocol_version=PROTOCOL_VERSION, max_frame_size=1 << 20)))
        await reader.read()  # never answer again; wait for the client to go
        writer.close()

    listener = await asyncio.start_server(silent_server, "127.0.0.1", 0)
    try:
        host, port = listener.sockets[0].getsockname()[:2]
        client = await connect(lambda: TestClientConnection(keepalive_interval_s=INTERVAL_S), host, port)
        clients.append(client)
        silent_since = time.monotonic()
        pending = client.request(MdGet, path="/x", timeout_s=30)
        await asyncio.wait_for(client.wait_closed(), 2 * INTERVAL_S + CLOSE_SLACK_S + 1)
        elapsed_s = time.monotonic() - silent_since
        assert 2 * INTERVAL_S - 0.05 <= elapsed_s < 2 * INTERVAL_S + CLOSE_SLACK_S
        assert isinstance(client.close_reason, ConnectionClosedError)
        assert "keep-alive" in str(client.close_reason)
        with pytest.raises(ConnectionClosedError, match="keep-alive"):
            await pending
    finally:
        listener.close()
        await listener.wait_closed()
