"""Goal: MetastoreClient rides out a metastore restart the way a ZooKeeper client does:
requests wait for the reconnection (up to the operation timeout), a conditional put whose
outcome is unknown raises instead of being re-sent, and a session that outlived its timeout
is reported lost and replaced by a new one.

Method: a real metastore process, SIGSTOPped / SIGKILLed and restarted on the same port and
data dir while the client is in use."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from minipulsar.errors import ConnectionClosedError
from minipulsar.metadata import MetastoreClient, SessionEvent, Stat
from tests.support.fixtures import metastore_fixture
from tests.support.process import ServerProcess, wait_for

metastore = metastore_fixture(settings={"minSessionTimeout": 100})


@pytest_asyncio.fixture
async def metastore_clients(metastore: ServerProcess) -> AsyncIterator[list[MetastoreClient]]:
    made: list[MetastoreClient] = []
    yield made
    for client in made:
        await client.close()


async def start_client(metastore: ServerProcess, made: list[MetastoreClient], **kwargs) -> tuple[MetastoreClient, list]:
    client = MetastoreClient(metastore.host, metastore.port, **kwargs)
    await client.start()
    made.append(client)
    events: list[SessionEvent] = []
    client.add_session_listener(events.append)
    return client, events


async def test_requests_issued_while_disconnected_wait_for_the_reconnection(
    metastore: ServerProcess,
    metastore_clients: list[MetastoreClient],
) -> None:
    client, events = await start_client(metastore, metastore_clients)
    await client.put("/wait/key", b"before")
    await asyncio.to_thread(metastore.kill)
    await wait_for(lambda: SessionEvent.CONNECTION_LOST in events, 5)
    pending_get = asyncio.ensure_future(client.get("/wait/key"))
    pending_put = asyncio.ensure_future(client.put("/wait/other", b"queued"))
    await asyncio.to_thread(metastore.start_on_same_port)
    assert (await asyncio.wait_for(pending_get, 10)).value == b"before"
    assert (await asyncio.wait_for(pending_put, 10)).version == 0
    assert events == [SessionEvent.CONNECTION_LOST, SessionEvent.RECONNECTED]


async def test_requests_fail_with_a_retriable_error_after_the_operation_timeout(
    metastore: ServerProcess,
    metastore_clients: list[MetastoreClient],
) -> None:
    client, events = await start_client(metastore, metastore_clients, operation_timeout_s=0.5)
    await asyncio.to_thread(metastore.kill)
    await wait_for(lambda: SessionEvent.CONNECTION_LOST in events, 5)
    started = time.monotonic()
    with pytest.raises(ConnectionClosedError) as failure:
        await client.get("/anything")
    assert failure.value.retriable
    assert 0.4 <= time.monotonic() - started < 3


async def test_a_conditional_put_with_unknown_outcome_raises_but_an_unconditional_one_is_resent(
    metastore: ServerProcess,
    metastore_clients: list[MetastoreClient],
) -> None:
    client, _events = await start_client(metastore, metastore_clients)
    await client.put("/unknown/cas", b"v0")
    await asyncio.to_thread(metastore.pause)  # requests reach the metastore's socket, never an answer
    conditional = asyncio.ensure_future(client.put("/unknown/cas", b"v1", 0))
    unconditional = asyncio.ensure_future(client.put("/unknown/plain", b"p"))
    await wait_for(lambda: client._conn is not None and client._conn.pending_requests >= 2, 5)
    await asyncio.to_thread(metastore.kill)
    with pytest.raises(ConnectionClosedError, match="may or may not have been applied"):
        await asyncio.wait_for(conditional, 10)
    await asyncio.to_thread(metastore.start_on_same_port)
    assert isinstance(await asyncio.wait_for(unconditional, 10), Stat)
    assert (await client.get("/unknown/plain")).value == b"p"
    assert (await client.get("/unknown/cas")).value == b"v0"  # the metastore never read the CAS put


async def test_a_session_that_outlives_its_timeout_is_lost_and_replaced(
    metastore: ServerProcess,
    metastore_clients: list[MetastoreClient],
) -> None:
    client, events = await start_client(metastore, metastore_clients, session_timeout_ms=1000)
    await client.put("/lost/ephemeral", b"", ephemeral=True)
    old_session = client.session_id
    await asyncio.to_thread(metastore.kill)
    await wait_for(lambda: SessionEvent.SESSION_LOST in events, 5, message=f"events: {events}")
    # the metastore restored the session with a fresh deadline ...
    await asyncio.to_thread(metastore.start_on_same_port)
    await wait_for(lambda: SessionEvent.SESSION_REESTABLISHED in events, 10, message=f"events: {events}")
    assert events == [SessionEvent.CONNECTION_LOST, SessionEvent.SESSION_LOST, SessionEvent.SESSION_REESTABLISHED]
    assert client.session_id != old_session
    assert await client.get("/lost/ephemeral") is None  # ... but the client closed it at once
    await client.put("/lost/ephemeral", b"again", ephemeral=True)
    assert (await client.get("/lost/ephemeral")).stat.ephemeral


async def test_session_timeouts_are_clamped_to_the_server_bounds(
    metastore: ServerProcess,
    metastore_clients: list[MetastoreClient],
) -> None:
    short, _ = await start_client(metastore, metastore_clients, session_timeout_ms=10)
    long, _ = await start_client(metastore, metastore_clients, session_timeout_ms=10**9)
    assert (short.session_timeout_ms, long.session_timeout_ms) == (100, 60_000)  # min set to 100; default max
