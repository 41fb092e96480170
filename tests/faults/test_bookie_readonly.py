"""Read-only mode with a real bookie and a real metastore: at the disk thresholds the
registration moves between ``/ledgers/available`` and ``/ledgers/available/readonly``, adds are
refused with BookieReadOnly, reads keep working. The disk usage is injected through the
test-only ``minipulsarDiskUsageOverrideFile``."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from minipulsar.errors import BookieReadOnlyError
from minipulsar.metadata import MetadataStore, open_metadata_store
from minipulsar.net import connect
from minipulsar.protocol.commands import AddEntry, BookieInfo, ReadEntry
from tests.support.net import unused_port
from tests.support.process import ServerProcess, started, wait_for
from tests.support.raw_client import RawClient
from tests.support.servers import bookie_process
from tests.support.web import metric_value

SESSION_TIMEOUT_MS = 2000
AVAILABLE, READONLY = "/ledgers/available", "/ledgers/available/readonly"


LEDGER_DIRS = ("ledgers-a", "ledgers-b")


def usage_bookie(root: Path, metadata_url: str, *, port: int = 0, **settings: object) -> ServerProcess:
    """A bookie that reads its disk usage from ``root/usage`` every 50 ms, with ``settings``."""
    return bookie_process(
        root,
        metadata_url,
        port=port,
        ledgers=LEDGER_DIRS,
        settings={
            "zkTimeout": SESSION_TIMEOUT_MS,
            "diskCheckInterval": 50,
            "minipulsarDiskUsageOverrideFile": root / "usage",
            **settings,
        },
    )


@pytest_asyncio.fixture
async def observer(metastore: ServerProcess) -> AsyncIterator[MetadataStore]:
    store = await open_metadata_store(f"metastore://{metastore.address}", session_timeout_ms=SESSION_TIMEOUT_MS)
    try:
        yield store
    finally:
        await store.close()


async def registered_under(store: MetadataStore, bookie: ServerProcess) -> set[str]:
    """The registration paths (writable, read-only) that list the bookie now."""
    paths = set()
    for path in (AVAILABLE, READONLY):
        if bookie.address in await store.children(path):
            paths.add(path)
    return paths


async def wait_registered_only_under(store: MetadataStore, bookie: ServerProcess, path: str) -> None:
    async def only_there() -> bool:
        return await registered_under(store, bookie) == {path}

    await wait_for(only_there, timeout_s=10, message=f"{bookie.address} not registered only under {path}")


@pytest.mark.expect_error_log(r"is full: usage", r"shutting the bookie down", r"bookie stopped on a failure")
async def test_full_disks_make_the_bookie_read_only_and_freed_space_makes_it_writable(
    tmp_path: Path, metastore: ServerProcess, observer: MetadataStore
) -> None:
    """Goal: the whole read-only round trip in a real process.
    Method: usage 0.5 → adds work; 0.97 → registration under readonly/, ADD gets
    BookieReadOnly (a recovery add still goes in), READ serves the entries, SERVER_STATUS 0;
    0.5 → back under /ledgers/available, ADD works, SERVER_STATUS 1."""
    usage = tmp_path / "usage"
    usage.write_text("0.5")
    bookie = usage_bookie(tmp_path, metastore.url)
    async with started(bookie):
        conn = await connect(RawClient, bookie.host, bookie.port)
        assert await registered_under(observer, bookie) == {AVAILABLE}
        for entry_id in range(5):
            await conn.request(AddEntry, ledger_id=1, entry_id=entry_id, payload=b"e%d" % entry_id)

        usage.write_text("0.97")
        await wait_registered_only_under(observer, bookie, READONLY)
        with pytest.raises(BookieReadOnlyError):
            await conn.request(AddEntry, ledger_id=1, entry_id=5, payload=b"refused")
        await conn.request(AddEntry, ledger_id=1, entry_id=5, payload=b"e5", recovery=True)
        response = await conn.request(ReadEntry, ledger_id=1, first_entry_id=0, count=10)
        assert [p for _, p in response.entries] == [b"e%d" % i for i in range(6)]
        info = await conn.request(BookieInfo)
        assert info.info["readOnly"] is True and info.info["writableLedgerDirs"] == 0
        assert await metric_value(bookie, "bookie_SERVER_STATUS") == 0

        usage.write_text("0.5")
        await wait_registered_only_under(observer, bookie, AVAILABLE)
        await conn.request(AddEntry, ledger_id=1, entry_id=6, payload=b"e6")
        assert (await conn.request(BookieInfo)).info["readOnly"] is False
        assert await metric_value(bookie, "bookie_SERVER_STATUS") == 1
        conn.close()
    assert await registered_under(observer, bookie) == set()


@pytest.mark.expect_error_log(r"is full: usage", r"shutting the bookie down", r"bookie stopped on a failure")
async def test_a_bookie_started_on_full_disks_registers_read_only(
    tmp_path: Path, metastore: ServerProcess, observer: MetadataStore
) -> None:
    (tmp_path / "usage").write_text("0.99")
    bookie = usage_bookie(tmp_path, metastore.url)
    async with started(bookie):
        assert await registered_under(observer, bookie) == {READONLY}
        conn = await connect(RawClient, bookie.host, bookie.port)
        with pytest.raises(BookieReadOnlyError):
            await conn.request(AddEntry, ledger_id=1, entry_id=0, payload=b"refused")
        conn.close()


@pytest.mark.expect_error_log(r"is full: usage", r"shutting the bookie down", r"bookie stopped on a failure")
async def test_a_restarted_bookie_removes_the_read_only_key_its_killed_run_left(
    tmp_path: Path, metastore: ServerProcess, observer: MetadataStore
) -> None:
    """Goal: a bookie SIGKILLed while read-only, restarted with free space, is listed only as
    writable at once — not also as read-only until the dead run's session expires."""
    usage = tmp_path / "usage"
    usage.write_text("0.99")
    url = f"metastore://{metastore.address}"
    first = usage_bookie(tmp_path, url)
    async with started(first):
        assert await registered_under(observer, first) == {READONLY}
        first.kill()
    usage.write_text("0.5")
    second = usage_bookie(tmp_path, url, port=first.port)
    async with started(second):
        assert await registered_under(observer, second) == {AVAILABLE}


