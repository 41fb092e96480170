"""Goal: the stats timer turns counters into rates over the time since its previous round, and a
topic whose rates fail to update (a bug) is logged while the other topics and the entry cache
still get theirs. Method: StatsUpdater rounds driven by hand with a ManualClock."""

from __future__ import annotations

import asyncio
import logging

import pytest

from minipulsar.broker.managed_ledger.entry_cache import EntryCache
from minipulsar.broker.namespace.bundles import BundleRange, NamespaceBundle
from minipulsar.broker.stats_updater import SLICE, StatsUpdater
from minipulsar.broker.topics.base import Topic
from minipulsar.broker.topics.non_persistent_topic import NonPersistentTopic
from minipulsar.broker.topics.registry import TopicMap
from minipulsar.topic_name import TopicName
from tests.support.broker_fakes import batch_payload
from tests.support.clock import ManualClock


class BrokenTopic(NonPersistentTopic):
    def update_rates(self, elapsed_s: float) -> None:
        raise RuntimeError("a bug in one topic's stats")


async def loaded(topics: TopicMap, topic: NonPersistentTopic) -> NonPersistentTopic:
    future: asyncio.Future[Topic] = asyncio.get_running_loop().create_future()
    future.set_result(topic)
    topics.put(topic.name, future)
    return topic


@pytest.mark.expect_error_log(r"updating its rates failed")
async def test_rates_are_over_the_time_since_the_previous_round(caplog: pytest.LogCaptureFixture) -> None:
    clock, topics, cache = ManualClock(), TopicMap(), EntryCache(0)
    await loaded(topics, BrokenTopic(TopicName.parse("non-persistent://t/ns/broken")))
    healthy = await loaded(topics, NonPersistentTopic(TopicName.parse("non-persistent://t/ns/healthy")))
    updater = StatsUpdater(topics, cache, interval_s=60.0, clock=clock)
    updater.start()
    try:
        for _ in range(4):
            healthy.publish(batch_payload(), 1)
        cache.hits += 10
        clock.advance(2.0)
        with caplog.at_level(logging.ERROR, logger="minipulsar.broker.stats_updater"):
            updater.run_once()
    finally:
        await updater.stop()
    assert healthy.rates.get(healthy, "msgIn") == 2.0
    assert cache.hits_rate == 5.0 and cache.misses_rate == 0.0
    assert any("non-persistent://t/ns/broken: updating its rates failed" in r.getMessage() for r in caplog.records)


class Bundles:
    """Every topic in one owned bundle."""

    def bundle_of_loaded(self, topic: TopicName) -> NamespaceBundle | None:
        return BUNDLE

    def owned_bundles(self) -> list[NamespaceBundle]:
        return [BUNDLE]


BUNDLE = NamespaceBundle("t/ns", BundleRange(0, 0xFFFFFFFF))


async def test_a_round_yields_between_slices_and_sums_each_bundle_for_the_load_report() -> None:
    """Goal: a round over many topics lets the event loop run between slices, and leaves the
    per-bundle sums the load reporter reads (no walk of its own)."""
    clock, topics, cache = ManualClock(), TopicMap(), EntryCache(0)
    many = [
        await loaded(topics, NonPersistentTopic(TopicName.parse(f"non-persistent://t/ns/t{i}")))
        for i in range(3 * SLICE)
    ]
    updater = StatsUpdater(topics, cache, interval_s=60.0, clock=clock, bundles=Bundles())
    assert updater.bundle_stats()[BUNDLE.name].topics == len(many), "before the first round: summed on demand"
    for topic in many:
        topic.publish(batch_payload(), 1)
    clock.advance(1.0)
    interleaved = 0

    async def other_work() -> None:
        nonlocal interleaved
        while True:
            interleaved += 1
            await asyncio.sleep(0)

    other = asyncio.ensure_future(other_work())
    await updater._round()
    other.cancel()
    assert interleaved >= 2, "the loop ran between slices"
    sums = updater.bundle_stats()[BUNDLE.name]
    assert sums.topics == len(many) and sums.msg_rate_in == len(many) * 1.0
