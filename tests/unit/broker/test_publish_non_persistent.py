"""Goal: a non-persistent topic hands each message to a consumer that can take it now and
drops (and counts) it per subscription otherwise; receipts are immediate with (-1, -1)."""

from __future__ import annotations

from minipulsar.broker.topics.consumer import ServerConsumer
from minipulsar.broker.topics.non_persistent_topic import NON_PERSISTENT_POSITION, NonPersistentTopic
from minipulsar.protocol.commands import Message
from minipulsar.topic_name import TopicName
from tests.support.broker_fakes import batch_payload, connection_of, make_consumer


def received(consumer: ServerConsumer) -> list[bytes]:
    return [message.payload for message in connection_of(consumer).of(Message)]


async def test_messages_beyond_the_permits_are_dropped_and_counted() -> None:
    topic = NonPersistentTopic(TopicName.parse("non-persistent://public/default/t"))
    consumer = make_consumer(0, "c", permits=3)
    subscription = await topic.subscribe(consumer, "sub", "Exclusive", True)
    receipts = [topic.publish(batch_payload(first_sequence_id=i), 1) for i in range(5)]
    assert all(r.done() and r.result() == NON_PERSISTENT_POSITION for r in receipts)
    assert len(received(consumer)) == 3
    assert subscription.msg_drop_counter == 2
    ids = list(consumer.pending_acks)
    assert ids == sorted(ids) and len(set(ids)) == 3, "distinct, increasing message ids"
    subscription.flow(consumer, 1)
    topic.publish(batch_payload(first_sequence_id=5), 1)
    assert len(received(consumer)) == 4
    await subscription.acknowledge(consumer, ids[:2], cumulative=True)
    assert consumer.unacked_messages == 2
    assert topic.stats()["msgInCounter"] == 6


async def test_shared_goes_round_robin_and_the_subscription_ends_with_its_last_consumer() -> None:
    topic = NonPersistentTopic(TopicName.parse("non-persistent://public/default/t"))
    a, b = make_consumer(1, "a", permits=10), make_consumer(2, "b", permits=10)
    subscription = await topic.subscribe(a, "sub", "Shared")
    await topic.subscribe(b, "sub", "Shared")
    for i in range(6):
        topic.publish(batch_payload(first_sequence_id=i), 1)
    assert len(received(a)) == 3 and len(received(b)) == 3
    subscription.remove_consumer(a)
    subscription.remove_consumer(b)
    assert "sub" not in topic.subscriptions


async def test_no_subscription_means_nothing_is_kept() -> None:
    topic = NonPersistentTopic(TopicName.parse("non-persistent://public/default/t"))
    assert topic.publish(batch_payload(), 1).result() == NON_PERSISTENT_POSITION
    internal = topic.internal_stats()
    assert internal["numberOfEntries"] == 0 and internal["ledgers"] == []
