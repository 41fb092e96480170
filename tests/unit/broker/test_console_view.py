"""Goal: the web console's JSON — the cluster document built from what the brokers and bookies
answered, Pulsar's ``broker-stats/topics`` shape, the per-broker bookie view, and the cache that
bounds the gatherings.

Method: hand-made answers (as the brokers' endpoints give them, malformed ones too) into the pure
:func:`console_view`; a real non-persistent topic with a consumer for the topic stats; a
:class:`SnapshotCache` over a gathering the test holds back, on a manual clock."""

from __future__ import annotations

import asyncio
from typing import Any

from minipulsar.bookkeeper.bookie_registry import BookieSet
from minipulsar.bookkeeper.quarantine import BookieQuarantine
from minipulsar.broker.broker_stats import bookie_client_stats, broker_topics_stats
from minipulsar.broker.console.gather import SnapshotCache
from minipulsar.broker.console.view import BookieAnswer, BrokerAnswers, ClusterFacts, console_view
from minipulsar.broker.namespace.bundles import BundleRange, NamespaceBundle
from minipulsar.broker.topics.consumer import ServerConsumer
from minipulsar.broker.topics.non_persistent_topic import NonPersistentTopic
from minipulsar.topic_name import TopicName
from tests.support.broker_fakes import FakeConnection, batch_payload
from tests.support.clock import ManualClock

A, B, C = "10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"
BUNDLE = "0x00000000_0xffffffff"


def topic_stats_answer(**topics: dict[str, Any]) -> dict[str, Any]:
    """A ``broker-stats/topics`` answer holding ``topics`` (local name → stats) in public/default."""
    named = {f"persistent://public/default/{name}": stats for name, stats in topics.items()}
    return {"public/default": {BUNDLE: {"persistent": named}}}


def busy(rate_in: float, count_in: int, backlog: float = 0.0) -> dict[str, Any]:
    return {
        "msgRateIn": rate_in,
        "msgRateOut": rate_in / 2,
        "msgThroughputIn": rate_in * 1024,
        "msgThroughputOut": rate_in * 512,
        "msgInCount": count_in,
        "msgOutCount": count_in // 2,
        "bytesInCount": count_in * 1024,
        "bytesOutCount": count_in * 512,
        "storageSize": 4096,
        "backlogSize": 1024,
        "producerCount": 1,
        "subscriptions": {"sub": {"type": "Shared", "msgBacklog": backlog, "msgRateOut": 1.0, "consumers": [{}, {}]}},
    }


def facts(brokers: list[BrokerAnswers], bookies: list[BookieAnswer] | None = None, **kwargs: Any) -> ClusterFacts:
    return ClusterFacts("standalone", A, 1_000, leader=B, brokers=brokers, bookies=bookies or [], **kwargs)


def test_every_broker_is_listed_with_its_load_bundles_topics_and_role() -> None:
    up = BrokerAnswers(
        A,
        f"http://{A}",
        load_report={"cpu": {"usage": 50.0, "limit": 200.0}, "msgRateIn": 3.0, "lastStats": {"big": 1}},
        owned_namespaces={f"public/default/{BUNDLE}": {"is_active": True}},
        topics=topic_stats_answer(t1=busy(10, 100), t2=busy(20, 300)),
        bookies={},
    )
    down = BrokerAnswers(B, f"http://{B}", errors=("/admin/v2/broker-stats/topics: Connection refused",))
    doc = console_view(facts([up, down]), topics_max=10)
    first, second = doc["brokers"]
    assert first["brokerId"] == A and first["self"] and not first["leader"] and first["reachable"]
    assert first["load"]["cpu"] == {"usage": 50.0, "limit": 200.0} and "lastStats" not in first["load"]
    assert first["bundles"] == [f"public/default/{BUNDLE}"] and first["topics"] == 2
    assert first["counters"] == {"msgInCount": 400, "msgOutCount": 200, "bytesInCount": 409600, "bytesOutCount": 204800}
    assert second["brokerId"] == B and second["leader"] and not second["reachable"] and second["load"] is None
    assert second["counters"] is None, "no topics answer: no counters to difference"
    assert second["errors"] == ["/admin/v2/broker-stats/topics: Connection refused"]
    assert doc["leader"] == B and doc["servedBy"] == A and doc["cluster"] == "standalone" and doc["time"] == 1_000


