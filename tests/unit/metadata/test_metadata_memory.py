"""Goal: the memory backend's own controls work: explicit session expiry, timeout expiry of
a store that stops heart-beating, shared trees by name, and a WAL failure in the durable
tree reaching every waiter instead of hanging it.

Method: in-process stores on one loop; the durable tree's log fd is closed under it."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from minipulsar.errors import ConnectionClosedError, PersistenceError, SessionExpiredError
from minipulsar.metadata import (
    MemoryMetadataStore,
    Notification,
    NotificationType,
    SessionEvent,
    open_metadata_store,
)
from minipulsar.metadata.durable import DurableTree
from minipulsar.metadata.memory import SharedTree
from minipulsar.metadata.tree import KeyTree
from tests.support.metadata import key_absent
from tests.support.process import wait_for


async def test_stores_with_the_same_name_share_a_tree_and_others_do_not() -> None:
    name = uuid.uuid4().hex
    first = await open_metadata_store(f"memory://{name}")
    second = await open_metadata_store(f"memory://{name}")
    other = await open_metadata_store(f"memory://{name}-other")
    await first.put("/shared", b"x")
    assert (await second.get("/shared")).value == b"x"
    assert await other.get("/shared") is None
    for store in (first, second, other):
        await store.close()


async def test_expire_session_removes_ephemerals_notifies_and_opens_a_new_session() -> None:
    shared = SharedTree()
    owner, watcher = MemoryMetadataStore(shared), MemoryMetadataStore(shared)
    events: list[SessionEvent] = []
    owner.add_session_listener(events.append)
    seen: list[Notification] = []
    watcher.watch("/e", seen.append)
    await owner.put("/e/key", b"", ephemeral=True)
    old_session = owner.session_id
    owner.expire_session()
    assert await watcher.get("/e/key") is None
    await wait_for(lambda: len(events) == 2, 2)
    assert events == [SessionEvent.SESSION_LOST, SessionEvent.SESSION_REESTABLISHED]
    assert Notification("/e/key", NotificationType.DELETED) in seen
    assert owner.session_id != old_session
    assert (await owner.put("/e/key", b"", ephemeral=True)).ephemeral
    await owner.close()
    await watcher.close()
    with pytest.raises(ConnectionClosedError):
        await owner.get("/e")


async def test_a_store_that_stops_heartbeating_expires_after_its_timeout() -> None:
    shared = SharedTree()
    owner, watcher = MemoryMetadataStore(shared, session_timeout_ms=150), MemoryMetadataStore(shared)
    await owner.put("/hb", b"", ephemeral=True)
    loop = asyncio.get_running_loop()
    await asyncio.wait_for(_assert_key_stays(owner, loop, 0.3), 2)  # heart-beating: stays
    owner.suspend_keepalive()
    started = loop.time()
    await wait_for(lambda: key_absent(watcher, "/hb"), 2)
    assert loop.time() - started >= 0.1
    await owner.close()
    await watcher.close()


async def _assert_key_stays(store: MemoryMetadataStore, loop: asyncio.AbstractEventLoop, duration_s: float) -> None:
    """Poll for ``duration_s`` that the key stays (the session is renewed by the ticker)."""
    end = loop.time() + duration_s
    while loop.time() < end:
        assert await store.exists("/hb")
        await asyncio.sleep(0.02)


@pytest.mark.expect_error_log(r"metastore WAL write failed")
async def test_a_wal_failure_reaches_every_waiter_and_refuses_later_changes(tmp_path: Path) -> None:
    failures: list[BaseException] = []
    state = DurableTree(KeyTree(), 0, tmp_path, snapshot_every_txns=1000, on_failed=failures.append)
    await state.open()
    os.close(state.writer._fd)  # the next write fails with EBADF, as a dead disk would
    outcome: asyncio.Future = asyncio.get_running_loop().create_future()
    state.put("/x", b"", None, None, 0)
    state.when_durable(outcome.set_result)
    assert isinstance(await asyncio.wait_for(outcome, 5), OSError)
    assert len(failures) == 1
    with pytest.raises(PersistenceError):
        state.put("/y", b"", None, None, 0)
    late: list = []
    state.when_durable(late.append)
    assert late == [failures[0]]
    state.writer._fd = -1
    await state.close()


def test_keepalive_of_an_unknown_session_is_refused() -> None:
    with pytest.raises(SessionExpiredError):
        KeyTree().keepalive(12345, now_ms=0)


async def test_a_lost_connection_loses_notifications_and_a_short_one_keeps_the_session() -> None:
    """Goal: ``disconnect``/``reconnect`` behave as a network client's connection loss: events
    CONNECTION_LOST then RECONNECTED, requests refused meanwhile, notifications of that time
    lost (not delivered late), the session and its ephemeral keys kept."""
    shared = SharedTree()
    owner, writer = MemoryMetadataStore(shared), MemoryMetadataStore(shared)
    events: list[SessionEvent] = []
    owner.add_session_listener(events.append)
    seen: list[Notification] = []
    owner.watch("/w", seen.append)
    await owner.put("/mine", b"", ephemeral=True)
    owner.disconnect()
    with pytest.raises(ConnectionClosedError):
        await owner.get("/w")
    await writer.put("/w/missed", b"x")
    owner.reconnect()
    await wait_for(lambda: len(events) == 2, 2)
    assert events == [SessionEvent.CONNECTION_LOST, SessionEvent.RECONNECTED]
    await writer.put("/w/seen", b"x")
    await wait_for(lambda: Notification("/w/seen", NotificationType.CREATED) in seen, 2)
    assert all(n.path != "/w/missed" for n in seen)
    assert await writer.exists("/mine")
    await owner.close()
    await writer.close()


async def test_a_session_that_expires_while_disconnected_is_replaced_on_reconnect() -> None:
    """Goal: disconnected past its timeout, a store reports SESSION_LOST while still
    disconnected (its ephemeral keys are gone for everyone) and SESSION_REESTABLISHED only once
    it reconnects, with a new session."""
    shared = SharedTree()
    owner, watcher = MemoryMetadataStore(shared, session_timeout_ms=150), MemoryMetadataStore(shared)
    events: list[SessionEvent] = []
    owner.add_session_listener(events.append)
    await owner.put("/gone", b"", ephemeral=True)
    old_session = owner.session_id
    owner.disconnect()
    await wait_for(lambda: key_absent(watcher, "/gone"), 2)
    await wait_for(lambda: SessionEvent.SESSION_LOST in events, 2)
    assert events == [SessionEvent.CONNECTION_LOST, SessionEvent.SESSION_LOST]
    owner.reconnect()
    await wait_for(lambda: len(events) == 3, 2)
    assert events[-1] is SessionEvent.SESSION_REESTABLISHED
    assert owner.session_id != old_session
    assert (await owner.put("/gone", b"", ephemeral=True)).ephemeral
    await owner.close()
    await watcher.close()
