"""Goal: a metastore killed with SIGKILL restarts with every change it acknowledged, from
its snapshot plus WAL, and resumes the sessions of clients that are still alive.

Method: a real ``minipulsar metastore`` process on a tmp data dir; clients write through
``MetastoreClient``; the process is SIGKILLed (no clean shutdown) and started again on the
same data dir."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from minipulsar.errors import MiniPulsarError
from minipulsar.metadata import MetastoreClient, SessionEvent, open_metadata_store
from minipulsar.metadata import snapshot as snapshot_files
from minipulsar.net.client import connect
from minipulsar.protocol.commands import MdPut, MdSessionCreate
from tests.support.fixtures import metastore_fixture
from tests.support.metadata import key_absent
from tests.support.process import ServerProcess, wait_for
from tests.support.raw_client import RawClient
from tests.support.servers import metastore_process

SHORT_SESSIONS = {"minSessionTimeout": 100}
metastore = metastore_fixture(settings=SHORT_SESSIONS)


async def test_sigkilled_metastore_restarts_with_every_acknowledged_change(metastore: ServerProcess) -> None:
    """50 writers each CAS-update their own key (value = version) and create fresh keys, as
    fast as they can; SIGKILL lands while writes are in flight. After the restart every
    answered write is there with its version; at most the one unanswered write per writer
    may also be there."""
    client = await open_metadata_store(metastore.url)
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
            return  # the metastore is gone: stop writing

    writers = [asyncio.ensure_future(writer(n)) for n in range(50)]
    await wait_for(lambda: sum(acked_versions.values()) >= 1500, 20, message="writes too slow")
    await asyncio.to_thread(metastore.kill)
    await asyncio.wait_for(asyncio.gather(*writers), 40)
    await client.close()
    assert sum(acked_versions.values()) >= 1500

    await asyncio.to_thread(metastore.start)
    reader = await open_metadata_store(metastore.url)
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
    metastore = metastore_process(tmp_path, settings={**SHORT_SESSIONS, "snapCount": 50})
    await asyncio.to_thread(metastore.start)
    try:
        store = await open_metadata_store(metastore.url)
        for i in range(70):
            await store.put(f"/snap/k{i % 40}", b"value-%d" % i)  # 40 creates, 30 updates
        for i in range(5):
            await store.delete(f"/snap/k{i}")
        expected = {name: await store.get(f"/snap/{name}") for name in await store.children("/snap")}
        await store.close()  # a session create + close: 2 more logged changes

        data_dir = tmp_path / "metastore"
        snapshots = snapshot_files.list_files(data_dir, snapshot_files.PREFIX)
        logs = snapshot_files.list_files(data_dir, "log.")
        assert [txid for txid, _ in snapshots] == [50], snapshots  # the boundary snapshot only
        assert [txid for txid, _ in logs] == [51], logs  # and the WAL after it

        await asyncio.to_thread(metastore.kill)
        await asyncio.to_thread(metastore.start)
        reader = await open_metadata_store(metastore.url)
        assert sorted(await reader.children("/snap")) == sorted(expected)
        for name, before in expected.items():
            after = await reader.get(f"/snap/{name}")
            assert (after.value, after.stat) == (before.value, before.stat), name
        await reader.close()
    finally:
        await asyncio.to_thread(metastore.stop)


async def test_restart_keeps_live_sessions_and_expires_dead_owners_one_timeout_later(metastore: ServerProcess) -> None:
    timeout_ms = 3000
    live = MetastoreClient(metastore.host, metastore.port, session_timeout_ms=timeout_ms)
    await live.start()
    events: list[SessionEvent] = []
    live.add_session_listener(events.append)
    await live.put("/sessions/live", b"", ephemeral=True)
    # A "dead" owner: creates a session and an ephemeral key, then vanishes without closing.
    dead = await connect(RawClient, metastore.host, metastore.port)
    created = await dead.request(MdSessionCreate, timeout_ms=timeout_ms)
    await dead.request(MdPut, path="/sessions/dead", value=b"", ephemeral=True, session_id=created.session_id)
    dead.abort()

    await asyncio.to_thread(metastore.kill)
    await wait_for(lambda: SessionEvent.CONNECTION_LOST in events, 5)
    loop = asyncio.get_running_loop()
    restarted_at = loop.time()  # before the restart: the restored deadline starts after this
    await asyncio.to_thread(metastore.start_on_same_port)
    await wait_for(lambda: SessionEvent.RECONNECTED in events, 10, message=f"events: {events}")

    checker = await open_metadata_store(metastore.url)
    assert await checker.exists("/sessions/dead"), "restored sessions get a fresh deadline"
    await wait_for(lambda: key_absent(checker, "/sessions/dead"), 10, message="dead owner's key never expired")
    assert loop.time() - restarted_at >= timeout_ms / 1000, "expired before its timeout"
    assert await checker.exists("/sessions/live"), "the reconnected client's key must survive"
    assert SessionEvent.SESSION_LOST not in events
    await checker.close()
    await live.close()


@pytest.mark.expect_error_log(r"metastore cannot start: .* is in use")
async def test_sigterm_shuts_down_cleanly_and_a_second_server_cannot_share_the_data_dir(
    metastore: ServerProcess,
    tmp_path: Path,
) -> None:
    second = metastore_process(tmp_path, name="second", data_dir=tmp_path / "metastore")
    with pytest.raises(RuntimeError, match="exited with 2"):
        await asyncio.to_thread(second.start)
    assert "in use by another metastore" in second.log_tail()
    assert await asyncio.to_thread(metastore.stop) == 0