def test_topics_are_the_busiest_first_capped_and_totals_count_them_all() -> None:
    answers = [
        BrokerAnswers(A, None, topics=topic_stats_answer(quiet=busy(1, 10), loud=busy(50, 10, backlog=7))),
        BrokerAnswers(B, None, topics=topic_stats_answer(middle=busy(20, 10))),
    ]
    doc = console_view(facts(answers), topics_max=2)
    assert [t["topic"].rsplit("/", 1)[1] for t in doc["topics"]] == ["loud", "middle"]
    assert doc["topicsTotal"] == 3
    assert doc["totals"]["msgRateIn"] == 71 and doc["totals"]["msgThroughputOut"] == 71 * 512
    loud = doc["topics"][0]
    assert loud["broker"] == A and loud["bundle"] == f"public/default/{BUNDLE}"
    assert loud["msgBacklog"] == 7 and loud["consumerCount"] == 2 and loud["producerCount"] == 1
    assert loud["subscriptions"] == [
        {"name": "sub", "type": "Shared", "msgBacklog": 7, "msgRateOut": 1.0, "consumers": 2}
    ]


def test_answers_of_the_wrong_shape_read_as_absent() -> None:
    """Another broker's version may answer differently: the page must still render."""
    odd = {
        "public/default": {BUNDLE: {"persistent": {"persistent://public/default/t": {"msgRateIn": "fast"}}}},
        "x": [1, 2],
        "y": {BUNDLE: None},
    }
    answers = [BrokerAnswers(A, None, load_report=["not", "a", "dict"], owned_namespaces=7, topics=odd, bookies=3)]
    doc = console_view(facts(answers, [BookieAnswer("b:3181", "writable", info={})]), topics_max=5)
    broker = doc["brokers"][0]
    assert broker["load"] is None and broker["bundles"] == [] and broker["topics"] == 1
    (topic,) = doc["topics"]
    assert topic["msgRateIn"] == 0.0 and topic["subscriptions"] == [] and topic["consumerCount"] == 0
    assert doc["bookies"][0]["quarantinedBy"] == [] and doc["bookies"][0]["pendingRequests"] == {A: 0}


def test_bookies_show_their_state_and_which_brokers_quarantine_them() -> None:
    def view(quarantined: bool, pending: int) -> dict[str, Any]:
        return {
            "quarantined": quarantined,
            "quarantineRemainingSeconds": 60.0 if quarantined else None,
            "pendingRequests": pending,
        }

    answers = [
        BrokerAnswers(A, None, bookies={"b1:3181": view(True, 4), "b2:3181": view(False, 0)}),
        BrokerAnswers(B, None, bookies={"b1:3181": view(False, 1)}),
        BrokerAnswers(C, None, errors=("/admin/v2/broker-stats/bookies: HTTP 503",)),
    ]
    bookies = [
        BookieAnswer("b1:3181", "writable", info={"journalWriteBytesPerSecond": 1e6}),
        BookieAnswer("b2:3181", "readonly", info={"readOnly": True}),
        BookieAnswer("b3:3181", "down", error="not registered"),
    ]
    doc = console_view(facts(answers, bookies), topics_max=5)
    b1, b2, b3 = doc["bookies"]
    assert b1["quarantinedBy"] == [A] and b1["pendingRequests"] == {A: 4, B: 1}, "C did not answer: not counted"
    assert b1["info"] == {"journalWriteBytesPerSecond": 1e6} and b1["state"] == "writable"
    assert b2["state"] == "readonly" and b2["quarantinedBy"] == [] and b2["pendingRequests"] == {A: 0, B: 0}
    assert b3 == {
        "bookieId": "b3:3181",
        "state": "down",
        "error": "not registered",
        "info": None,
        "quarantinedBy": [],
        "pendingRequests": {A: 0, B: 0},
    }


def test_a_metadata_failure_is_a_document_with_the_reason_and_nobody_listed() -> None:
    doc = console_view(ClusterFacts("standalone", A, 5, errors=("metadata store: session expired",)), topics_max=5)
    assert doc["errors"] == ["metadata store: session expired"]
    assert doc["brokers"] == [] and doc["bookies"] == [] and doc["topics"] == [] and doc["topicsTotal"] == 0


class OneNamespaceOwned:
    """Owns the whole of ``public/default``; topics of other namespaces are not owned here."""

    def bundle_of_loaded(self, topic: TopicName) -> NamespaceBundle | None:
        if topic.namespace_name != "public/default":
            return None
        return NamespaceBundle("public/default", BundleRange.parse(BUNDLE))

    def owned_bundles(self) -> list[NamespaceBundle]:
        return [NamespaceBundle("public/default", BundleRange.parse(BUNDLE))]


