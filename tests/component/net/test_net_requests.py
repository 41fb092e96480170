"""Goal: requests on one connection complete with *their* response, in any order; each ends
exactly once — answered, timed out, typed server error, or failed when the connection drops."""

from __future__ import annotations

import asyncio
import time

import pytest

from minipulsar.errors import (
    ConnectionClosedError,
    ErrorCode,
    FrameTooLargeError,
    NotFoundError,
    RequestTimeoutError,
    ServerError,
    UnknownServerError,
    error_for_code,
)
from minipulsar.net.client import connect
from minipulsar.net.rpc import TIMER_INTERVAL_S
from minipulsar.protocol.commands import (
    BookieInfo,
    Lookup,
    LookupResponse,
    MdChildren,
    MdDelete,
    MdGet,
    PartitionedMetadata,
    Seek,
    Unsubscribe,
)
from tests.support.net import TestClientConnection, TestServerConnection

SERVER_ERROR_CODES = [code for code in ErrorCode if code is not ErrorCode.UNKNOWN_ERROR]


async def open_client(server, clients, **kwargs) -> TestClientConnection:
    connection = await connect(lambda: TestClientConnection(**kwargs), server.host, server.port)
    clients.append(connection)
    return connection


async def test_many_concurrent_requests_get_their_own_responses(server, clients, monkeypatch) -> None:
    """Method: 400 LOOKUPs in flight; the server answers them shuffled; each future must
    resolve with the response naming its own topic."""
    monkeypatch.setattr(TestServerConnection, "lookup_batch", 400)
    client = await open_client(server, clients)
    futures = [client.request(Lookup, topic=f"topic-{i}") for i in range(400)]
    assert client.pending_requests == 400
    responses = await asyncio.wait_for(asyncio.gather(*futures), 10)
    assert [r.broker_url for r in responses] == [f"topic-{i}" for i in range(400)]
    assert all(isinstance(r, LookupResponse) for r in responses)
    assert client.pending_requests == 0
    assert client.received == []  # every response went to its future, none leaked


async def test_requests_from_several_connections_and_async_handlers(server, clients) -> None:
    a, b = await open_client(server, clients), await open_client(server, clients)
    topics = [f"t{'x' * i}" for i in range(50)]
    results = await asyncio.wait_for(
        asyncio.gather(
            *(a.request(PartitionedMetadata, topic=t) for t in topics),
            *(b.request(PartitionedMetadata, topic=t) for t in reversed(topics)),
        ),
        10,
    )
    assert [r.partitions for r in results] == [len(t) for t in topics] + [len(t) for t in reversed(topics)]


async def test_unanswered_request_times_out_within_bound(server, clients) -> None:
    """Method: MD_GET is never answered; a 0.3 s timeout must fire after 0.3 s and well
    before 0.3 s + 1 s, and the connection must stay usable."""
    client = await open_client(server, clients)
    started = time.monotonic()
    with pytest.raises(RequestTimeoutError, match="MD_GET"):
        await asyncio.wait_for(client.request(MdGet, path="/a", timeout_s=0.3), 5)
    elapsed_s = time.monotonic() - started
    assert 0.3 - TIMER_INTERVAL_S <= elapsed_s < 1.3
    assert client.pending_requests == 0
    assert client.is_open
    assert (await client.request(Lookup, topic="still-there")).broker_url == "still-there"


async def test_timeouts_apply_per_request(server, clients) -> None:
    client = await open_client(server, clients, request_timeout_s=0.2)
    short = client.request(MdGet, path="/short")
    long = client.request(MdGet, path="/long", timeout_s=30)
    with pytest.raises(RequestTimeoutError):
        await asyncio.wait_for(short, 5)
    assert not long.done()
    assert client.pending_requests == 1
    client.close()
    with pytest.raises(ConnectionClosedError):
        await asyncio.wait_for(long, 5)


