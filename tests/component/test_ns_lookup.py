"""Goal: the ownership keys and the lookup decision (docs/design.md §4.3) — any broker's answer
agrees on one owner, racing brokers end with exactly one, the leader's placement is followed
(authoritative redirects), non-leaders forward to the leader, an unloading bundle fails
retriably, a broker with a stale view of a split never owns the parent, a dead session's
bundles move, and the session rules (docs/design.md §4.1): a lost session stops serving at once
and only a fresh lookup re-acquires; a lost connection keeps serving; an ownership key deleted
while disconnected is noticed on reconnection.

Method: several NamespaceServices in one process, each on its own in-process metadata store
(its own session) over one shared tree, with a fake broker around each (no topics loaded) and a
scripted placement (the load manager's part in a lookup)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import pytest_asyncio

from minipulsar.broker.identity import BrokerIdentity
from minipulsar.broker.namespace.bundles import NamespaceBundle
from minipulsar.broker.namespace.liveness import LivenessProbe
from minipulsar.broker.namespace.ownership import OwnerData, ownership_path
from minipulsar.broker.namespace.service import NamespaceService
from minipulsar.broker.namespace.settings import NamespaceSettings
from minipulsar.broker.topics.registry import LoadedTopics
from minipulsar.errors import ErrorCode, NotOwnerError, SessionExpiredError
from minipulsar.metadata import MemoryMetadataStore, SessionEvent
from minipulsar.metadata.memory import SharedTree
from minipulsar.metadata.store import Stat
from minipulsar.topic_name import TopicName
from tests.support.broker_fakes import FakeConnection, LoadedTopic, NoTopics, UnloadingTopic
from tests.support.net import unused_port
from tests.support.process import wait_for

TOPIC = TopicName.parse("persistent://public/default/orders")


class FakeBroker:
    """A NamespaceService with what a broker gives it: a store, an identity, no topics loaded."""

    def __init__(self, tree: SharedTree, index: int, topics: LoadedTopics | None = None) -> None:
        self.store = MemoryMetadataStore(tree)
        self.identity = BrokerIdentity.of("127.0.0.1", 6650 + index, 8080 + index)
        self.liveness = ScriptedLiveness()
        self.ns = NamespaceService(
            self.store,
            self.identity,
            topics or NoTopics(),
            NamespaceSettings(default_bundle_count=4),
            liveness=self.liveness,
        )

    service_url = property(lambda self: self.identity.service_url)
    web_service_url = property(lambda self: self.identity.web_service_url)
    broker_id = property(lambda self: self.identity.broker_id)

    async def start(self) -> FakeBroker:
        info = {"pulsarServiceUrl": self.service_url, "webServiceUrl": self.web_service_url}
        await self.store.put(f"/loadbalance/brokers/{self.broker_id}", json.dumps(info).encode(), ephemeral=True)
        await self.ns.start()
        return self


class ScriptedLiveness:
    """Every broker is alive (nothing listens on these fake brokers' ports) unless ``probe`` is set."""

    def __init__(self) -> None:
        self.probe: LivenessProbe | None = None

    async def is_gone(self, service_url: str) -> bool:
        return self.probe is not None and await self.probe.is_gone(service_url)


class ScriptedPlacement:
    def __init__(self, leader: bool, choice: str | None) -> None:
        self.is_leader, self.choice = leader, choice
        self.asked: list[str] = []

    def select_broker_for(self, bundle: str) -> str | None:
        self.asked.append(bundle)
        return self.choice


@pytest_asyncio.fixture
async def brokers() -> AsyncIterator[list[FakeBroker]]:
    tree = SharedTree()
    started = await asyncio.gather(*(FakeBroker(tree, i).start() for i in range(3)))
    yield list(started)
    for broker in started:
        await broker.ns.close()
        await broker.store.close()


async def test_lookups_from_every_broker_agree_on_the_owner(brokers: list[FakeBroker]) -> None:
    a, b, c = brokers
    first = await a.ns.lookup(TOPIC)
    assert (first.kind, first.broker_url) == ("connect", a.service_url)
    for other in (b, c):
        answer = await other.ns.lookup(TOPIC)
        assert (answer.kind, answer.broker_url, answer.http_url, answer.authoritative) == (
            "redirect",
            a.service_url,
            a.web_service_url,
            False,
        )
    owner = OwnerData.from_json((await a.store.get(ownership_path(await a.ns.bundle_of(TOPIC)))).value)
    assert owner == OwnerData(a.service_url, a.web_service_url, disabled=False)
    assert (await a.ns.lookup(TOPIC)).kind == "connect"


async def test_racing_brokers_end_with_exactly_one_owner(brokers: list[FakeBroker]) -> None:
    answers = await asyncio.gather(*(broker.ns.lookup(TOPIC) for broker in brokers))
    connects = [answer for answer in answers if answer.kind == "connect"]
    assert len(connects) == 1
    winner = connects[0].broker_url
    assert all(answer.broker_url == winner for answer in answers)
    assert sum(len(broker.ns.owned_bundles()) for broker in brokers) == 1


async def test_authoritative_lookup_takes_an_unowned_bundle(brokers: list[FakeBroker]) -> None:
    a, b, _ = brokers
    a.ns.placement = ScriptedPlacement(leader=True, choice=a.broker_id)
    answer = await b.ns.lookup(TOPIC, authoritative=True)
    assert (answer.kind, answer.broker_url) == ("connect", b.service_url)


async def test_the_leaders_placement_is_followed_through_an_authoritative_redirect(brokers: list[FakeBroker]) -> None:
    a, b, c = brokers
    await a.store.put(
        "/loadbalance/leader",
        json.dumps({"brokerId": a.broker_id, "serviceUrl": a.web_service_url}).encode(),
        ephemeral=True,
    )
    a.ns.placement = a_placement = ScriptedPlacement(leader=True, choice=b.broker_id)
    c.ns.placement = c_placement = ScriptedPlacement(leader=False, choice=c.broker_id)
    forwarded = await c.ns.lookup(TOPIC)  # a non-leader forwards the decision to the leader
    assert (forwarded.kind, forwarded.broker_url, forwarded.authoritative) == ("redirect", a.service_url, False)
    assert c_placement.asked == []
    decided = await a.ns.lookup(TOPIC)
    assert (decided.kind, decided.broker_url, decided.authoritative) == ("redirect", b.service_url, True)
    assert a_placement.asked == [(await a.ns.bundle_of(TOPIC)).name]
    taken = await b.ns.lookup(TOPIC, authoritative=decided.authoritative)
    assert (taken.kind, taken.broker_url) == ("connect", b.service_url)


async def test_without_a_leader_a_broker_decides_itself(brokers: list[FakeBroker]) -> None:
    _, b, c = brokers
    c.ns.placement = placement = ScriptedPlacement(leader=False, choice=b.broker_id)
    answer = await c.ns.lookup(TOPIC)
    assert (answer.kind, answer.broker_url, answer.authoritative) == ("redirect", b.service_url, True)
    placement.choice = None  # no opinion: take it
    other = TopicName.parse("persistent://public/default/something-else")
    assert (await c.ns.lookup(other)).broker_url == c.service_url


async def test_a_bundle_being_unloaded_fails_retriably_everywhere(brokers: list[FakeBroker]) -> None:
    a, b, _ = brokers
    await a.ns.lookup(TOPIC)
    owned = a.ns.ownership.owned[(await a.ns.bundle_of(TOPIC)).name]
    await a.ns.ownership.disable(owned)
    for broker in (a, b):
        answer = await broker.ns.lookup(TOPIC)
        assert answer.kind == "failed" and answer.error is ErrorCode.SERVICE_NOT_READY
        assert "being unloaded" in answer.message


async def test_unload_releases_the_bundle_and_the_next_lookup_places_it_again(brokers: list[FakeBroker]) -> None:
    a, b, _ = brokers
    await a.ns.lookup(TOPIC)
    bundle = await a.ns.bundle_of(TOPIC)
    events = []
    a.ns.add_ownership_listener(lambda event, name: events.append((event, name)))
    await a.ns.unload_bundle(bundle.name)
    assert a.ns.owned_bundles() == [] and await a.store.get(ownership_path(bundle)) is None
    assert events == [("unloaded", bundle.name)]
    assert (await b.ns.lookup(TOPIC)).broker_url == b.service_url


async def test_split_owns_both_halves_and_a_stale_broker_never_owns_the_parent(brokers: list[FakeBroker]) -> None:
    a, b, _ = brokers
    await a.ns.lookup(TOPIC)
    parent = await a.ns.bundle_of(TOPIC)
    stale = await b.ns.bundles("public/default")  # b read the boundaries before the split
    halves = await a.ns.split_bundle(parent.name, "range_equally_divide")
    assert sorted(h.name for h in a.ns.owned_bundles()) == sorted(h.name for h in halves)
    assert await a.store.get(ownership_path(parent)) is None
    for half in halves:
        await a.ns.unload_bundle(half)
    b.ns._cache["public/default"] = stale  # as if b had missed the change notification
    answer = await b.ns.lookup(TOPIC)  # b's cache says "parent": acquiring it must fail over to the half
    assert (answer.kind, answer.broker_url) == ("connect", b.service_url)
    assert [o.name for o in b.ns.owned_bundles()] == [(await a.ns.bundle_of(TOPIC)).name]
    assert await b.store.get(ownership_path(parent)) is None


async def test_a_dead_brokers_bundles_move_on_the_next_lookup(brokers: list[FakeBroker]) -> None:
    a, b, _ = brokers
    await a.ns.lookup(TOPIC)
    await a.store.close()  # the session ends: its ephemeral keys go
    answer = await b.ns.lookup(TOPIC)
    assert (answer.kind, answer.broker_url) == ("connect", b.service_url)


async def test_a_key_left_by_an_earlier_session_on_the_same_address_is_taken_over(brokers: list[FakeBroker]) -> None:
    a, _, _ = brokers
    bundle: NamespaceBundle = await a.ns.bundle_of(TOPIC)
    earlier = MemoryMetadataStore(a.store.shared)  # the previous process, not expired yet
    await earlier.put(ownership_path(bundle), OwnerData(a.service_url, a.web_service_url).to_json(), ephemeral=True)
    answer = await a.ns.lookup(TOPIC)
    assert (answer.kind, answer.broker_url) == ("connect", a.service_url)
    assert bundle.name in a.ns.ownership.owned
    await earlier.close()
    assert await a.store.get(ownership_path(bundle)) is not None  # still ours after the old session ended


async def test_an_owner_whose_port_refuses_connections_is_replaced_but_a_listening_one_is_not(
    brokers: list[FakeBroker],
) -> None:
    """Goal: a broker takes a dead owner's bundles after its session expires; the TCP probe
    takes them at once when nothing listens on its port, and never from a live broker."""
    _, b, _ = brokers
    b.liveness.probe = LivenessProbe()
    ghost = MemoryMetadataStore(b.store.shared)  # the owner's session, not expired yet
    listening = await asyncio.start_server(lambda reader, writer: writer.close(), "127.0.0.1", 0)
    closed_port = unused_port()
    try:
        live_port = listening.sockets[0].getsockname()[1]
        live_topic = TopicName.parse("persistent://public/default/live-owner")
        bundles = await b.ns.bundles("public/default")
        dead_topic = next(
            TopicName.parse(name)
            for name in (f"persistent://public/default/dead-{i}" for i in range(99))
            if bundles.find(name) != bundles.find(str(live_topic))
        )
        for topic, port in ((live_topic, live_port), (dead_topic, closed_port)):
            owner = OwnerData(f"pulsar://127.0.0.1:{port}", f"http://127.0.0.1:{port}")
            await ghost.put(ownership_path(await b.ns.bundle_of(topic)), owner.to_json(), ephemeral=True)
        live = await b.ns.lookup(live_topic)
        assert (live.kind, live.broker_url) == ("redirect", f"pulsar://127.0.0.1:{live_port}")
        dead = await b.ns.lookup(dead_topic)
        assert (dead.kind, dead.broker_url) == ("connect", b.service_url)
    finally:
        listening.close()
        await ghost.close()


async def test_a_broker_whose_ownership_key_is_deleted_stops_serving_the_bundle(brokers: list[FakeBroker]) -> None:
    a, b, _ = brokers
    await a.ns.lookup(TOPIC)
    bundle = await a.ns.bundle_of(TOPIC)
    events = []
    a.ns.add_ownership_listener(lambda event, name: events.append((event, name)))
    await b.store.delete(ownership_path(bundle))  # another broker judged a dead and took it away
    await wait_for(lambda: bundle.name not in a.ns.ownership.owned, 5, message="a still serves the bundle")
    assert events == [("unloaded", bundle.name)]
    assert (await b.ns.lookup(TOPIC)).broker_url == b.service_url


async def test_a_lost_session_stops_serving_at_once_and_only_a_fresh_lookup_reacquires() -> None:
    """Goal: when a's session expires it stops serving within the SESSION_LOST callback itself —
    no bundle owned, its topic fenced (no more metadata writes) and its producer and consumer
    detached, the topic refused — before the loop runs anything else; the topic closes and the
    clients hear CLOSE_* after; b takes the bundle on a lookup, and a serves it again only
    after a fresh lookup finds it unowned.
    Method: a listener registered after the namespace service's runs right after it and
    records what it sees."""
    log: list[str] = []
    connection = FakeConnection(log)
    done = asyncio.get_running_loop().create_future()
    done.set_result(None)
    tree = SharedTree()
    topics = LoadedTopic(UnloadingTopic(log, connection, done, name=str(TOPIC)))
    a, b = await FakeBroker(tree, 0, topics).start(), await FakeBroker(tree, 1).start()
    try:
        assert (await a.ns.lookup(TOPIC)).broker_url == a.service_url
        seen_at_once: list[object] = []

        def right_after(event: SessionEvent) -> None:
            if event is SessionEvent.SESSION_LOST:
                try:
                    a.ns.check_serving(TOPIC)
                    refused = False
                except NotOwnerError:
                    refused = True
                seen_at_once.extend([a.ns.owned_bundles(), list(log), refused])

        a.store.add_session_listener(right_after)
        a.store.expire_session()
        await wait_for(lambda: "CLOSE_CONSUMER 7 None" in log, 5, message="the clients were never told")
        assert seen_at_once == [[], ["topic fenced", "detach producer 1", "detach consumer 7"], True]
        assert log.index("topic closed") < log.index("CLOSE_PRODUCER 1 None")
        assert (await b.ns.lookup(TOPIC)).broker_url == b.service_url
        assert (await a.ns.lookup(TOPIC)).broker_url == b.service_url  # a redirect: b owns it now
        await b.ns.close()
        await b.store.close()
        assert (await a.ns.lookup(TOPIC)).broker_url == a.service_url  # a fresh lookup re-acquires
    finally:
        for broker in (a, b):
            await broker.ns.close()
            await broker.store.close()


async def test_a_lost_connection_without_expiry_keeps_serving(brokers: list[FakeBroker]) -> None:
    """Goal: CONNECTION_LOST and RECONNECTED within the session timeout drop nothing: the
    bundle stays owned and served throughout, and the key stays a's."""
    a, b, _ = brokers
    await a.ns.lookup(TOPIC)
    bundle = await a.ns.bundle_of(TOPIC)
    events: list[SessionEvent] = []
    a.store.add_session_listener(events.append)
    a.store.disconnect()
    await wait_for(lambda: events == [SessionEvent.CONNECTION_LOST], 5)
    a.ns.check_serving(TOPIC)
    a.store.reconnect()
    await wait_for(lambda: events[-1:] == [SessionEvent.RECONNECTED], 5)
    assert (await a.ns.lookup(TOPIC)).broker_url == a.service_url
    a.ns.check_serving(TOPIC)
    assert [o.name for o in a.ns.owned_bundles()] == [bundle.name]
    assert (await b.ns.lookup(TOPIC)).broker_url == a.service_url


async def test_an_ownership_key_deleted_while_disconnected_is_noticed_on_reconnection(
    brokers: list[FakeBroker],
) -> None:
    """Goal: the deletion notification a missed while disconnected is not lost to it: on
    RECONNECTED it re-reads its ownership keys and stops serving the bundle whose key is gone."""
    a, b, _ = brokers
    await a.ns.lookup(TOPIC)
    bundle = await a.ns.bundle_of(TOPIC)
    a.store.disconnect()
    await b.store.delete(ownership_path(bundle))  # another broker judged a dead and took it away
    a.store.reconnect()
    await wait_for(lambda: bundle.name not in a.ns.ownership.owned, 5, message="a still serves the bundle")
    assert (await b.ns.lookup(TOPIC)).broker_url == b.service_url


class ExpiredSessionStore(MemoryMetadataStore):
    """A store between SESSION_LOST and SESSION_REESTABLISHED: ephemeral creates are refused."""

    async def put(
        self, path: str, value: bytes, expected_version: int | None = None, *, ephemeral: bool = False
    ) -> Stat:
        if ephemeral:
            raise SessionExpiredError(f"session {self.session_id:#x} expired")
        return await super().put(path, value, expected_version, ephemeral=ephemeral)


async def test_a_lookup_while_the_session_is_being_replaced_fails_retriably() -> None:
    """Goal: between SESSION_LOST and SESSION_REESTABLISHED the ownership create is refused with
    SessionExpired; the lookup answers ServiceNotReady (the client retries), not that error."""
    tree = SharedTree()
    broker = FakeBroker(tree, 0)
    await broker.store.close()
    broker.store = ExpiredSessionStore(tree)
    broker.ns = NamespaceService(
        broker.store, broker.identity, NoTopics(), NamespaceSettings(default_bundle_count=4), liveness=broker.liveness
    )
    await broker.ns.start()
    try:
        answer = await broker.ns.lookup(TOPIC)
        assert (answer.kind, answer.error) == ("failed", ErrorCode.SERVICE_NOT_READY)
    finally:
        await broker.ns.close()
        await broker.store.close()


class LosesSessionDuringCreate(MemoryMetadataStore):
    """The session is lost after the server applied an ownership create, before its answer is
    read (``on_create`` runs then)."""

    on_create: Callable[[], None] = staticmethod(lambda: None)

    async def put(
        self, path: str, value: bytes, expected_version: int | None = None, *, ephemeral: bool = False
    ) -> Stat:
        stat = await super().put(path, value, expected_version, ephemeral=ephemeral)
        if ephemeral:
            self.on_create()
        return stat


async def test_a_create_answered_after_the_session_was_lost_is_not_an_ownership() -> None:
    """Goal: an ownership create whose answer is read after the session loss was handled made a
    key of the dead session: the broker does not count the bundle as owned, and the lookup
    fails retriably."""
    tree = SharedTree()
    broker = FakeBroker(tree, 0)
    await broker.store.close()
    store = broker.store = LosesSessionDuringCreate(tree)
    broker.ns = NamespaceService(
        store, broker.identity, NoTopics(), NamespaceSettings(default_bundle_count=4), liveness=broker.liveness
    )
    await broker.ns.start()
    try:
        store.on_create = broker.ns.ownership.forget_all  # what SESSION_LOST does, in between
        answer = await broker.ns.lookup(TOPIC)
        assert (answer.kind, answer.error) == ("failed", ErrorCode.SERVICE_NOT_READY)
        assert broker.ns.owned_bundles() == []
    finally:
        await broker.ns.close()
        await store.close()
