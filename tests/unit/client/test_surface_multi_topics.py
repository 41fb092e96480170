"""MultiTopicsConsumer and regex patterns over fake child consumers: merging, bounded
prefetch, routing of acks and seeks by the id's topic, rediscovery."""

from __future__ import annotations

import asyncio
import re

import pytest

from minipulsar.client.exceptions import AlreadyClosed, Timeout
from minipulsar.client.message_id import MessageId
from minipulsar.client.multi_topics_consumer import MultiTopicsConsumer, partition_of, partitioned_topic_of
from minipulsar.client.pattern_consumer import PatternConsumer, TopicsPattern
from tests.support.client_fakes import FakeConsumer, make_message
from tests.support.process import wait_for

BASE = "persistent://public/default/t"
PARTITIONS = [f"{BASE}-partition-{i}" for i in range(3)]


class Children:
    def __init__(self) -> None:
        self.by_topic: dict[str, FakeConsumer] = {}

    async def __call__(self, topic: str, receiver_queue_size: int) -> FakeConsumer:
        self.by_topic[topic] = FakeConsumer(topic, receiver_queue_size)
        return self.by_topic[topic]


async def consumer_over(topics: list[str], **options) -> tuple[MultiTopicsConsumer, Children]:
    children = Children()
    consumer = MultiTopicsConsumer(BASE, "sub", children, **options)
    await consumer.add_topics(topics)
    return consumer, children


def test_partition_names() -> None:
    assert partition_of(f"{BASE}-partition-12") == 12 and partition_of(BASE) == -1
    assert partitioned_topic_of(f"{BASE}-partition-12") == BASE and partitioned_topic_of(BASE) == BASE


async def test_messages_of_every_partition_come_out_labelled_with_topic_and_partition() -> None:
    consumer, children = await consumer_over(PARTITIONS)
    for index, topic in enumerate(PARTITIONS):
        children.by_topic[topic].push(make_message(topic, 10 + index, 0))
    received = [await consumer.receive(timeout_millis=5000) for _ in range(3)]
    by_partition = {m.message_id().partition(): m for m in received}
    assert sorted(by_partition) == [0, 1, 2]
    for index, message in by_partition.items():
        assert message.message_id().topic_name() == PARTITIONS[index]
        assert message.message_id().ledger_id() == 10 + index
    with pytest.raises(Timeout):
        await consumer.receive(timeout_millis=20)
    await consumer.close()


async def test_acks_nacks_and_cumulative_acks_go_to_the_owning_child() -> None:
    consumer, children = await consumer_over(PARTITIONS)
    children.by_topic[PARTITIONS[2]].push(make_message(PARTITIONS[2], 5, 1), make_message(PARTITIONS[2], 5, 2))
    first, second = await consumer.receive(5000), await consumer.receive(5000)
    await consumer.acknowledge(first)
    await consumer.acknowledge_cumulative(second.message_id())
    consumer.negative_acknowledge(first)
    child = children.by_topic[PARTITIONS[2]]
    assert [m.entry_id() for m in child.acked] == [1] and [m.entry_id() for m in child.cumulative] == [2]
    assert [m.entry_id() for m in child.nacked] == [1]
    assert not any(c.acked for t, c in children.by_topic.items() if t != PARTITIONS[2])
    # An id that went through serialize() knows its topic again only when told.
    restored = MessageId.deserialize(first.message_id().serialize(), topic=PARTITIONS[2])
    await consumer.acknowledge(restored)
    assert len(child.acked) == 2
    with pytest.raises(ValueError, match="names no topic"):
        await consumer.acknowledge(MessageId(-1, 5, 1))
    await consumer.close()


async def test_a_slow_application_stops_the_pumps_at_the_shared_queue_size() -> None:
    """Prefetch is bounded: the pumps take from the children only while the shared queue has
    room, so the rest stays in the children's queues (where permits bound it)."""
    consumer, children = await consumer_over([PARTITIONS[0]], receiver_queue_size=5)
    child = children.by_topic[PARTITIONS[0]]
    child.push(*(make_message(PARTITIONS[0], 1, i) for i in range(20)))
    await wait_for(lambda: child.received >= 5, timeout_s=5)
    for _ in range(50):  # give the pump loop iterations to run on (it has no I/O to wait for): it must not
        await asyncio.sleep(0)
    assert child.received <= 6 and len(child.queue) >= 14
    got = [(await consumer.receive(5000)).message_id().entry_id() for _ in range(20)]
    assert got == list(range(20))
    await consumer.close()


async def test_each_child_queue_is_capped_by_the_total_across_partitions() -> None:
    _, children = await consumer_over(
        PARTITIONS, receiver_queue_size=1000, max_total_receiver_queue_size_across_partitions=90
    )
    assert {c.receiver_queue_size for c in children.by_topic.values()} == {30}


