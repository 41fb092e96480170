"""Goal: frames written in one loop iteration leave in one ``transport.writelines`` call."""

from __future__ import annotations

import asyncio

from minipulsar.net import writer as writer_module
from minipulsar.net.client import connect
from minipulsar.protocol.commands import Lookup, Send
from tests.support.net import TestClientConnection, TestServerConnection
from tests.support.process import wait_for


class SpyTransport:
    """Forwards to the real transport and records every ``writelines`` / ``write`` call."""

    def __init__(self, real) -> None:
        self.real = real
        self.writelines_calls: list[list[bytes]] = []
        self.write_calls = 0

    def writelines(self, buffers) -> None:
        self.writelines_calls.append(list(buffers))
        self.real.writelines(buffers)

    def write(self, data) -> None:
        self.write_calls += 1
        self.real.write(data)

    def __getattr__(self, name):
        return getattr(self.real, name)


def spy_on(connection) -> SpyTransport:
    spy = SpyTransport(connection.writer._transport)
    connection.writer._transport = spy
    return spy


async def test_sends_in_one_iteration_leave_in_one_writelines(server, clients, monkeypatch) -> None:
    """Method: 50 requests issued without yielding; the client writes them in one call, and
    the server, receiving them in (usually) one read, answers them in one call too."""
    monkeypatch.setattr(TestServerConnection, "lookup_batch", 50)
    client = await connect(TestClientConnection, server.host, server.port)
    clients.append(client)
    client_spy = spy_on(client)
    (server_connection,) = server.connections
    server_spy = spy_on(server_connection)

    futures = [client.request(Lookup, topic=f"t{i}") for i in range(50)]
    assert client_spy.writelines_calls == []  # nothing leaves before the iteration ends
    responses = await asyncio.wait_for(asyncio.gather(*futures), 5)

    assert len(client_spy.writelines_calls) == 1
    assert len(client_spy.writelines_calls[0]) == 100  # header + body per frame
    assert client_spy.write_calls == 0
    assert len(server_spy.writelines_calls) == 1  # the 50 held answers go out together
    assert len(server_spy.writelines_calls[0]) == 100
    assert [r.broker_url for r in responses] == [f"t{i}" for i in range(50)]


async def test_writer_flushes_at_once_past_flush_bytes(server, clients) -> None:
    client = await connect(TestClientConnection, server.host, server.port)
    clients.append(client)
    spy = spy_on(client)
    payload = b"x" * (writer_module.FLUSH_BYTES // 2 + 1)
    client.send(Send(producer_id=1, sequence_id=1, payload=payload))
    assert spy.writelines_calls == []
    client.send(Send(producer_id=1, sequence_id=2, payload=payload))
    assert len(spy.writelines_calls) == 1  # the bound was crossed: flushed without waiting
    client.send(Send(producer_id=1, sequence_id=3, payload=b"small"))
    assert len(spy.writelines_calls) == 1
    await wait_for(lambda: len(spy.writelines_calls) == 2, timeout_s=5, interval_s=0)
