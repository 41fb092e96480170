"""Dispatch rules as pure logic: permits → entries, the replay set, the Key_Shared ring and key,
and each dispatcher driven over an in-memory cursor (no sockets, no bookies)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from minipulsar.broker.managed_ledger.position import Entry, Position
from minipulsar.broker.topics.dispatch_settings import DispatchSettings
from minipulsar.broker.topics.dispatcher import entries_for_permits, entries_within_permits
from minipulsar.broker.topics.key_shared import NONE_KEY, ConsistentHashRing, key_hash, sticky_key
from minipulsar.broker.topics.persistent_subscription import PersistentSubscription
from minipulsar.broker.topics.redelivery import RedeliveryTracker
from minipulsar.broker.topics.replay import ReplayQueue
from minipulsar.errors import ConsumerBusyError, InvalidCommandError
from minipulsar.protocol.batch import BatchMessage, encode_batch
from minipulsar.protocol.commands import ActiveConsumerChange, Message
from tests.support.broker_fakes import FakeCursor, FakeLedger, L, batch_payload, connection_of, make_consumer
from tests.support.broker_fakes import sent_to as sent

SEED = 1717


async def settled(subscription: PersistentSubscription) -> None:
    """Yield until the read loop is idle (waiting for entries) or finished."""
    dispatcher = subscription.dispatcher
    for _ in range(1000):
        await asyncio.sleep(0)
        task = dispatcher._loop_task
        if task is None or task.done() or (dispatcher._idle is not None and not dispatcher._idle.done()):
            return
    raise AssertionError("the dispatcher never settled")


def subscription(sub_type: str, ledger: FakeLedger, **settings: Any) -> PersistentSubscription:
    return PersistentSubscription(FakeCursor(ledger), sub_type, DispatchSettings(**settings))


# -- permits → entries ------------------------------------------------------------------------


def test_without_precise_flow_control_permits_are_compared_with_entries() -> None:
    assert entries_for_permits(100, 100.0, precise=False, max_entries=100) == 100
    assert entries_for_permits(30, None, precise=False, max_entries=100) == 30
    assert entries_for_permits(0, 1.0, precise=False, max_entries=100) == 0


def test_precise_flow_control_divides_permits_by_the_average_batch() -> None:
    assert entries_for_permits(100, None, precise=True, max_entries=100) == 1  # learn the batch size first
    assert entries_for_permits(100, 100.0, precise=True, max_entries=100) == 1
    assert entries_for_permits(150, 100.0, precise=True, max_entries=100) == 2
    assert entries_for_permits(1000, 1.0, precise=True, max_entries=100) == 100


def test_entries_within_permits_stops_before_the_permits_are_exceeded_by_more_than_one_entry() -> None:
    entries = [Entry(Position(L, i), b"", 100) for i in range(5)]
    assert entries_within_permits(150, entries, precise=True, max_entries=20) == 2
    assert entries_within_permits(150, entries, precise=False, max_entries=20) == 5
    assert entries_within_permits(150, entries, precise=False, max_entries=3) == 3
    assert entries_within_permits(0, entries, precise=True, max_entries=3) == 0


# -- replay set, redelivery counts ------------------------------------------------------------


def test_replay_queue_gives_the_lowest_positions_first_and_counts_hashes() -> None:
    replay = ReplayQueue()
    for entry_id, key_hash_value in ((5, 1), (2, 1), (9, 2), (2, 1)):
        replay.add(Position(L, entry_id), key_hash_value)
    assert len(replay) == 3 and replay.hash_counts == {1: 2, 2: 1}
    replay.discard(Position(L, 5))
    assert [p for p, _ in replay.pop_first(5)] == [Position(L, 2), Position(L, 9)]
    assert not replay and replay.hash_counts == {}


def test_redelivery_tracker_counts_until_acknowledged() -> None:
    tracker = RedeliveryTracker()
    tracker.increment([Position(L, 1), Position(L, 2)])
    tracker.increment([Position(L, 1)])
    assert tracker.count(Position(L, 1)) == 2 and tracker.count(Position(L, 2)) == 1
    tracker.remove_up_to(Position(L, 1))
    assert tracker.count(Position(L, 1)) == 0 and tracker.count(Position(L, 2)) == 1
    disabled = RedeliveryTracker(enabled=False)
    disabled.increment([Position(L, 1)])
    assert disabled.count(Position(L, 1)) == 0


# -- Key_Shared key and ring ------------------------------------------------------------------


def test_key_hash_is_murmur3_32_with_the_sign_bit_cleared() -> None:
    assert key_hash(b"hello") == 0x248BFA47
    assert key_hash(b"The quick brown fox jumps over the lazy dog") == 0x2E4FF723


def test_sticky_key_is_the_first_messages_key_or_none_key() -> None:
    mixed = encode_batch(1, "p", [BatchMessage(0, b"a", "k1"), BatchMessage(1, b"b", "k2")])
    assert sticky_key(mixed) == b"k1"
    assert sticky_key(batch_payload(3)) == NONE_KEY
    assert sticky_key(b"\x00not a batch") == NONE_KEY


def test_sticky_key_of_any_bytes_is_a_key_or_none_key_and_never_an_error() -> None:
    rng = random.Random(SEED)
    whole = encode_batch(1, "p", [BatchMessage(0, b"a", "k1")])
    cut = [whole[:n] for n in range(len(whole))]
    noise = [bytes(rng.randrange(256) for _ in range(rng.randrange(40))) for _ in range(2000)]
    flipped = [
        bytes(b ^ (rng.randrange(1, 256) if i == rng.randrange(len(whole)) else 0) for i, b in enumerate(whole))
        for _ in range(2000)
    ]
    for payload in (*cut, *noise, *flipped):
        assert isinstance(sticky_key(payload), bytes), f"seed {SEED}: {payload!r}"


def test_ring_keeps_keys_of_staying_consumers_when_one_leaves() -> None:
    ring = ConsistentHashRing(100)
    consumers = [make_consumer(i) for i in range(3)]
    for consumer in consumers:
        ring.add(consumer)
    hashes = [key_hash(f"key-{i}".encode()) for i in range(3000)]
    before = [ring.select(h) for h in hashes]
    shares = [before.count(c) / len(hashes) for c in consumers]
    assert all(0.2 < share < 0.47 for share in shares), shares
    ring.remove(consumers[1])
    after = [ring.select(h) for h in hashes]
    assert all(a is b for a, b in zip(before, after) if a is not consumers[1])
    assert consumers[1] not in after


# -- dispatchers ------------------------------------------------------------------------------


async def test_exclusive_refuses_a_second_consumer_and_sends_everything_to_the_first() -> None:
    ledger = FakeLedger()
    for _ in range(3):
        ledger.add()
    sub = subscription("Exclusive", ledger)
    first = make_consumer(1)
    sub.add_consumer(first, "Exclusive")
    with pytest.raises(ConsumerBusyError):
        sub.add_consumer(make_consumer(2), "Exclusive")
    sub.flow(first, 10)
    await settled(sub)
    assert sent(first) == [Position(L, i) for i in range(3)]
    assert sub.cursor.active


async def test_failover_activates_by_priority_then_name_and_rewinds_after_the_delay() -> None:
    ledger = FakeLedger()
    for _ in range(4):
        ledger.add()
    sub = subscription("Failover", ledger, failover_delay_ms=50)
    b, a_low = make_consumer(1, "b"), make_consumer(2, "a", priority_level=1)
    sub.add_consumer(b, "Failover")
    sub.add_consumer(a_low, "Failover")  # a lower priority: b stays active although "a" < "b"
    for consumer in (b, a_low):
        sub.flow(consumer, 10)
    await settled(sub)
    assert len(sent(b)) == 4 and sent(a_low) == []
    assert [c.is_active for c in connection_of(a_low).sent if isinstance(c, ActiveConsumerChange)] == [False]

    switch = asyncio.get_running_loop().create_future()
    sub.remove_consumer(b)  # a takes over, after the delay, with b's unacknowledged entries
    assert sub.dispatcher.switching
    asyncio.get_running_loop().call_later(0.2, switch.set_result, None)
    await switch
    await settled(sub)
    assert sent(a_low) == [Position(L, i) for i in range(4)]
    assert [m.redelivery_count for m in connection_of(a_low).sent if isinstance(m, Message)] == [1, 1, 1, 1]


async def test_shared_round_robin_respects_permits_and_the_round_robin_batch() -> None:
    ledger = FakeLedger()
    for _ in range(10):
        ledger.add()
    sub = subscription("Shared", ledger, max_round_robin_batch_size=2)
    one, two = make_consumer(1), make_consumer(2)
    sub.add_consumer(one, "Shared")
    sub.add_consumer(two, "Shared")
    sub.flow(one, 3)
    sub.flow(two, 100)
    await settled(sub)
    assert len(sent(one)) == 3 and len(sent(two)) == 7
    assert sorted(sent(one) + sent(two)) == [Position(L, i) for i in range(10)]
    assert sent(one)[:2] == [Position(L, 0), Position(L, 1)]  # turns of two entries
    with pytest.raises(InvalidCommandError):
        await sub.acknowledge(one, [Position(L, 0)], cumulative=True)


async def test_shared_blocks_a_consumer_at_max_unacked_and_resumes_at_half() -> None:
    ledger = FakeLedger()
    for _ in range(20):
        ledger.add()
    sub = subscription("Shared", ledger, max_unacked_per_consumer=4)
    consumer = make_consumer(1)
    sub.add_consumer(consumer, "Shared")
    sub.flow(consumer, 100)
    await settled(sub)
    assert len(sent(consumer)) == 4 and consumer.blocked_on_unacked
    await sub.acknowledge(consumer, sent(consumer)[:1], cumulative=False)
    await settled(sub)
    assert len(sent(consumer)) == 4  # 3 unacked > 4 / 2
    await sub.acknowledge(consumer, sent(consumer)[1:2], cumulative=False)
    await settled(sub)
    assert len(sent(consumer)) == 6 and consumer.blocked_on_unacked


async def test_shared_redelivers_negatively_acknowledged_entries_first_with_a_count() -> None:
    ledger = FakeLedger()
    for _ in range(3):
        ledger.add()
    sub = subscription("Shared", ledger)
    consumer = make_consumer(1)
    sub.add_consumer(consumer, "Shared")
    sub.flow(consumer, 3)
    await settled(sub)
    sub.redeliver_unacknowledged(consumer, [Position(L, 1)])
    sub.flow(consumer, 1)
    await settled(sub)
    last = [c for c in connection_of(consumer).sent if isinstance(c, Message)][-1]
    assert (last.entry_id, last.redelivery_count) == (1, 1)
    assert sub.msg_redeliver_counter == 1


async def test_key_shared_sends_a_key_to_one_consumer_and_holds_a_newcomer_until_older_entries_are_acked() -> None:
    ledger = FakeLedger()
    keys = [f"k{i % 8}" for i in range(40)]
    for key in keys[:20]:
        ledger.add(key=key)
    sub = subscription("Key_Shared", ledger)
    first = make_consumer(1)
    sub.add_consumer(first, "Key_Shared")
    sub.flow(first, 1000)
    await settled(sub)
    assert len(sent(first)) == 20

    second = make_consumer(2)
    sub.add_consumer(second, "Key_Shared")
    sub.flow(second, 1000)
    for key in keys[20:]:
        ledger.add(key=key)
    await settled(sub)
    owner = {k: sub.dispatcher.ring.select(key_hash(k.encode())) for k in set(keys)}
    moved = {k for k, c in owner.items() if c is second}
    assert moved, "no key moved to the new consumer (change the names)"
    assert sent(second) == []  # recently joined: nothing until entries 0..19 are acknowledged
    await sub.acknowledge(first, sent(first), cumulative=False)
    await settled(sub)
    got = {keys[p.entry_id] for p in sent(second)}
    assert got == moved
    assert sorted(sent(first) + sent(second)) == [Position(L, i) for i in range(40)]
    for consumer in (first, second):
        assert sent(consumer) == sorted(sent(consumer))


async def test_precise_flow_control_keeps_a_single_consumer_within_one_entry_of_its_permits() -> None:
    for precise, expected in ((True, 100), (False, 1000)):
        ledger = FakeLedger()
        for _ in range(10):
            ledger.add(count=100)
        sub = subscription("Exclusive", ledger, precise_flow_control=precise)
        consumer = make_consumer(1)
        sub.add_consumer(consumer, "Exclusive")
        sub.flow(consumer, 100)
        await settled(sub)
        assert consumer.messages_out == expected


async def test_seek_drops_pending_entries_and_dispatches_from_the_new_position() -> None:
    ledger = FakeLedger()
    for _ in range(5):
        ledger.add()
    sub = subscription("Exclusive", ledger)
    consumer = make_consumer(1)
    sub.add_consumer(consumer, "Exclusive")
    sub.flow(consumer, 100)
    await settled(sub)
    await sub.seek(Position(L, 3))
    assert consumer.pending_acks == {}
    sub.resume()
    await settled(sub)
    assert sent(consumer)[5:] == [Position(L, 3), Position(L, 4)]
