"""Load-manager leader election on /loadbalance/leader, with in-process metadata stores that
each play one broker's session (minipulsar/metadata/memory.py)."""

from __future__ import annotations

import json
import uuid

import pytest

from minipulsar.broker.loadbalance.leader import LEADER_PATH, LeaderElection
from minipulsar.metadata import MemoryMetadataStore
from minipulsar.metadata.memory import SharedTree
from tests.support.process import wait_for

pytestmark = pytest.mark.unit


@pytest.fixture
def tree() -> SharedTree:
    return SharedTree(f"lb-leader-{uuid.uuid4()}")


async def broker(tree: SharedTree, name: str) -> tuple[MemoryMetadataStore, LeaderElection]:
    store = MemoryMetadataStore(tree, session_timeout_ms=300)
    election = LeaderElection(store, name, f"http://{name}")
    await election.start()
    return store, election


async def test_exactly_one_broker_leads_and_the_key_names_it(tree: SharedTree) -> None:
    brokers = [await broker(tree, f"127.0.0.1:{8080 + i}") for i in range(3)]
    try:
        leaders = [e for _, e in brokers if e.is_leader]
        assert len(leaders) == 1
        found = await brokers[0][0].get(LEADER_PATH)
        assert json.loads(found.value) == {
            "brokerId": leaders[0].broker_id,
            "serviceUrl": f"http://{leaders[0].broker_id}",
        }
        assert all(e.leader == leaders[0].broker_id for _, e in brokers)
    finally:
        for store, election in brokers:
            await election.close()
            await store.close()


async def test_a_new_leader_is_elected_when_the_leader_dies(tree: SharedTree) -> None:
    (s1, e1), (s2, e2) = await broker(tree, "a:1"), await broker(tree, "b:1")
    try:
        assert e1.is_leader and not e2.is_leader
        await s1.close()  # the process is gone: its session ends, its ephemeral key with it
        await wait_for(lambda: e2.is_leader, timeout_s=5, message="b did not take over")
        assert e2.leader_changes == 2  # saw a, then itself
    finally:
        await e2.close()
        await s2.close()


async def test_a_leader_that_lost_its_session_stops_leading_then_runs_again(tree: SharedTree) -> None:
    store, election = await broker(tree, "a:1")
    seen: list[bool] = []
    election._on_change = seen.append
    try:
        store.expire_session()  # SESSION_LOST (the key is gone), then a new session
        await wait_for(
            lambda: election.is_leader and seen == [False, True],
            timeout_s=5,
            message="the broker did not lead again after its new session",
        )
        found = await store.get(LEADER_PATH)
        assert found is not None and json.loads(found.value)["brokerId"] == "a:1"
    finally:
        await election.close()
        await store.close()


async def test_closing_the_leader_hands_over_at_once(tree: SharedTree) -> None:
    (s1, e1), (s2, e2) = await broker(tree, "a:1"), await broker(tree, "b:1")
    try:
        await e1.close()
        await wait_for(lambda: e2.is_leader, timeout_s=2, message="b did not take over after a's close")
    finally:
        await e2.close()
        await s1.close()
        await s2.close()


async def test_a_stale_key_with_our_own_id_is_taken_over(tree: SharedTree) -> None:
    """A predecessor on the same address (or our own create whose answer was lost) holds the key."""
    old = MemoryMetadataStore(tree, session_timeout_ms=60_000)
    await old.put(
        LEADER_PATH,
        json.dumps({"brokerId": "a:1", "serviceUrl": "http://a:1"}).encode(),
        expected_version=-1,
        ephemeral=True,
    )
    store, election = await broker(tree, "a:1")
    try:
        await wait_for(lambda: election.is_leader, timeout_s=2, message="the stale key was not taken over")
    finally:
        await election.close()
        await store.close()
        await old.close()


async def test_a_leader_key_deleted_while_disconnected_is_contested_on_reconnection(tree: SharedTree) -> None:
    """Goal: b misses the deletion of the leader's key while disconnected; on RECONNECTED it runs
    a round anyway and leads (without it, nothing would ever make it try again)."""
    s1, e1 = await broker(tree, "a:1")
    s2 = MemoryMetadataStore(tree, session_timeout_ms=30_000)  # no expiry while disconnected
    e2 = LeaderElection(s2, "b:1", "http://b:1")
    await e2.start()
    try:
        assert e1.is_leader and not e2.is_leader
        s2.disconnect()
        await e1.close()
        await s1.close()
        assert tree.tree.get(LEADER_PATH) is None
        s2.reconnect()
        await wait_for(lambda: e2.is_leader, timeout_s=5, message="b never ran again after reconnecting")
    finally:
        await e2.close()
        await s2.close()
