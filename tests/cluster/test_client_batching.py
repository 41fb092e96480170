"""Producer batching, compression and pending limits against a real cluster.

One cluster serves the whole module (the tests use distinct topics)."""

from __future__ import annotations

import asyncio

import pytest

from minipulsar import (
    BatchingType,
    Client,
    CompressionType,
    ConsumerBatchReceivePolicy,
    InitialPosition,
    MemoryBufferIsFull,
    ProducerQueueIsFull,
)
from tests.support.fixtures import client_fixture, cluster_fixture

pytestmark = pytest.mark.asyncio(loop_scope="module")


def send_async_outcome(producer, data: bytes) -> asyncio.Future:
    """send_async (taken or queued before it returns) with its outcome as a future."""
    future = asyncio.get_running_loop().create_future()
    producer.send_async(
        data, lambda error, message_id: future.set_exception(error) if error else future.set_result(message_id)
    )
    return future


cluster = cluster_fixture(per_module=True)


client = client_fixture(loop_scope="module")


@pytest.mark.parametrize(
    "compression", [CompressionType.NONE, CompressionType.LZ4, CompressionType.ZSTD, CompressionType.ZLib]
)
async def test_batches_round_trip_with_each_compression(client, compression: CompressionType) -> None:
    """Goal: messages sent concurrently travel as few batch entries, compressed or not, and
    arrive in order with their key, properties and event time; ids carry batch indexes.
    Method: 300 concurrent sends of compressible data; consume them all."""
    topic = f"batched-{compression.name.lower()}"
    consumer = await client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest)
    producer = await client.create_producer(topic, compression_type=compression)
    ids = await asyncio.gather(
        *(
            producer.send(
                b"payload %d " % i * 20, partition_key=f"k{i % 3}", properties={"i": str(i)}, event_timestamp=1000 + i
            )
            for i in range(300)
        )
    )
    entries = {(m.ledger_id(), m.entry_id()) for m in ids}
    assert len(entries) < 30, "batched: far fewer entries than messages"
    assert ids == sorted(ids) and all(m.batch_index() >= 0 for m in ids)
    for i in range(300):
        message = await consumer.receive(timeout_millis=10_000)
        assert message.data() == b"payload %d " % i * 20
        assert (message.partition_key(), message.properties(), message.event_timestamp()) == (
            f"k{i % 3}",
            {"i": str(i)},
            1000 + i,
        )
        assert message.message_id() == ids[i]
        await consumer.acknowledge(message)
    assert producer.last_sequence_id() == 299


async def test_key_based_batching_puts_one_key_in_each_entry(client) -> None:
    """Goal: with BatchingType.KeyBased an entry never mixes keys (what Key_Shared needs) and
    each key's messages keep their order. Method: 200 interleaved messages over 4 keys."""
    consumer = await client.subscribe("key-based", "sub", initial_position=InitialPosition.Earliest)
    producer = await client.create_producer("key-based", batching_type=BatchingType.KeyBased)
    await asyncio.gather(*(producer.send(b"%d" % i, partition_key=f"key-{i % 4}") for i in range(200)))
    keys_of_entry: dict[tuple[int, int], set[str]] = {}
    per_key: dict[str, list[int]] = {}
    for _ in range(200):
        message = await consumer.receive(timeout_millis=10_000)
        entry = (message.message_id().ledger_id(), message.message_id().entry_id())
        keys_of_entry.setdefault(entry, set()).add(message.partition_key())
        per_key.setdefault(message.partition_key(), []).append(int(message.data()))
    assert all(len(keys) == 1 for keys in keys_of_entry.values())
    assert len(keys_of_entry) < 50
    assert per_key == {f"key-{k}": list(range(k, 200, 4)) for k in range(4)}


async def test_a_full_producer_fails_sends_when_not_blocking(client) -> None:
    """Goal: block_if_queue_full=False: the send past max_pending_messages fails at once with
    ProducerQueueIsFull and the others are unaffected; once they complete, sends work again.
    Method: max_pending_messages=10 and a 1 s batching delay keep 10 messages pending."""
    producer = await client.create_producer(
        "full-raises", max_pending_messages=10, block_if_queue_full=False, batching_max_publish_delay_ms=1000
    )
    pending = [send_async_outcome(producer, b"%d" % i) for i in range(10)]
    with pytest.raises(ProducerQueueIsFull):
        await producer.send(b"one too many")
    failed = []
    producer.send_async(b"one too many", lambda error, _: failed.append(error))
    await producer.flush()
    assert len(set(await asyncio.gather(*pending))) == 10
    assert len(failed) == 1 and isinstance(failed[0], ProducerQueueIsFull)
    again = send_async_outcome(producer, b"room again")
    await producer.flush()
    assert (await again).entry_id() >= 0


