"""Goal: every metadata backend honours the same MetadataStore contract: CAS, deletes with
versions, children, recursive watches, ephemeral keys that vanish on session expiry (with a
notification another session sees) and at once on close(), sequential keys.

Method: every test runs three times, against ``memory://``, a real ``minipulsar metastore``
process (one per module, ``minSessionTimeout=100`` so sessions can be short) and a real
ZooKeeper server (Debian's package, one per module, ``minSessionTimeout=200``; skipped, with
the reason, where it cannot run). Tests use a fresh key prefix each, so they can share the
servers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio

from minipulsar.errors import AlreadyExistsError, BadVersionError, NotEmptyError, NotFoundError
from minipulsar.metadata import (
    MetadataStore,
    Notification,
    NotificationType,
    SessionEvent,
    open_metadata_store,
)
from tests.support.fixtures import metastore_fixture
from tests.support.process import wait_for
from tests.support.zookeeper import zookeeper_fixture

StoreFactory = Callable[..., Awaitable[MetadataStore]]
SHORT_SESSION_MS = 300
metastore = metastore_fixture(per_module=True, settings={"minSessionTimeout": 100})
zookeeper = zookeeper_fixture(per_module=True)


@pytest_asyncio.fixture(params=["memory", "metastore", "zookeeper"])
async def open_store(request: pytest.FixtureRequest) -> AsyncIterator[StoreFactory]:
    """A factory of stores on one backend; each store is a separate session ("process")."""
    if request.param == "memory":
        url = f"memory://test-{uuid.uuid4().hex}"
    else:
        url = request.getfixturevalue(request.param).url
    stores: list[MetadataStore] = []

    async def factory(session_timeout_ms: int = 30_000) -> MetadataStore:
        store = await open_metadata_store(url, session_timeout_ms=session_timeout_ms)
        stores.append(store)
        return store

    yield factory
    for store in stores:
        await store.close()


@pytest.fixture
def root() -> str:
    return f"/test/{uuid.uuid4().hex[:12]}"


class Recorder:
    """Collects notifications / session events from listeners."""

    def __init__(self) -> None:
        self.seen: list = []

    def __call__(self, item) -> None:
        self.seen.append(item)

    def has(self, path: str, kind: NotificationType) -> bool:
        return Notification(path, kind) in self.seen


async def watch_synced(store: MetadataStore, path: str) -> Recorder:
    """Watch ``path``; a later answer on the same store implies the watch is registered."""
    recorder = Recorder()
    store.watch(path, recorder)
    await store.get(path)
    return recorder


async def test_cas_conflicts_are_refused(open_store: StoreFactory, root: str) -> None:
    store = await open_store()
    key = f"{root}/cas"
    with pytest.raises(NotFoundError):
        await store.put(key, b"x", 0)
    assert (await store.put(key, b"v0", -1)).version == 0
    with pytest.raises(AlreadyExistsError):
        await store.put(key, b"again", -1)
    with pytest.raises(BadVersionError):
        await store.put(key, b"stale", 3)
    assert (await store.put(key, b"v1", 0)).version == 1
    result = await store.get(key)
    assert (result.value, result.version, result.stat.ephemeral) == (b"v1", 1, False)
    assert (await store.put(key, b"v2")).version == 2  # unconditional


async def test_concurrent_cas_from_two_sessions_lets_exactly_one_win(open_store: StoreFactory, root: str) -> None:
    first, second = await open_store(), await open_store()
    key = f"{root}/race"
    await first.put(key, b"start")
    outcomes = await asyncio.gather(
        *(store.put(key, name, 0) for store, name in ((first, b"first"), (second, b"second"))), return_exceptions=True
    )
    assert sorted(type(o).__name__ for o in outcomes) == ["BadVersionError", "Stat"]
    assert (await second.get(key)).version == 1


async def test_delete_with_expected_version(open_store: StoreFactory, root: str) -> None:
    store = await open_store()
    key = f"{root}/parent/child"
    await store.put(key, b"x")
    await store.put(key, b"y")
    with pytest.raises(BadVersionError):
        await store.delete(key, 0)
    with pytest.raises(NotEmptyError):
        await store.delete(f"{root}/parent")
    await store.delete(key, 1)
    assert await store.get(key) is None
    with pytest.raises(NotFoundError):
        await store.delete(key)
    await store.delete(f"{root}/parent")


async def test_children_listing(open_store: StoreFactory, root: str) -> None:
    store = await open_store()
    for name in ("b", "a", "c/deeper"):
        await store.put(f"{root}/dir/{name}", b"")
    assert await store.children(f"{root}/dir") == ["a", "b", "c"]
    assert await store.children(f"{root}/dir/c") == ["deeper"]
    assert await store.children(f"{root}/missing") == []
    parent = await store.get(f"{root}/dir/c")
    assert (parent.value, parent.version) == (b"", 0)
    await store.delete_recursive(f"{root}/dir")
    assert await store.children(root) == []


async def test_watch_notifications(open_store: StoreFactory, root: str) -> None:
    writer, watcher = await open_store(), await open_store()
    seen = await watch_synced(watcher, root)
    outside = await watch_synced(watcher, f"{root}/other")
    key = f"{root}/w"
    await writer.put(key, b"1")
    await writer.put(key, b"2")
    await writer.delete(key)
    expected = [
        Notification(key, NotificationType.CREATED),
        Notification(root, NotificationType.CHILDREN_CHANGED),
        Notification(key, NotificationType.MODIFIED),
        Notification(key, NotificationType.DELETED),
        Notification(root, NotificationType.CHILDREN_CHANGED),
    ]
    await wait_for(lambda: len(seen.seen) >= 6, 5, message=f"saw {seen.seen}")
    # The first put also created ``root`` itself (a CREATED for it and a CHILDREN_CHANGED above it).
    assert [n for n in seen.seen if n.path != root or n.type != NotificationType.CREATED] == expected
    assert outside.seen == []


async def test_ephemeral_keys_vanish_after_session_expiry_with_watch_notification(
    open_store: StoreFactory,
    root: str,
) -> None:
    owner, watcher = await open_store(session_timeout_ms=SHORT_SESSION_MS), await open_store()
    events = Recorder()
    owner.add_session_listener(events)
    key = f"{root}/owner"
    stat = await owner.put(key, b"alive", ephemeral=True)
    assert stat.ephemeral and (await watcher.get(key)).stat.ephemeral
    seen = await watch_synced(watcher, root)

    owner.suspend_keepalive()  # the owner hangs: no more heartbeats
    await wait_for(lambda: seen.has(key, NotificationType.DELETED), 5, message="no deleted notification")
    assert await watcher.get(key) is None
    await wait_for(lambda: SessionEvent.SESSION_REESTABLISHED in events.seen, 5, message=f"{events.seen}")
    # ZooKeeper's server closes the connection of the session it expires: a CONNECTION_LOST may come first.
    session_events = [event for event in events.seen if event is not SessionEvent.CONNECTION_LOST]
    assert session_events[:2] == [SessionEvent.SESSION_LOST, SessionEvent.SESSION_REESTABLISHED]
    # The new session works: its ephemeral keys are created and seen again.
    await owner.put(key, b"back", ephemeral=True)
    assert (await watcher.get(key)).value == b"back"


async def test_close_removes_ephemeral_keys_at_once(open_store: StoreFactory, root: str) -> None:
    owner, watcher = await open_store(), await open_store()
    await owner.put(f"{root}/e1", b"", ephemeral=True)
    await owner.put(f"{root}/persistent", b"stays")
    seen = await watch_synced(watcher, root)
    await owner.close()
    assert await watcher.children(root) == ["persistent"]
    await wait_for(lambda: seen.has(f"{root}/e1", NotificationType.DELETED), 5)


async def test_bad_paths_are_refused_locally(open_store: StoreFactory) -> None:
    store = await open_store()
    for path in ("relative", "/trailing/", "/double//slash"):
        with pytest.raises(ValueError):
            await store.put(path, b"")


async def test_sequential_keys_get_increasing_numbers(open_store: StoreFactory, root: str) -> None:
    first, second = await open_store(), await open_store()
    paths = [
        await store.create_sequential(f"{root}/votes/V_", name, ephemeral=True)
        for store, name in ((first, b"a"), (second, b"b"), (first, b"c"))
    ]
    names = [path.rsplit("/", 1)[1] for path in paths]
    assert names == sorted(names) and len(set(names)) == 3
    assert all(name.startswith("V_") and len(name) == 12 and name[2:].isdigit() for name in names)
    assert [(await second.get(path)).value for path in paths] == [b"a", b"b", b"c"]
    assert (await second.get(paths[0])).stat.ephemeral
    await first.close()
    assert await second.children(f"{root}/votes") == [names[1]]


async def test_open_metadata_store_rejects_unknown_urls() -> None:
    for url in ("metastore://", "nonsense", "memory:/x", "zookeeper://localhost:2181"):
        with pytest.raises(ValueError, match="memory://"):
            await open_metadata_store(url)