async def test_broker_stats_topics_has_pulsars_nesting_and_streaming_fields() -> None:
    topic = NonPersistentTopic(TopicName.parse("non-persistent://public/default/ticks"))
    consumer = ServerConsumer(3, "c", FakeConnection(), "sub", topic.counters)
    consumer.permits = 10
    await topic.subscribe(consumer, "sub", "Shared")
    for i in range(4):
        topic.publish(batch_payload(first_sequence_id=i), 1)
    elsewhere = NonPersistentTopic(TopicName.parse("non-persistent://other/ns/t"))
    stats = await broker_topics_stats([topic, elsewhere], OneNamespaceOwned())
    assert list(stats) == ["public/default"], "a topic of a bundle not owned here is left out"
    sections = stats["public/default"][BUNDLE]
    assert sections["persistent"] == {}, "always there, as in Pulsar"
    entry = sections["non-persistent"]["non-persistent://public/default/ticks"]
    assert entry["msgInCount"] == 4 and entry["msgOutCount"] == 4 and entry["bytesInCount"] > 0
    assert entry["producerCount"] == 0 and entry["publishers"] == [] and entry["replication"] == {}
    assert {"msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut", "averageMsgSize"} <= entry.keys()
    assert {"storageSize", "backlogSize", "bytesOutCount"} <= entry.keys()
    sub = entry["subscriptions"]["sub"]
    assert sub["type"] == "Shared" and sub["msgBacklog"] == 0 and sub["msgRateExpired"] == 0.0
    assert [c["consumerName"] for c in sub["consumers"]] == ["c"] and sub["consumers"][0]["availablePermits"] == 6


class BookiesSeen:
    def __init__(self, registered: BookieSet, quarantine: BookieQuarantine) -> None:
        self._registered, self._quarantine = registered, quarantine

    async def registered(self) -> BookieSet:
        return self._registered

    def quarantine_remaining_s(self) -> dict[str, float]:
        return self._quarantine.remaining_s()

    def pending_requests(self, bookie: str) -> int:
        return len(bookie)


async def test_broker_stats_bookies_shows_quarantine_with_the_time_left() -> None:
    clock = ManualClock()
    quarantine = BookieQuarantine(
        error_threshold_per_interval=1, quarantine_time_s=600, quarantine_ratio=1.0, clock=clock
    )
    quarantine.record_error("gone:3181", TimeoutError("add timed out"))
    quarantine.record_error("b1:3181", TimeoutError("add timed out"))
    assert quarantine.check() == ["b1:3181", "gone:3181"]
    clock.advance(100)
    seen = BookiesSeen(BookieSet(frozenset({"b1:3181", "b2:3181"}), frozenset({"ro:3181"})), quarantine)
    stats = await bookie_client_stats(seen)
    assert list(stats) == ["b1:3181", "b2:3181", "gone:3181", "ro:3181"], "registered ones and quarantined ones"
    assert stats["b1:3181"] == {"quarantined": True, "quarantineRemainingSeconds": 500.0, "pendingRequests": 7}
    assert stats["b2:3181"]["quarantined"] is False and stats["b2:3181"]["quarantineRemainingSeconds"] is None
    clock.advance(500)
    assert quarantine.remaining_s() == {}, "released at expiry"


async def test_the_snapshot_cache_shares_one_gathering_and_answers_a_young_one_again() -> None:
    clock = ManualClock()
    release = asyncio.Event()
    gatherings = 0

    async def gather() -> dict[str, Any]:
        nonlocal gatherings
        gatherings += 1
        await release.wait()
        return {"n": gatherings}

    cache = SnapshotCache(gather, min_age_s=1.0, clock=clock)
    waiting = [asyncio.ensure_future(cache.get()) for _ in range(5)]
    await asyncio.sleep(0)
    waiting[0].cancel()  # a client that went away does not cancel the others' gathering
    release.set()
    results = await asyncio.gather(*waiting[1:])
    assert results == [{"n": 1}] * 4 and gatherings == 1
    clock.advance(0.5)
    assert await cache.get() == {"n": 1} and gatherings == 1, "younger than min_age_s: answered again"
    clock.advance(0.6)
    assert await cache.get() == {"n": 2} and gatherings == 2
