"""The bookie's admin REST API (BookKeeper's endpoints): heartbeat, readiness, state, and
read-only by hand — one bookie in-process on 127.0.0.1:0 with a memory:// metadata store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from minipulsar.bookie.bookie_server import BookieServer, StartAborted
from minipulsar.bookie.registration import registration_path
from minipulsar.bookie.state_manager import LEDGER_DIRS_FULL
from minipulsar.config import ConfigError
from minipulsar.errors import BookieReadOnlyError
from minipulsar.metadata import open_metadata_store
from minipulsar.net import connect
from tests.support.bookie_service import service_config
from tests.support.process import wait_for
from tests.support.raw_client import RawClient, add_entry, read_entries


@pytest_asyncio.fixture
async def start_bookie(tmp_path: Path, store_url: str) -> AsyncIterator[Callable[..., Awaitable[BookieServer]]]:
    """Starts bookie services (each on its own dirs, all in ``store_url``); stops them all at the end."""
    services: list[BookieServer] = []

    async def start(stop: asyncio.Event | None = None, **overrides: str) -> BookieServer:
        service = BookieServer(service_config(tmp_path / str(len(services)), store_url, **overrides), stop=stop)
        services.append(service)
        await service.start()
        return service

    try:
        yield start
    finally:
        for service in services:
            await service.stop()


@pytest_asyncio.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def call(
    http: aiohttp.ClientSession,
    service: BookieServer,
    method: str,
    path: str,
    body: Any = None,
    raw: str | None = None,
) -> tuple[int, Any]:
    url = f"http://{service.host}:{service.http_port}{path}"
    kwargs: dict[str, Any] = {"data": raw} if raw is not None else {"json": body} if body is not None else {}
    async with http.request(method, url, **kwargs) as response:
        if response.content_type == "application/json":
            return response.status, await response.json()
        return response.status, await response.text()


async def registered(store_url: str, service: BookieServer) -> str:
    """Where the bookie is registered: "readonly", "available", or "both" during a move."""
    store = await open_metadata_store(store_url)
    try:
        read_only = await store.exists(registration_path(service.bookie_id, read_only=True))
        writable = await store.exists(registration_path(service.bookie_id))
    finally:
        await store.close()
    return "both" if read_only and writable else "readonly" if read_only else "available" if writable else "none"


async def test_heartbeat_readiness_and_state(start_bookie, http: aiohttp.ClientSession) -> None:
    service = await start_bookie()
    assert await call(http, service, "GET", "/heartbeat") == (200, "OK\n")
    assert (await call(http, service, "GET", "/api/v1/bookie/is_ready"))[0] == 200
    assert await call(http, service, "GET", "/api/v1/bookie/state") == (
        200,
        {"running": True, "readOnly": False, "shuttingDown": False, "availableForHighPriorityWrites": True},
    )
    assert await call(http, service, "GET", "/api/v1/bookie/state/readonly") == (200, {"readOnly": False})


async def test_read_only_by_hand_drains_the_bookie_until_cleared(
    start_bookie, http: aiohttp.ClientSession, store_url: str
) -> None:
    """Goal: PUT /api/v1/bookie/state/readonly {"readOnly": true} takes the bookie out of new
    ensembles (registration under readonly/, adds refused, reads served), the disk monitor
    finding the dirs writable does not undo it, and {"readOnly": false} does."""
    service = await start_bookie()
    conn = await connect(RawClient, service.host, service.port, role="test")
    try:
        await add_entry(conn, 1, 0, b"before")
        assert await call(http, service, "PUT", "/api/v1/bookie/state/readonly", {"readOnly": True}) == (
            200,
            {"readOnly": True},
        )
        assert await registered(store_url, service) == "readonly", "answered once the registration moved"
        with pytest.raises(BookieReadOnlyError, match="PUT /api/v1/bookie/state/readonly"):
            await add_entry(conn, 1, 1, b"refused")
        assert await read_entries(conn, 1, 0) == [(0, b"before")]
        service._writable_changed(True)  # a disk check: the ledger dirs have room
        assert service.state.read_only
        assert await call(http, service, "GET", "/api/v1/bookie/state/readonly") == (200, {"readOnly": True})

        assert await call(http, service, "PUT", "/api/v1/bookie/state/readonly", {"readOnly": "false"}) == (
            200,
            {"readOnly": False},
        )
        assert await registered(store_url, service) == "available"
        await add_entry(conn, 1, 1, b"after")
    finally:
        conn.close()


async def test_clearing_read_only_by_hand_leaves_the_other_causes(start_bookie, http: aiohttp.ClientSession) -> None:
    """A bookie read-only for full ledger dirs stays so when the operator's cause is cleared,
    and the answer says so."""
    service = await start_bookie()
    assert (await call(http, service, "PUT", "/api/v1/bookie/state/readonly", {"readOnly": True}))[0] == 200
    service._writable_changed(False)  # a disk check: every ledger dir full
    assert await call(http, service, "PUT", "/api/v1/bookie/state/readonly", {"readOnly": False}) == (
        200,
        {"readOnly": True},
    )
    assert list(service.state.causes) == [LEDGER_DIRS_FULL]


@pytest.mark.parametrize("raw", ['{"readOnly": "maybe"}', "[true]", "yes please", "{}"])
async def test_a_bad_read_only_body_is_a_400(start_bookie, http: aiohttp.ClientSession, raw: str) -> None:
    service = await start_bookie()
    status, body = await call(http, service, "PUT", "/api/v1/bookie/state/readonly", raw=raw)
    assert status == 400 and "readOnly" in body["error"]
    assert not service.state.read_only


async def test_force_read_only_bookie_starts_read_only_and_stays_so(
    start_bookie, http: aiohttp.ClientSession, store_url: str
) -> None:
    service = await start_bookie(forceReadOnlyBookie="true")
    assert await registered(store_url, service) == "readonly"
    status, body = await call(http, service, "PUT", "/api/v1/bookie/state/readonly", {"readOnly": False})
    assert status == 400 and "forceReadOnly" in body["error"]
    service._writable_changed(True)  # a disk check: the ledger dirs have room
    assert (await call(http, service, "GET", "/api/v1/bookie/state"))[1]["readOnly"] is True


async def test_read_only_by_hand_is_refused_with_read_only_mode_disabled(
    start_bookie, http: aiohttp.ClientSession
) -> None:
    service = await start_bookie(readOnlyModeEnabled="false")
    status, body = await call(http, service, "PUT", "/api/v1/bookie/state/readonly", {"readOnly": True})
    assert status == 400 and "readOnlyModeEnabled=false" in body["error"]
    assert not service.state.read_only


def test_force_read_only_bookie_needs_read_only_mode(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="forceReadOnlyBookie=true needs readOnlyModeEnabled"):
        service_config(tmp_path, "memory://x", forceReadOnlyBookie="true", readOnlyModeEnabled="false")


@pytest.mark.parametrize("persist", [True, False])
async def test_read_only_by_hand_survives_a_restart_with_persist_bookie_status_enabled(
    tmp_path: Path, store_url: str, http: aiohttp.ClientSession, persist: bool
) -> None:
    """Goal: with persistBookieStatusEnabled an operator's read-only choice is kept across a
    restart (BOOKIE_STATUS in the ledger dirs; the bookie registers under readonly/ at once),
    and its clearing too; without it a restart comes back writable (BookKeeper's default)."""
    config = service_config(tmp_path, store_url, persistBookieStatusEnabled=str(persist).lower())
    first = BookieServer(config)
    await first.start()
    try:
        await call(http, first, "PUT", "/api/v1/bookie/state/readonly", {"readOnly": True})
    finally:
        await first.stop()
    again = BookieServer(config)
    await again.start()
    try:
        assert again.state.read_only is persist
        assert await registered(store_url, again) == ("readonly" if persist else "available")
        await call(http, again, "PUT", "/api/v1/bookie/state/readonly", {"readOnly": False})
    finally:
        await again.stop()
    third = BookieServer(config)
    await third.start()
    try:
        assert not third.state.read_only
    finally:
        await third.stop()


async def test_not_ready_and_no_read_only_change_once_stopping(start_bookie, http: aiohttp.ClientSession) -> None:
    """A bookie asked to stop (its stop event set: shutting itself down) is no longer ready."""
    stop = asyncio.Event()
    service = await start_bookie(stop)
    stop.set()
    assert (await call(http, service, "GET", "/api/v1/bookie/is_ready"))[0] == 503
    assert (await call(http, service, "GET", "/api/v1/bookie/state"))[1]["shuttingDown"] is True
    assert (await call(http, service, "PUT", "/api/v1/bookie/state/readonly", {"readOnly": True}))[0] == 503


async def test_not_ready_while_it_waits_for_the_metadata_store(tmp_path: Path, http: aiohttp.ClientSession) -> None:
    """Goal: a readiness probe gets 503 from a bookie that answers HTTP but does not serve yet
    (its metadata store accepts the connection and never answers), and a stop asked meanwhile
    stops it before serving."""

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the bookie hangs up
        writer.close()

    silent = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    stop = asyncio.Event()
    service = BookieServer(service_config(tmp_path, f"metastore://127.0.0.1:{port}"), stop=stop)
    starting = asyncio.create_task(service.start())
    try:
        await wait_for(lambda: service.http_port != 0 or starting.done(), 10, message="HTTP never started")
        assert await call(http, service, "GET", "/api/v1/bookie/is_ready") == (503, "the bookie is not serving\n")
        assert (await call(http, service, "GET", "/api/v1/bookie/state"))[1]["running"] is False
        stop.set()
        with pytest.raises(StartAborted):
            await asyncio.wait_for(starting, 10)
    finally:
        await service.stop()
        silent.close()