async def test_every_pending_request_fails_when_the_server_drops_the_connection(server, clients) -> None:
    client = await open_client(server, clients)
    pending = [client.request(MdGet, path=f"/{i}") for i in range(20)]
    dropping = client.request(Seek, consumer_id=1, ledger_id=1, entry_id=1)
    results = await asyncio.wait_for(asyncio.gather(*pending, dropping, return_exceptions=True), 5)
    assert all(isinstance(r, ConnectionClosedError) for r in results), results
    assert client.pending_requests == 0
    await asyncio.wait_for(client.wait_closed(), 5)
    with pytest.raises(ConnectionClosedError):
        await client.request(Lookup, topic="after-close")


async def test_pending_requests_fail_when_the_client_closes(server, clients) -> None:
    client = await open_client(server, clients)
    pending = [client.request(MdGet, path=f"/{i}") for i in range(5)]
    client.close()
    results = await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 5)
    assert all(isinstance(r, ConnectionClosedError) for r in results), results


@pytest.mark.parametrize("code", SERVER_ERROR_CODES, ids=lambda code: code.value)
async def test_server_error_reaches_the_client_as_the_same_type(server, clients, code: ErrorCode) -> None:
    """Method: a sync handler and a coroutine handler each raise the class for ``code``."""
    client = await open_client(server, clients)
    expected = type(error_for_code(code.value))
    for cls in (MdDelete, MdChildren):
        with pytest.raises(ServerError) as caught:
            await asyncio.wait_for(client.request(cls, path=code.value), 5)
        assert type(caught.value) is expected
        assert str(caught.value) == f"raised for {code.value}"
    assert client.is_open


@pytest.mark.expect_error_log(r"unexpected error handling")
async def test_unexpected_handler_exception_is_unknown_error_and_server_keeps_serving(server, clients) -> None:
    client = await open_client(server, clients)
    other = await open_client(server, clients)
    for make in (
        lambda: client.request(MdDelete, path="boom"),
        lambda: client.request(MdChildren, path="boom"),
        lambda: client.request(Unsubscribe, consumer_id=1),
        lambda: client.request(BookieInfo),
    ):
        with pytest.raises(UnknownServerError):
            await asyncio.wait_for(make(), 5)
    assert client.is_open
    assert (await client.request(Lookup, topic="same")).broker_url == "same"
    assert (await other.request(Lookup, topic="other")).broker_url == "other"


async def test_not_found_message_survives_the_wire(server, clients) -> None:
    client = await open_client(server, clients)
    with pytest.raises(NotFoundError, match="raised for NotFound"):
        await client.request(MdDelete, path="NotFound")


async def test_request_with_a_bad_field_raises_at_once_and_leaves_nothing_pending(server, clients) -> None:
    """A command that cannot be built (a misspelt field) raises before it is registered: no
    phantom request waits for its timeout."""
    client = await open_client(server, clients)
    with pytest.raises(TypeError):
        client.request(Lookup, topc="typo")
    assert client.pending_requests == 0


async def test_oversized_response_fails_pending_requests_as_connection_closed(server, clients) -> None:
    """Method: the client accepts frames up to 1 KiB and asks for a 2 KiB answer. It must
    refuse the frame on its header, close, and fail every pending request with the retriable
    ConnectionClosedError naming the cause; the server logs the ERROR and does not answer it."""
    client = await open_client(server, clients, max_frame_size=1024)
    (server_connection,) = server.connections
    pending = client.request(MdGet, path="/pending")
    with pytest.raises(ConnectionClosedError, match="max frame size"):
        await asyncio.wait_for(client.request(Lookup, topic="x" * 2000), 5)
    with pytest.raises(ConnectionClosedError, match="max frame size"):
        await pending
    assert isinstance(client.close_reason, FrameTooLargeError)
    await asyncio.wait_for(server_connection.wait_closed(), 5)
    assert not any(type(c).__name__ == "Error" for c in server_connection.sent)