async def test_a_full_producer_blocks_and_takes_waiting_messages_in_order(client) -> None:
    """Goal: block_if_queue_full=True: past max_pending_messages messages wait, in order, and
    never more than the limit are pending. Method: max_pending_messages=10; 100 send_async;
    10 taken and 90 waiting; flush; all stored in order."""
    consumer = await client.subscribe("full-blocks", "sub", initial_position=InitialPosition.Earliest)
    producer = await client.create_producer("full-blocks", max_pending_messages=10, block_if_queue_full=True)
    results = []
    outstanding_max = 0

    def done(error, message_id) -> None:
        nonlocal outstanding_max
        outstanding_max = max(outstanding_max, producer._outstanding)
        results.append(error or message_id)

    for i in range(100):
        producer.send_async(b"%d" % i, done)
    assert (producer._outstanding, len(producer._waiting)) == (10, 90)
    await producer.flush()
    assert len(results) == 100 and results == sorted(results), results[:3]
    assert outstanding_max <= 10
    assert [int((await consumer.receive(timeout_millis=10_000)).data()) for _ in range(100)] == list(range(100))


async def test_the_client_memory_limit_bounds_pending_bytes(cluster) -> None:
    """Goal: memory_limit_bytes bounds the bytes pending over all producers of a client:
    past it a non-blocking send fails with MemoryBufferIsFull, a blocking one waits.
    Method: a 1000-byte limit, 400-byte messages held by a 1 s batching delay."""
    async with Client(cluster.service_url, memory_limit_bytes=1000) as client:
        raising = await client.create_producer(
            "memory-a", block_if_queue_full=False, batching_max_publish_delay_ms=1000
        )
        blocking = await client.create_producer(
            "memory-b", block_if_queue_full=True, batching_max_publish_delay_ms=1000
        )
        first = [send_async_outcome(raising, bytes(400)) for _ in range(2)]
        with pytest.raises(MemoryBufferIsFull):
            await raising.send(bytes(400))
        waiting = send_async_outcome(blocking, bytes(400))
        assert len(blocking._waiting) == 1
        await raising.flush()
        await asyncio.gather(*first)
        await blocking.flush()
        assert (await waiting).entry_id() >= 0


async def test_batch_receive_returns_what_the_policy_allows(client) -> None:
    """Goal: batch_receive returns up to max_num_message messages at once, and after its
    timeout whatever is there (here: nothing). Method: 25 messages, policy of 10 messages."""
    consumer = await client.subscribe(
        "batch-receive",
        "sub",
        initial_position=InitialPosition.Earliest,
        batch_receive_policy=ConsumerBatchReceivePolicy(10, -1, 200),
    )
    producer = await client.create_producer("batch-receive")
    await asyncio.gather(*(producer.send(b"%d" % i) for i in range(25)))
    got = []
    for expected in (10, 10, 5):
        batch = await consumer.batch_receive()
        assert len(batch) == expected
        got += [int(m.data()) for m in batch]
        for message in batch:
            await consumer.acknowledge(message)
    assert got == list(range(25))
    assert await consumer.batch_receive() == []


async def test_awaiting_send_async_waits_for_room_in_a_full_producer(client) -> None:
    """Goal: with block_if_queue_full, ``await send_async(...)`` returns once the producer took
    the message — at once while there is room, after earlier messages completed when full —
    so an asyncio sender is held back instead of queueing without bound. Method:
    max_pending_messages=5; 20 sends awaited one after the other, then flush."""
    producer = await client.create_producer("send-async-waits", max_pending_messages=5, block_if_queue_full=True)
    results = []
    for i in range(20):
        await producer.send_async(b"%d" % i, lambda error, message_id: results.append(error or message_id))
        assert producer._outstanding <= 5 and not producer._waiting
    await producer.flush()
    assert len(results) == 20 and results == sorted(results)
