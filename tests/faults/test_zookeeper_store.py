"""Goal: the ZooKeeper store rides out server failures the way the metastore client does:
requests wait for the reconnection (up to the operation timeout), a conditional put whose
outcome is unknown raises instead of being re-sent, a session that outlived its timeout is
reported lost and replaced, and on an ensemble the leader's death costs neither the session
nor its ephemeral keys nor its watches.

Method: real ZooKeeper servers (Debian's package), SIGSTOPped / SIGKILLed and restarted on
their ports and data while a store is in use."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio

from minipulsar.errors import ConnectionClosedError
from minipulsar.metadata import Notification, NotificationType, SessionEvent, Stat
from minipulsar.metadata.zk_url import parse_zookeeper_url
from minipulsar.metadata.zookeeper import ZooKeeperMetadataStore
from tests.support.net import black_hole
from tests.support.process import wait_for
from tests.support.zookeeper import ZooKeeperEnsemble, zookeeper_fixture

zookeeper = zookeeper_fixture()
ensemble = zookeeper_fixture(nodes=3, name="ensemble")
LONG_SESSION_MS = 10_000
"""Longer than a ZooKeeper restart takes here, so the session outlives it."""

StartStore = Callable[..., Awaitable[tuple[ZooKeeperMetadataStore, list[SessionEvent]]]]


@pytest_asyncio.fixture
async def start_store() -> AsyncIterator[StartStore]:
    made: list[ZooKeeperMetadataStore] = []

    async def start(zk: ZooKeeperEnsemble, **kwargs) -> tuple[ZooKeeperMetadataStore, list[SessionEvent]]:
        store = ZooKeeperMetadataStore(parse_zookeeper_url(zk.url), **kwargs)
        await store.start()
        made.append(store)
        events: list[SessionEvent] = []
        store.add_session_listener(events.append)
        return store, events

    yield start
    for store in made:
        await store.close()


async def test_requests_issued_while_disconnected_wait_for_the_reconnection(
    zookeeper: ZooKeeperEnsemble, start_store: StartStore
) -> None:
    store, events = await start_store(zookeeper, session_timeout_ms=LONG_SESSION_MS)
    await store.put("/wait/key", b"before")
    await asyncio.to_thread(zookeeper.kill, 0)
    await wait_for(lambda: SessionEvent.CONNECTION_LOST in events, 5)
    pending_get = asyncio.ensure_future(store.get("/wait/key"))
    pending_put = asyncio.ensure_future(store.put("/wait/other", b"queued"))
    await asyncio.to_thread(zookeeper.restart, 0)
    assert (await asyncio.wait_for(pending_get, 10)).value == b"before"
    assert (await asyncio.wait_for(pending_put, 10)).version == 0
    await wait_for(lambda: SessionEvent.RECONNECTED in events, 5, message=f"events: {events}")
    assert events == [SessionEvent.CONNECTION_LOST, SessionEvent.RECONNECTED]


async def test_requests_fail_with_a_retriable_error_after_the_operation_timeout(
    zookeeper: ZooKeeperEnsemble, start_store: StartStore
) -> None:
    store, events = await start_store(zookeeper, session_timeout_ms=LONG_SESSION_MS, operation_timeout_s=0.5)
    await asyncio.to_thread(zookeeper.kill, 0)
    await wait_for(lambda: SessionEvent.CONNECTION_LOST in events, 5)
    with pytest.raises(ConnectionClosedError) as failure:
        await store.get("/anything")
    assert failure.value.retriable


async def test_a_conditional_put_with_unknown_outcome_raises_but_an_unconditional_one_is_resent(
    zookeeper: ZooKeeperEnsemble, start_store: StartStore
) -> None:
    store, _events = await start_store(zookeeper, session_timeout_ms=LONG_SESSION_MS)
    await store.put("/unknown/cas", b"v0")
    await asyncio.to_thread(zookeeper.nodes[0].pause)  # requests reach the server's socket, never an answer
    conditional = asyncio.ensure_future(store.put("/unknown/cas", b"v1", 0))
    unconditional = asyncio.ensure_future(store.put("/unknown/plain", b"p"))
    await wait_for(lambda: len(store._client._pending) >= 2, 5, message="the puts were not sent")
    await asyncio.to_thread(zookeeper.kill, 0)
    with pytest.raises(ConnectionClosedError, match="may or may not have been applied"):
        await asyncio.wait_for(conditional, 10)
    await asyncio.to_thread(zookeeper.restart, 0)
    assert isinstance(await asyncio.wait_for(unconditional, 15), Stat)
    assert (await store.get("/unknown/plain")).value == b"p"
    assert (await store.get("/unknown/cas")).value == b"v0"  # the server never read the CAS put


async def test_a_session_that_outlives_its_timeout_is_lost_and_replaced(
    zookeeper: ZooKeeperEnsemble, start_store: StartStore
) -> None:
    store, events = await start_store(zookeeper, session_timeout_ms=1000)
    await store.put("/lost/ephemeral", b"", ephemeral=True)
    old_session = store.session_id
    await asyncio.to_thread(zookeeper.kill, 0)
    await wait_for(lambda: SessionEvent.SESSION_LOST in events, 5, message=f"events: {events}")
    # the restarted server restores the session with a fresh deadline ...
    await asyncio.to_thread(zookeeper.restart, 0)
    await wait_for(lambda: SessionEvent.SESSION_REESTABLISHED in events, 15, message=f"events: {events}")
    assert events == [SessionEvent.CONNECTION_LOST, SessionEvent.SESSION_LOST, SessionEvent.SESSION_REESTABLISHED]
    assert store.session_id != old_session
    assert await store.get("/lost/ephemeral") is None  # ... but the store closed it
    await store.put("/lost/ephemeral", b"again", ephemeral=True)
    assert (await store.get("/lost/ephemeral")).stat.ephemeral


async def test_killing_the_ensemble_leader_keeps_the_session_its_keys_and_watches(
    ensemble: ZooKeeperEnsemble, start_store: StartStore
) -> None:
    owner, events = await start_store(ensemble, session_timeout_ms=LONG_SESSION_MS)
    watcher, watcher_events = await start_store(ensemble, session_timeout_ms=LONG_SESSION_MS)
    await owner.put("/failover/owner", b"alive", ephemeral=True)
    seen: list[Notification] = []
    watcher.watch("/failover", seen.append)
    await watcher.get("/failover")
    session = owner.session_id
    leader = ensemble.leader()
    assert leader is not None
    await asyncio.to_thread(ensemble.kill, leader)
    await owner.put("/failover/after", b"written after the leader died")  # waits for a new leader
    assert owner.session_id == session
    assert (await watcher.get("/failover/owner")).stat.ephemeral
    # A watcher that was on the dead node re-adds its watch when it reconnects, then says so.
    await wait_for(
        lambda: watcher_events.count(SessionEvent.CONNECTION_LOST) == watcher_events.count(SessionEvent.RECONNECTED),
        10,
        message=f"watcher events: {watcher_events}",
    )
    await owner.put("/failover/later", b"")
    await wait_for(lambda: Notification("/failover/later", NotificationType.CREATED) in seen, 10, message=f"{seen}")
    assert SessionEvent.SESSION_LOST not in events + watcher_events


async def test_session_timeouts_are_clamped_to_the_server_bounds(
    zookeeper: ZooKeeperEnsemble, start_store: StartStore
) -> None:
    short, _ = await start_store(zookeeper, session_timeout_ms=10)
    long, _ = await start_store(zookeeper, session_timeout_ms=10**9)
    assert (short.session_timeout_ms, long.session_timeout_ms) == (200, 60_000)  # the fixture's bounds


async def test_listeners_run_on_the_stores_loop_not_on_kazoos_threads(
    zookeeper: ZooKeeperEnsemble, start_store: StartStore
) -> None:
    store, _ = await start_store(zookeeper, session_timeout_ms=LONG_SESSION_MS)
    threads: set[int] = set()
    store.watch("/threads", lambda _: threads.add(threading.get_ident()))
    store.add_session_listener(lambda _: threads.add(threading.get_ident()))
    await store.put("/threads/key", b"")
    await asyncio.to_thread(zookeeper.kill, 0)
    await asyncio.to_thread(zookeeper.restart, 0)
    await store.put("/threads/key", b"again")
    await wait_for(lambda: len(threads) > 0, 5)
    assert threads == {threading.get_ident()}


async def test_a_watch_added_before_start_is_registered_by_start(zookeeper: ZooKeeperEnsemble) -> None:
    store = ZooKeeperMetadataStore(parse_zookeeper_url(zookeeper.url))
    seen: list[Notification] = []
    store.watch("/early", seen.append)
    await store.start()
    try:
        await store.put("/early/key", b"")
        await wait_for(lambda: Notification("/early/key", NotificationType.CREATED) in seen, 5, message=f"{seen}")
    finally:
        await store.close()


async def test_a_server_that_swallows_connects_costs_an_attempt_its_share_of_the_session(
    zookeeper: ZooKeeperEnsemble,
) -> None:
    """kazoo would wait the whole session timeout for such a connect (the session could expire
    on one dead server of a live ensemble); the store gives each server session ÷ servers, as
    ZooKeeper's Java client does."""
    with black_hole() as (host, port):
        url = f"zk:{host}:{port},{zookeeper.url.removeprefix('zk:')}"
        store = ZooKeeperMetadataStore(parse_zookeeper_url(url), session_timeout_ms=60_000)
        handler = store._client.handler
        assert handler.connect_timeout_s == 30.0
        handler.connect_timeout_s = 0.5  # the share, made short for the test

        def attempt() -> OSError | None:
            try:
                handler.create_connection(address=(host, port), timeout=60.0).close()
            except OSError as error:  # socket.timeout: given up after its share, not after 60 s
                return error
            return None

        assert isinstance(await asyncio.wait_for(asyncio.to_thread(attempt), 10), OSError)
