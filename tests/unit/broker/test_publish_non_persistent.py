"""Goal: a non-persistent topic hands each message to a consumer that can take it now and
drops (and counts) it per subscription otherwise; receipts are immediate with (-1, -1)."""

from __future__ import annotations

from minipulsar.broker.topics.non_persistent_topic import NON_PERSISTENT_POSITION, NonPersistentTopic
from minipulsar.protocol.batch import BatchMessage, encode_batch
from minipulsar.topic_name import TopicName


class FakeConnection:
    writable = True


class FakeConsumer:
    def __init__(self, name: str, permits: int) -> None:
        self.name, self.permits, self.consumer_id = name, permits, 0
        self.connection = FakeConnection()
        self.received: list[bytes] = []
        self.pending_acks: dict = {}
        self.messages_out = self.bytes_out = 0

    def send_entries(self, entries) -> None:
        for entry in entries:
            self.received.append(entry.payload)
            self.pending_acks[entry.position] = entry.num_messages
            self.permits -= entry.num_messages

    @property
    def unacked_messages(self) -> int:
        return sum(self.pending_acks.values())


def payload(i: int, key: str | None = None) -> bytes:
    return encode_batch(0, "p", [BatchMessage(i, str(i).encode(), key)])


async def test_messages_beyond_the_permits_are_dropped_and_counted() -> None:
    topic = NonPersistentTopic(TopicName.parse("non-persistent://public/default/t"))
    consumer = FakeConsumer("c", permits=3)
    subscription = await topic.subscribe(consumer, "sub", "Exclusive", True)
    receipts = [topic.publish(payload(i), 1) for i in range(5)]
    assert all(r.done() and r.result() == NON_PERSISTENT_POSITION for r in receipts)
    assert len(consumer.received) == 3
    assert subscription.msg_drop_counter == 2
    ids = list(consumer.pending_acks)
    assert ids == sorted(ids) and len(set(ids)) == 3, "distinct, increasing message ids"
    subscription.flow(consumer, 1)
    topic.publish(payload(5), 1)
    assert len(consumer.received) == 4
    await subscription.acknowledge(consumer, ids[:2], cumulative=True)
    assert consumer.unacked_messages == 2
    assert topic.stats()["msgInCounter"] == 6


async def test_shared_goes_round_robin_and_the_subscription_ends_with_its_last_consumer() -> None:
    topic = NonPersistentTopic(TopicName.parse("non-persistent://public/default/t"))
    a, b = FakeConsumer("a", 10), FakeConsumer("b", 10)
    subscription = await topic.subscribe(a, "sub", "Shared")
    await topic.subscribe(b, "sub", "Shared")
    for i in range(6):
        topic.publish(payload(i), 1)
    assert len(a.received) == 3 and len(b.received) == 3
    subscription.remove_consumer(a)
    subscription.remove_consumer(b)
    assert "sub" not in topic.subscriptions


async def test_no_subscription_means_nothing_is_kept() -> None:
    topic = NonPersistentTopic(TopicName.parse("non-persistent://public/default/t"))
    assert topic.publish(payload(0), 1).result() == NON_PERSISTENT_POSITION
    internal = topic.internal_stats()
    assert internal["numberOfEntries"] == 0 and internal["ledgers"] == []
