"""Goal: a metastore killed with SIGKILL restarts with every change it acknowledged, from
its snapshot plus WAL, and resumes the sessions of clients that are still alive.

Method: a real ``minipulsar metastore`` process on a tmp data dir; clients write through
``MetastoreClient``; the process is SIGKILLed (no clean shutdown) and started again on the
same data dir."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from minipulsar.errors import MiniPulsarError
from minipulsar.metadata import MetastoreClient, SessionEvent, open_metadata_store
from minipulsar.metadata import snapshot as snapshot_files
from minipulsar.net.client import connect
from minipulsar.protocol.commands import MdPut, MdSessionCreate
from tests.support.process import ServerProcess, wait_for
from tests.support.raw_client import RawClient


def metastore_process(tmp_path: Path, *extra: str) -> ServerProcess:
    return ServerProcess(
        "metastore",
        ["--port", "0", "--data-dir", str(tmp_path / "data"), "--set", "minSessionTimeout=100", *extra],
        tmp_path / "metastore.log",
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = metastore_process(tmp_path)
    process.start()
    yield process
    process.stop()


def restart_on_same_port(process: ServerProcess) -> None:
    """SIGKILLed already; start again on the same data dir and port (clients reconnect)."""
    args = list(process.args)
    args[args.index("--port") + 1] = str(process.port)
    process.args = args
    process.start()


async def test_sigkilled_metastore_restarts_with_every_acknowledged_change(server: ServerProcess) -> None:
    """50 writers each CAS-update their own key (value = version) and create fresh keys, as
    fast as they can; SIGKILL lands while writes are in flight. After the restart every
    answered write is there with its version; at most the one unanswered write per writer
    may also be there."""
    client = await open_metadata_store(server.url)
    acked_versions: dict[str, int] = {}
    acked_creates: list[str] = []

    async def writer(n: int) -> None:
        key, version = f"/crash/w{n}", None
        try:
            for i in range(10_000):
                stat = await client.put(
                    key, b"%d" % (0 if version is None else version + 1), -1 if version is None else version
                )
                version = acked_versions[key] = stat.version
                if i % 5 == 0:
                    await client.put(f"/crash/created/{n}-{i}", b"", -1)
                    acked_creates.append(f"/crash/created/{n}-{i}")
        except MiniPulsarError:
            return  # the server is gone: stop writing

    writers = [asyncio.ensure_future(writer(n)) for n in range(50)]
    await wait_for(lambda: sum(acked_versions.values()) >= 1500, 20, message="writes too slow")
    await asyncio.to_thread(server.kill)
    await asyncio.wait_for(asyncio.gather(*writers), 40)
    await client.close()
    assert sum(acked_versions.values()) >= 1500

    await asyncio.to_thread(server.start)
    reader = await open_metadata_store(server.url)
    try:
        for key, version in acked_versions.items():
            result = await reader.get(key)
            assert result is not None, key
            assert version <= result.version <= version + 1, (key, version, result.version)
            assert result.value == b"%d" % result.version, key
        created = set(await reader.children("/crash/created"))
        missing = {path.rsplit("/", 1)[1] for path in acked_creates} - created
        assert not missing, f"acknowledged creates lost: {sorted(missing)[:10]}"
    finally:
        await reader.close()


async def test_snapshot_and_wal_restore_across_snap_count_boundary(tmp_path: Path) -> None:
    server = metastore_process(tmp_path, "--set", "snapCount=50")
    await asyncio.to_thread(server.start)
    try:
        store = await open_metadata_store(server.url)
        for i in range(70):
            await store.put(f"/snap/k{i % 40}", b"value-%d" % i)  # 40 creates, 30 updates
        for i in range(5):
            await store.delete(f"/snap/k{i}")
        expected = {name: await store.get(f"/snap/{name}") for name in await store.children("/snap")}
        await store.close()  # a session create + close: 2 more logged changes

        data_dir = tmp_path / "data"
        snapshots = snapshot_files.list_files(data_dir, snapshot_files.PREFIX)
        logs = snapshot_files.list_files(data_dir, "log.")
        assert [txid for txid, _ in snapshots] == [50], snapshots  # the boundary snapshot only
        assert [txid for txid, _ in logs] == [51], logs  # and the WAL after it

        await asyncio.to_thread(server.kill)
        await asyncio.to_thread(server.start)
        reader = await open_metadata_store(server.url)
        assert sorted(await reader.children("/snap")) == sorted(expected)
        for name, before in expected.items():
            after = await reader.get(f"/snap/{name}")
            assert (after.value, after.stat) == (before.value, before.stat), name
        await reader.close()
    finally:
        await asyncio.to_thread(server.stop)


async def test_restart_keeps_live_sessions_and_expires_dead_owners_one_timeout_later(server: ServerProcess) -> None:
    timeout_ms = 3000
    live = MetastoreClient(server.host, server.port, session_timeout_ms=timeout_ms)
    await live.start()
    events: list[SessionEvent] = []
    live.add_session_listener(events.append)
    await live.put("/sessions/live", b"", ephemeral=True)
    # A "dead" owner: creates a session and an ephemeral key, then vanishes without closing.
    dead = await connect(RawClient, server.host, server.port)
    created = await dead.request(MdSessionCreate, timeout_ms=timeout_ms)
    await dead.request(MdPut, path="/sessions/dead", value=b"", ephemeral=True, session_id=created.session_id)
    dead.abort()

    await asyncio.to_thread(server.kill)
    await wait_for(lambda: SessionEvent.CONNECTION_LOST in events, 5)
    loop = asyncio.get_running_loop()
    restarted_at = loop.time()  # before the restart: the restored deadline starts after this
    await asyncio.to_thread(restart_on_same_port, server)
    await wait_for(lambda: SessionEvent.RECONNECTED in events, 10, message=f"events: {events}")

    checker = await open_metadata_store(server.url)
    assert await checker.exists("/sessions/dead"), "restored sessions get a fresh deadline"
    await wait_for(lambda: _missing(checker, "/sessions/dead"), 10, message="dead owner's key never expired")
    assert loop.time() - restarted_at >= timeout_ms / 1000, "expired before its timeout"
    assert await checker.exists("/sessions/live"), "the reconnected client's key must survive"
    assert SessionEvent.SESSION_LOST not in events
    await checker.close()
    await live.close()


async def _missing(store, path: str) -> bool:
    return not await store.exists(path)


async def test_sigterm_shuts_down_cleanly_and_a_second_server_cannot_share_the_data_dir(
    server: ServerProcess,
    tmp_path: Path,
) -> None:
    second = ServerProcess("metastore", ["--port", "0", "--data-dir", str(tmp_path / "data")], tmp_path / "second.log")
    with pytest.raises(RuntimeError, match="exited with 2"):
        await asyncio.to_thread(second.start)
    assert "in use by another metastore" in second.log_tail()
    assert await asyncio.to_thread(server.stop) == 0
