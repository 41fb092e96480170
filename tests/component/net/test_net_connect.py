"""Goal: ``connect`` hands back a ready connection or a typed error — refused, silent peer —
and ``parse_address`` understands the URL forms users write."""

from __future__ import annotations

import asyncio
import time

import pytest

from minipulsar.errors import ConnectionClosedError, RequestTimeoutError
from minipulsar.net.client import connect, parse_address
from tests.support.net import TestClientConnection, unused_port


@pytest.mark.parametrize(
    "url, expected",
    [
        ("pulsar://broker-1:6651", ("broker-1", 6651)),
        ("pulsar://broker-1:6651/", ("broker-1", 6651)),
        ("127.0.0.1:3181", ("127.0.0.1", 3181)),
        ("metastore://localhost", ("localhost", 6650)),
        ("localhost", ("localhost", 6650)),
    ],
)
def test_parse_address(url: str, expected: tuple[str, int]) -> None:
    assert parse_address(url, 6650) == expected


def test_parse_address_rejects_a_bad_port() -> None:
    with pytest.raises(ValueError, match="not a number"):
        parse_address("pulsar://host:http", 6650)


async def test_connect_to_a_closed_port_is_connection_closed() -> None:
    port = unused_port()
    with pytest.raises(ConnectionClosedError, match=f"127.0.0.1:{port}"):
        await connect(TestClientConnection, "127.0.0.1", port, timeout_s=5)


async def test_connect_to_a_silent_peer_times_out() -> None:
    peer_done = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client gives up and closes
        writer.close()
        peer_done.set()

    listener = await asyncio.start_server(silent, "127.0.0.1", 0)
    try:
        host, port = listener.sockets[0].getsockname()[:2]
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError, match="CONNECT"):
            await connect(TestClientConnection, host, port, timeout_s=0.3)
        assert time.monotonic() - started < 2
        await asyncio.wait_for(peer_done.wait(), 5)  # the client closed its end: the peer saw EOF
    finally:
        listener.close()
        await listener.wait_closed()


async def test_connect_returns_an_open_connection(server, clients) -> None:
    client = await connect(TestClientConnection, server.host, server.port)
    clients.append(client)
    assert client.is_open and client.pending_requests == 0
    (server_connection,) = server.connections
    assert server_connection.handshake_done and server_connection.role == "client"
