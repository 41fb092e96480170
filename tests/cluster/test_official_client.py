"""Programs written against Pulsar's own Python client (``pulsar-client==3.13.0``) on a real
cluster of 2 brokers and 3 bookies: the broker's client port speaks Pulsar's binary protocol
beside minipulsar's own (docs/design.md §3.8), and the official client is the referee of our
semantics.

Method: one cluster for the module; each test its own topics and its own ``pulsar.Client``
(closed at the end), with short operation timeouts so a broker that never answers fails the
test instead of hanging it. The official client is synchronous (its C++ core runs its own
threads); these tests call it directly. "Nothing more arrives" is asserted by a receive that
times out after a short wait: the official client has no other way to ask.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections import Counter

import pulsar
import pytest

import minipulsar
import minipulsar.sync
from tests.support.cluster import ProcessCluster
from tests.support.fixtures import cluster_fixture
from tests.support.official_client import (
    CHUNKED_SIZE,
    RECEIVE_MS,
    chunked_round_trip,
    official_topic,
    produce_burst,
    receive_each,
)
from tests.support.web import metrics_text, put_partitions, required_sample, topic_stats

cluster = cluster_fixture(per_module=True, bookies=3, brokers=2)

QUIET_MS = 1_000
"""How long a receive waits to show that nothing (more) is delivered."""
EARLIEST = pulsar.InitialPosition.Earliest
new_topic = official_topic
receive = receive_each
produce = produce_burst


def nothing_more(consumer: pulsar.Consumer) -> bool:
    try:
        consumer.receive(timeout_millis=QUIET_MS)
    except pulsar.Timeout:
        return True
    return False


# -- producers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("batching", [False, True], ids=["unbatched", "batched"])
def test_a_producer_and_an_exclusive_consumer_exchange_messages(official: pulsar.Client, batching: bool) -> None:
    topic = new_topic("exchange")
    consumer = official.subscribe(topic, "sub", initial_position=EARLIEST)
    producer = official.create_producer(topic, batching_enabled=batching)
    for i in range(20):
        producer.send_async(
            f"m-{i}".encode(), None, properties={"i": str(i)}, partition_key=f"k{i % 3}", event_timestamp=1000 + i
        )
    producer.flush()
    received = receive(consumer, 20)
    assert [m.data() for m in received] == [f"m-{i}".encode() for i in range(20)]
    assert [m.properties() for m in received] == [{"i": str(i)} for i in range(20)]
    assert [m.partition_key() for m in received] == [f"k{i % 3}" for i in range(20)]
    assert [m.event_timestamp() for m in received] == [1000 + i for i in range(20)]
    assert all(m.publish_timestamp() > 0 for m in received)
    for message in received:
        consumer.acknowledge(message)
    assert nothing_more(consumer)


@pytest.mark.parametrize(
    "compression",
    [
        pulsar.CompressionType.LZ4,
        pulsar.CompressionType.ZLib,
        pulsar.CompressionType.ZSTD,
        pulsar.CompressionType.SNAPPY,
    ],
    ids=lambda c: str(c).rsplit(".", 1)[-1],
)
def test_each_compression_round_trips(official: pulsar.Client, compression: pulsar.CompressionType) -> None:
    topic = new_topic("compression")
    consumer = official.subscribe(topic, "sub", initial_position=EARLIEST)
    payloads = produce(official, topic, 50, compression_type=compression, batching_max_publish_delay_ms=50)
    assert [m.data() for m in receive(consumer, 50)] == payloads


def test_a_chunked_message_arrives_whole(cluster: ProcessCluster) -> None:
    big, small = chunked_round_trip(cluster.service_url, new_topic("chunked"))
    assert (len(big), big[:4], small) == (CHUNKED_SIZE, bytes(range(4)), b"after the chunks")


def test_a_send_receipt_carries_the_stored_message_id(official: pulsar.Client) -> None:
    topic = new_topic("receipt")
    producer = official.create_producer(topic, batching_enabled=False)
    first, second = producer.send(b"a"), producer.send(b"b")
    consumer = official.subscribe(topic, "sub", initial_position=EARLIEST)
    received = receive(consumer, 2)
    assert [(m.message_id().ledger_id(), m.message_id().entry_id()) for m in received] == [
        (first.ledger_id(), first.entry_id()),
        (second.ledger_id(), second.entry_id()),
    ]
    assert second.entry_id() == first.entry_id() + 1


def test_a_wait_for_exclusive_producer_is_queued_until_the_topic_is_free(official: pulsar.Client) -> None:
    """WaitForExclusive: created only once the exclusive producer ahead of it has gone; while
    it waits, a Shared producer is refused, and the waiting one is not timed out."""
    topic = new_topic("wait-for-exclusive")
    holder = official.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    created: list[pulsar.Producer] = []
    waiting = threading.Thread(
        target=lambda: created.append(
            official.create_producer(topic, access_mode=pulsar.ProducerAccessMode.WaitForExclusive)
        )
    )
    waiting.start()
    waiting.join(QUIET_MS / 1000)
    assert waiting.is_alive() and not created, "WaitForExclusive did not wait"
    with pytest.raises(pulsar.ProducerBusy):
        official.create_producer(topic)
    holder.send(b"from the holder")
    holder.close()
    waiting.join(RECEIVE_MS / 1000)
    assert created, "WaitForExclusive was not created once the topic was free"
    created[0].send(b"from the waiter")
    reader = official.create_reader(topic, pulsar.MessageId.earliest)
    assert [reader.read_next(timeout_millis=RECEIVE_MS).data() for _ in range(2)] == [
        b"from the holder",
        b"from the waiter",
    ]


# -- consumers ----------------------------------------------------------------------------------


def test_a_negative_ack_redelivers_with_a_higher_redelivery_count(official: pulsar.Client) -> None:
    topic = new_topic("nack")
    consumer = official.subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=200
    )
    produce(official, topic, 1, batching_enabled=False)
    first = consumer.receive(timeout_millis=RECEIVE_MS)
    consumer.negative_acknowledge(first)
    again = consumer.receive(timeout_millis=RECEIVE_MS)
    assert again.data() == first.data()
    assert again.redelivery_count() == 1
    consumer.acknowledge(again)
    assert nothing_more(consumer)


def test_an_ack_timeout_redelivers_what_was_not_acked(official: pulsar.Client) -> None:
    topic = new_topic("ack-timeout")
    consumer = official.subscribe(  # 10 s: the shortest ack timeout the official client takes
        topic, "sub", consumer_type=pulsar.ConsumerType.Shared, unacked_messages_timeout_ms=10_000
    )
    produce(official, topic, 3, batching_enabled=False)
    first_round = receive(consumer, 3)
    consumer.acknowledge(first_round[0])
    again = sorted(consumer.receive(timeout_millis=30_000).data() for _ in range(2))
    assert again == sorted(m.data() for m in first_round[1:])


def test_a_cumulative_ack_acknowledges_everything_up_to_it(official: pulsar.Client) -> None:
    topic = new_topic("cumulative")
    consumer = official.subscribe(topic, "sub", initial_position=EARLIEST)
    produce(official, topic, 10, batching_enabled=False)
    received = receive(consumer, 10)
    consumer.acknowledge_cumulative(received[6])
    consumer.close()
    again = official.subscribe(topic, "sub")
    assert [m.data() for m in receive(again, 3)] == [m.data() for m in received[7:]]


def test_acked_messages_are_not_delivered_again_after_a_reconnect(official: pulsar.Client) -> None:
    topic = new_topic("acked")
    consumer = official.subscribe(topic, "sub", initial_position=EARLIEST)
    payloads = produce(official, topic, 30)  # batched: acks cover whole batches
    for message in receive(consumer, 30):
        consumer.acknowledge(message)
    consumer.close()
    again = official.subscribe(topic, "sub")
    more = produce(official, topic, 1)
    assert [m.data() for m in receive(again, 1)] == more
    assert len(payloads) == 30


def test_shared_consumers_split_the_messages_between_them(official: pulsar.Client) -> None:
    topic = new_topic("shared")
    consumers = [
        official.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=10)
        for _ in range(2)
    ]
    payloads = produce(official, topic, 100, batching_enabled=False)
    got: dict[int, list[bytes]] = {0: [], 1: []}
    deadline = time.monotonic() + 20
    while sum(map(len, got.values())) < 100 and time.monotonic() < deadline:
        for i, consumer in enumerate(consumers):
            try:
                message = consumer.receive(timeout_millis=100)
            except pulsar.Timeout:
                continue
            consumer.acknowledge(message)
            got[i].append(message.data())
    assert sorted(got[0] + got[1]) == sorted(payloads)
    assert got[0] and got[1]


def test_failover_delivers_to_one_active_consumer_then_to_the_other(official: pulsar.Client) -> None:
    topic = new_topic("failover")
    first = official.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Failover, consumer_name="a")
    second = official.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b")
    payloads = produce(official, topic, 10, batching_enabled=False)
    assert [m.data() for m in receive(first, 10)] == payloads  # "a" sorts first: the active one
    assert nothing_more(second)
    first.close()
    more = produce(official, topic, 3, batching_enabled=False)
    assert [m.data() for m in receive(second, 3)] == more


def test_key_shared_keeps_each_key_on_one_consumer(official: pulsar.Client) -> None:
    topic = new_topic("key-shared")
    consumers = [
        official.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=f"c{i}")
        for i in range(2)
    ]
    producer = official.create_producer(topic, batching_enabled=False)
    for i in range(60):
        producer.send_async(f"m-{i}".encode(), None, partition_key=f"key-{i % 6}")
    producer.flush()
    owner: dict[str, set[int]] = {}
    count = 0
    deadline = time.monotonic() + 20
    while count < 60 and time.monotonic() < deadline:
        for i, consumer in enumerate(consumers):
            try:
                message = consumer.receive(timeout_millis=100)
            except pulsar.Timeout:
                continue
            consumer.acknowledge(message)
            owner.setdefault(message.partition_key(), set()).add(i)
            count += 1
    assert count == 60
    assert all(len(holders) == 1 for holders in owner.values()), owner
    assert len(owner) == 6


@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
def test_seek_to_a_message_id_and_to_a_time_rewinds_the_subscription(official: pulsar.Client, inclusive: bool) -> None:
    """The broker rewinds the cursor to the message itself, as Pulsar's does; the client skips
    it unless the consumer is ``start_message_id_inclusive`` (Pulsar's default: exclusive). A
    seek by time always includes the first message at or after it."""
    topic = new_topic("seek")
    consumer = official.subscribe(topic, "sub", initial_position=EARLIEST, start_message_id_inclusive=inclusive)
    payloads = produce(official, topic, 10, batching_enabled=False)
    received = receive(consumer, 10)
    for message in received:
        consumer.acknowledge(message)
    consumer.seek(received[4].message_id())
    rewound = payloads[4:] if inclusive else payloads[5:]
    assert [m.data() for m in receive(consumer, len(rewound))] == rewound
    consumer.seek(received[0].publish_timestamp())
    assert receive(consumer, 1)[0].data() == payloads[0]


def test_a_reader_reads_from_the_earliest_and_from_a_message_id(official: pulsar.Client) -> None:
    topic = new_topic("reader")
    payloads = produce(official, topic, 10, batching_enabled=False)
    reader = official.create_reader(topic, pulsar.MessageId.earliest)
    read = [reader.read_next(timeout_millis=RECEIVE_MS) for _ in range(10)]
    assert [m.data() for m in read] == payloads
    assert not reader.has_message_available()
    reader.close()
    after = official.create_reader(topic, read[5].message_id())  # exclusive by default
    assert after.read_next(timeout_millis=RECEIVE_MS).data() == payloads[6]


def test_the_last_message_id_names_the_last_message_of_a_batch(
    official: pulsar.Client, cluster: ProcessCluster
) -> None:
    """GET_LAST_MESSAGE_ID carries the last message's batch index, as Pulsar's broker reads it
    from the last entry, for an official producer's batch and for one of ours (converted);
    a reader's ``has_message_available`` agrees to the last message."""
    topic = new_topic("last-id-batches")
    payloads = produce(official, topic, 10, batching_enabled=True, batching_max_publish_delay_ms=50)
    reader = official.create_reader(topic, pulsar.MessageId.earliest)
    consumer = official.subscribe(topic, "sub")
    read = []
    while reader.has_message_available():
        read.append(reader.read_next(timeout_millis=RECEIVE_MS))
    assert [m.data() for m in read] == payloads
    assert _id_fields(consumer.get_last_message_id()) == _id_fields(read[-1].message_id())
    sent = [f"ours-{i}".encode() for i in range(5)]
    asyncio.run(publish_one_batch(cluster.service_url, topic, sent))
    ours = [reader.read_next(timeout_millis=RECEIVE_MS) for _ in sent]
    assert [m.data() for m in ours] == sent and not reader.has_message_available()
    assert _id_fields(consumer.get_last_message_id()) == _id_fields(ours[-1].message_id())


def test_a_reader_from_the_latest_sees_what_is_published_after_it(official: pulsar.Client) -> None:
    """Nothing is available to a reader started at MessageId.latest until something is
    published after it (the answer's fields: tests/cluster/test_pulsar_protocol_answers.py)."""
    topic = new_topic("reader-latest")
    produce(official, topic, 1)
    reader = official.create_reader(topic, pulsar.MessageId.latest)
    assert not reader.has_message_available()
    produce(official, topic, 1)
    assert reader.has_message_available()
    assert reader.read_next(timeout_millis=RECEIVE_MS).data() == b"m-0"


def _id_fields(message_id: pulsar.MessageId) -> tuple[int, int, int]:
    return message_id.ledger_id(), message_id.entry_id(), message_id.batch_index()


async def publish_one_batch(service_url: str, topic: str, payloads: list[bytes]) -> None:
    async with minipulsar.Client(service_url) as client:
        producer = await client.create_producer(topic, batching_max_publish_delay_ms=50)
        await asyncio.gather(*(producer.send_async(p, lambda error, message_id: None) for p in payloads))
        await producer.close()


def test_unsubscribe_drops_the_subscription(official: pulsar.Client) -> None:
    topic = new_topic("unsubscribe")
    consumer = official.subscribe(topic, "sub")
    produce(official, topic, 3)
    consumer.unsubscribe()
    again = official.subscribe(topic, "sub")  # a new subscription at the end
    assert nothing_more(again)


def test_get_last_message_id_names_the_last_entry(official: pulsar.Client) -> None:
    topic = new_topic("last-id")
    producer = official.create_producer(topic, batching_enabled=False)
    producer.send(b"a")
    last = producer.send(b"b")
    consumer = official.subscribe(topic, "sub", initial_position=EARLIEST)
    found = consumer.get_last_message_id()
    assert (found.ledger_id(), found.entry_id()) == (last.ledger_id(), last.entry_id())


# -- stats and metrics --------------------------------------------------------------------------


def pulsar_connections(cluster: ProcessCluster, name: str) -> float:
    """``name`` (a connection count of protocol ``pulsar``) summed over the brokers."""
    return sum(required_sample(metrics_text(b), name, {"protocol": "pulsar"}) for b in cluster.brokers)


def test_stats_and_metrics_show_the_official_clients_connections(
    official: pulsar.Client, cluster: ProcessCluster
) -> None:
    topic = new_topic("stats")
    producer = official.create_producer(topic, batching_enabled=False)
    consumer = official.subscribe(topic, "sub", initial_position=EARLIEST)
    producer.send(b"x")
    receive(consumer, 1)
    stats = topic_stats(cluster, topic.rsplit("/", 1)[-1])
    [publisher] = stats["publishers"]
    assert publisher["clientVersion"].startswith("Pulsar-"), publisher
    assert publisher["accessMode"] == "Shared"
    [subscriber] = stats["subscriptions"]["sub"]["consumers"]
    assert subscriber["clientVersion"] == publisher["clientVersion"] and subscriber["connectedSince"], subscriber
    assert pulsar_connections(cluster, "pulsar_active_connections") >= 1
    closed_before = pulsar_connections(cluster, "pulsar_connection_closed_total_count")
    other = pulsar.Client(cluster.service_url, operation_timeout_seconds=15)
    other.create_producer(topic)
    other.close()
    deadline = time.monotonic() + 10
    while pulsar_connections(cluster, "pulsar_connection_closed_total_count") <= closed_before:
        assert time.monotonic() < deadline, "a closed official client's connection was never counted closed"
        time.sleep(0.05)


# -- topics -------------------------------------------------------------------------------------


def test_a_partitioned_topic_spreads_messages_over_its_partitions(
    official: pulsar.Client, cluster: ProcessCluster
) -> None:
    topic = new_topic("partitioned")
    put_partitions(cluster, topic.rsplit("/", 1)[-1], 3)
    consumer = official.subscribe(topic, "sub", initial_position=EARLIEST)
    producer = official.create_producer(
        topic, batching_enabled=False, message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution
    )
    for i in range(30):
        producer.send(f"m-{i}".encode())
    received = receive(consumer, 30)
    assert sorted(m.data() for m in received) == sorted(f"m-{i}".encode() for i in range(30))
    partitions = Counter(m.topic_name().rsplit("-partition-", 1)[-1] for m in received)
    assert set(partitions) == {"0", "1", "2"}


def test_a_multi_topic_and_a_regex_consumer_receive_from_every_topic(official: pulsar.Client) -> None:
    stem = new_topic("multi").rsplit("/", 1)[-1]
    topics = [f"persistent://public/default/{stem}-{i}" for i in range(3)]
    for topic in topics:  # the topics exist before the regex consumer lists the namespace
        produce(official, topic, 1)
    multi = official.subscribe(topics, "multi", initial_position=EARLIEST)
    regex = official.subscribe(re.compile(f"persistent://public/default/{stem}-.*"), "regex", initial_position=EARLIEST)
    assert sorted(m.topic_name() for m in receive(multi, 3)) == sorted(topics)
    assert sorted(m.topic_name() for m in receive(regex, 3)) == sorted(topics)


# -- interop with minipulsar's own client ------------------------------------------------------


def _message_fields(message: object) -> tuple[object, ...]:
    m = message  # either client's Message: the same accessors
    return (
        m.data(),  # type: ignore[attr-defined]
        m.partition_key(),  # type: ignore[attr-defined]
        m.properties(),  # type: ignore[attr-defined]
        m.event_timestamp(),  # type: ignore[attr-defined]
        m.message_id().ledger_id(),  # type: ignore[attr-defined]
        m.message_id().entry_id(),  # type: ignore[attr-defined]
        # a batch of one is batch index 0 to the official client and a lone message (-1) to
        # ours, which unpacks it: the same message either way
        max(m.message_id().batch_index(), 0),  # type: ignore[attr-defined]
    )


@pytest.mark.parametrize("batching", [False, True], ids=["unbatched", "batched"])
def test_both_clients_read_what_both_clients_wrote_on_one_topic(
    official: pulsar.Client, cluster: ProcessCluster, batching: bool
) -> None:
    """The official client's messages reach minipulsar's client and the official one, and
    minipulsar's reach both, with payload, key, ordering key, properties, event time and
    message ids that compare."""
    topic = new_topic("interop")
    ours = minipulsar.sync.Client(cluster.service_url)
    try:
        official_reader = official.subscribe(topic, "official", initial_position=EARLIEST)
        our_reader = ours.subscribe(topic, "ours", initial_position=minipulsar.InitialPosition.Earliest)
        official_producer = official.create_producer(topic, batching_enabled=batching, batching_max_publish_delay_ms=50)
        our_producer = ours.create_producer(topic, batching_enabled=batching, batching_max_publish_delay_ms=50)
        sent = []
        for i in range(10):
            producer = official_producer if i % 2 == 0 else our_producer
            producer.send(
                f"m-{i}".encode(),
                properties={"from": "official" if i % 2 == 0 else "ours", "i": str(i)},
                partition_key=f"key-{i}",
                ordering_key=f"order-{i}",
                event_timestamp=10_000 + i,
            )
            sent.append(f"m-{i}".encode())
        by_official = receive(official_reader, 10)
        by_ours = [our_reader.receive(timeout_millis=RECEIVE_MS) for _ in range(10)]
        assert [m.data() for m in by_official] == sent
        assert [_message_fields(m) for m in by_official] == [_message_fields(m) for m in by_ours]
        assert [m.ordering_key() for m in by_official] == [f"order-{i}" for i in range(10)]
        assert [m.properties()["from"] for m in by_ours] == ["official", "ours"] * 5
    finally:
        ours.close()