@pytest.mark.expect_error_log(r"is full: usage", r"shutting the bookie down", r"bookie stopped on a failure")
async def test_with_read_only_mode_disabled_full_disks_stop_the_bookie(
    tmp_path: Path, metastore: ServerProcess, observer: MetadataStore
) -> None:
    """BookKeeper's readOnlyModeEnabled=false: no writable ledger dir left shuts the bookie
    down (cleanly: its registration goes with it), with BookKeeper's exit code for a bookie
    failure (5, not 0: a supervisor that restarts on failure must see one)."""
    usage = tmp_path / "usage"
    usage.write_text("0.5")
    bookie = usage_bookie(tmp_path, metastore.url, readOnlyModeEnabled=False)
    async with started(bookie):
        usage.write_text("0.99")
        assert await asyncio.to_thread(bookie.proc.wait, 10) == 5
        assert await registered_under(observer, bookie) == set()
        assert "readOnlyModeEnabled=false" in bookie.log_tail()


@pytest.mark.expect_error_log(r"is full: usage", r"shutting the bookie down", r"bookie stopped on a failure")
async def test_with_read_only_mode_disabled_a_bookie_started_on_full_disks_never_registers(
    tmp_path: Path, metastore: ServerProcess, observer: MetadataStore
) -> None:
    """The same at start: it stops before registering (it registered as writable, printed READY
    and exited 0)."""
    (tmp_path / "usage").write_text("0.99")
    bookie = usage_bookie(tmp_path, metastore.url, readOnlyModeEnabled=False)
    try:
        with pytest.raises(RuntimeError, match="exited with 5"):
            await asyncio.to_thread(bookie.start)
    finally:
        await asyncio.to_thread(bookie.stop)
    assert set(await observer.children(AVAILABLE)) <= {"readonly"} and not await observer.children(READONLY)


async def test_sigterm_while_starting_stops_the_bookie_before_it_registers(
    tmp_path: Path, metastore: ServerProcess, observer: MetadataStore
) -> None:
    """Goal: SIGTERM while the bookie waits to register (here: for a key of its id that another
    instance holds) stops it at once with exit 0, never registered — it carried on, registered,
    printed READY and only then stopped, past a supervisor's SIGKILL if the wait was long."""
    port = unused_port()
    held = f"{AVAILABLE}/127.0.0.1:{port}"
    await observer.put(held, json.dumps({"instanceId": "another-instance"}).encode(), ephemeral=True)
    bookie = usage_bookie(tmp_path, metastore.url, port=port)
    starting = asyncio.create_task(asyncio.to_thread(bookie.start))
    try:
        await wait_for(
            lambda: (
                (tmp_path / "logs" / "bookie.log").exists()
                and "waiting for it to go" in (tmp_path / "logs" / "bookie.log").read_text()
            ),
            20,
            message="the bookie did not reach the registration wait",
        )
        bookie.proc.send_signal(signal.SIGTERM)
        with pytest.raises(RuntimeError, match="exited with 0"):
            await asyncio.wait_for(starting, 10)
        assert "stopped while starting" in bookie.log_tail()
        assert json.loads((await observer.get(held)).value)["instanceId"] == "another-instance"
    finally:
        await asyncio.to_thread(bookie.stop)