async def test_seek_to_an_id_seeks_its_topic_and_drops_what_that_topic_had_queued() -> None:
    consumer, children = await consumer_over(PARTITIONS[:2], receiver_queue_size=10)
    a, b = children.by_topic[PARTITIONS[0]], children.by_topic[PARTITIONS[1]]
    a.push(make_message(PARTITIONS[0], 1, 0), make_message(PARTITIONS[0], 1, 1))
    b.push(make_message(PARTITIONS[1], 2, 0))
    await wait_for(lambda: a.received == 2 and b.received == 1, timeout_s=5)
    first_of_a = MessageId(0, 1, 0, topic=PARTITIONS[0])
    await consumer.seek(first_of_a)
    assert a.seeks == [MessageId(-1, 1, 0)] and b.seeks == []
    assert (await consumer.receive(5000)).topic_name() == PARTITIONS[1], "b's message stays queued"
    await consumer.seek(1_700_000_000_000)
    await consumer.seek(MessageId.earliest)
    assert a.seeks[1:] == b.seeks == [1_700_000_000_000, MessageId.earliest]
    await consumer.close()


async def test_redeliver_unacknowledged_asks_every_child_and_empties_the_shared_queue() -> None:
    consumer, children = await consumer_over(PARTITIONS[:2])
    children.by_topic[PARTITIONS[0]].push(make_message(PARTITIONS[0], 1, 0))
    await wait_for(lambda: children.by_topic[PARTITIONS[0]].received == 1, timeout_s=5)
    pending = consumer.redeliver_unacknowledged_messages()
    await pending  # the fake's method is async, so the multi-topic one is awaitable too
    assert [c.redelivered for c in children.by_topic.values()] == [1, 1]
    with pytest.raises(Timeout):
        await consumer.receive(20)
    await consumer.close()


async def test_close_and_unsubscribe_reach_every_child_and_wake_receivers() -> None:
    consumer, children = await consumer_over(PARTITIONS)
    waiting = asyncio.ensure_future(consumer.receive())
    await asyncio.sleep(0)
    await consumer.unsubscribe()
    assert all(c.unsubscribed for c in children.by_topic.values())
    with pytest.raises(AlreadyClosed):
        await waiting
    with pytest.raises(AlreadyClosed):
        await consumer.receive(10)


@pytest.mark.parametrize(
    "pattern, namespace, matches, misses",
    [
        ("my-.*", "public/default", ["persistent://public/default/my-a"], ["persistent://public/default/other"]),
        (
            "persistent://t1/ns1/a[0-9]",
            "t1/ns1",
            ["persistent://t1/ns1/a7", "persistent://t1/ns1/a7-partition-3"],
            ["persistent://t1/ns1/a77", "persistent://t1/ns2/a7"],
        ),
        (re.compile("t1/ns1/B.*", re.IGNORECASE), "t1/ns1", ["persistent://t1/ns1/bee"], []),
    ],
)
def test_topics_pattern_reads_short_names_and_matches_whole_partitioned_names(
    pattern, namespace, matches, misses
) -> None:
    parsed = TopicsPattern.parse(pattern)
    assert parsed.namespace == namespace and parsed.mode == "PERSISTENT"
    assert parsed.matching(matches + misses) == matches


@pytest.mark.parametrize("pattern", ["", "persistent://t.*/ns/x", "bogus://public/default/x", "a/b/"])
def test_topics_pattern_refuses_a_non_literal_namespace_or_bad_domain(pattern: str) -> None:
    with pytest.raises(ValueError):
        TopicsPattern.parse(pattern)


async def test_rediscovery_subscribes_new_matching_topics_and_drops_vanished_ones() -> None:
    listed = ["persistent://public/default/in-1", "persistent://public/default/out"]
    asked = []

    async def lister(namespace: str, mode: str) -> list[str]:
        asked.append((namespace, mode))
        return list(listed)

    children = Children()
    consumer = PatternConsumer(TopicsPattern.parse("in-.*"), "sub", children, lister, pattern_auto_discovery_period=0)
    await consumer.start()
    assert consumer.topics() == ["persistent://public/default/in-1"]
    listed[:] = ["persistent://public/default/in-2-partition-0", "persistent://public/default/in-2-partition-1"]
    await consumer.rediscover()
    assert sorted(consumer.topics()) == listed
    assert children.by_topic["persistent://public/default/in-1"].closed
    assert asked == [("public/default", "PERSISTENT")] * 2
    await consumer.close()


async def test_batch_receive_takes_what_is_queued_within_the_policy() -> None:
    from minipulsar.client.consumer_config import ConsumerBatchReceivePolicy

    consumer, children = await consumer_over(
        [PARTITIONS[0]], batch_receive_policy=ConsumerBatchReceivePolicy(max_num_message=3, timeout_ms=20)
    )
    assert await consumer.batch_receive() == [], "nothing within the timeout"
    child = children.by_topic[PARTITIONS[0]]
    child.push(*(make_message(PARTITIONS[0], 1, i) for i in range(5)))
    await wait_for(lambda: child.received == 5, timeout_s=5)
    assert [m.message_id().entry_id() for m in await consumer.batch_receive()] == [0, 1, 2]
    assert [m.message_id().entry_id() for m in await consumer.batch_receive()] == [3, 4]
    await consumer.close()


async def test_receivers_get_the_error_once_every_child_has_ended() -> None:
    consumer, children = await consumer_over(PARTITIONS[:2])
    waiting = asyncio.ensure_future(consumer.receive())
    for child in children.by_topic.values():
        await child.close()  # the fake's receive now raises AlreadyClosed: the pumps end
    with pytest.raises(AlreadyClosed):
        await asyncio.wait_for(waiting, 5)
    await consumer.close()
