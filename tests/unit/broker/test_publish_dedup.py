"""Goal: deduplication answers a resend of a stored message without a write, waits for an
in-flight original, lets a resend through after a failed add, and rebuilds its state after a
restart from the snapshot plus the entries written after it (Pulsar §5.7)."""

from __future__ import annotations

import asyncio
import json

import pytest

from minipulsar.broker.dedup import DEDUP_CURSOR, DUPLICATE, MessageDeduplication
from minipulsar.broker.managed_ledger.cursor import ManagedCursor
from minipulsar.broker.managed_ledger.position import Position
from minipulsar.broker.managed_ledger.position_info import CursorPosition, decode_position_info
from minipulsar.broker.topics.dispatch_settings import DispatchSettings
from minipulsar.broker.topics.persistent_topic import PersistentTopic
from minipulsar.errors import InvalidCommandError, PersistenceError
from minipulsar.metadata import MemoryMetadataStore
from minipulsar.topic_name import TopicName
from tests.support.broker_fakes import FakeLedger, closed_ledger, make_consumer
from tests.support.process import wait_for


def last_snapshot(ledger: FakeLedger) -> CursorPosition | None:
    """The newest position of the ``pulsar.dedup`` cursor's ledger (the snapshot), if any."""
    cursor = next(c for c in ledger.cursors if c.name == DEDUP_CURSOR)
    ledger_id = cursor.persistence.ledger_id
    if ledger_id < 0:
        return None
    return decode_position_info(ledger.bookkeeper.last_entry(ledger_id))


def dedup(store: MemoryMetadataStore, interval: int = 1000, max_producers: int = 100) -> MessageDeduplication:
    return MessageDeduplication("public/default/persistent/t", store, interval, max_producers)


async def test_a_stored_message_is_a_duplicate_and_an_in_flight_one_waits_for_its_original() -> None:
    store, ledger = MemoryMetadataStore(), FakeLedger()
    state = dedup(store)
    await state.recover(ledger)
    loop = asyncio.get_running_loop()
    assert state.check("p", 0, -1) is None
    first = loop.create_future()
    state.track("p", 0, -1, first)
    waiting = state.check("p", 0, -1)
    assert waiting is not None and not waiting.done(), "in flight: wait for the original"
    first.set_result(ledger.add_batch("p", [0]))
    assert await waiting == Position(7, 0), "answered with the original's position"
    assert await state.check("p", 0, -1) == DUPLICATE
    assert state.check("p", 1, -1) is None
    assert state.check("q", 0, -1) is None, "sequence ids are per producer name"
    await store.close()


async def test_a_failed_add_lets_the_resend_through() -> None:
    store, ledger = MemoryMetadataStore(), FakeLedger()
    state = dedup(store)
    await state.recover(ledger)
    failed = asyncio.get_running_loop().create_future()
    state.track("p", 0, 4, failed)  # a batch 0..4
    waiting = state.check("p", 3, -1)
    failed.set_exception(PersistenceError("bookies gone"))
    await asyncio.sleep(0)  # let the callbacks run
    assert waiting.exception() is not None, "the in-flight duplicate shares the original's error"
    assert state.check("p", 0, 4) is None, "pushed went back to persisted"
    await store.close()


async def test_state_survives_a_restart_from_snapshot_and_replay() -> None:
    store, ledger = MemoryMetadataStore(), FakeLedger()
    state = dedup(store, interval=2)
    await state.recover(ledger)
    loop = asyncio.get_running_loop()
    for sequence_id in range(5):
        added = loop.create_future()
        state.track("p", sequence_id, -1, added)
        added.set_result(ledger.add_batch("p", [sequence_id]))
        await asyncio.sleep(0)

    def snapshot_taken() -> bool:
        snapshot = last_snapshot(ledger)
        if snapshot is None or snapshot.mark_delete.entry_id < 3:
            return False
        assert snapshot.properties == {"p": snapshot.mark_delete.entry_id}, "valid as of its position"
        return True

    await wait_for(snapshot_taken, timeout_s=5, message="no snapshot after 2 × brokerDeduplicationEntriesInterval")
    assert await store.get(state.path) is None, "the snapshot is the pulsar.dedup cursor's, on the bookies"
    ledger.add_batch("q", [10, 11, 12])  # written, then the broker crashed before any snapshot
    restarted = dedup(store, interval=2)
    await restarted.recover(ledger)
    assert restarted.persisted == {"p": 4, "q": 12}
    assert restarted.last_sequence_id("p") == 4
    assert await restarted.check("p", 4, -1) == DUPLICATE
    assert await restarted.check("q", 11, -1) == DUPLICATE
    assert restarted.check("q", 13, -1) is None
    await store.close()


async def test_the_producer_map_is_bounded() -> None:
    store, ledger = MemoryMetadataStore(), FakeLedger()
    state = dedup(store, max_producers=2)
    await state.recover(ledger)
    loop = asyncio.get_running_loop()
    for name in ("a", "b", "c"):
        added = loop.create_future()
        state.track(name, 0, -1, added)
        added.set_result(ledger.add_batch(name, [0]))
    await asyncio.sleep(0)
    assert list(state.pushed) == ["b", "c"], "the least recently used name is forgotten"
    await store.close()


async def test_an_older_broker_s_snapshot_is_read_once_then_kept_by_the_cursor() -> None:
    store, ledger = MemoryMetadataStore(), FakeLedger()
    for sequence_id in range(3):
        ledger.add_batch("p", [sequence_id])
    legacy = json.dumps({"ledgerId": 7, "entryId": 1, "producers": {"p": 1, "old": 9}}).encode()
    await store.put("/deduplication/public/default/persistent/t", legacy)
    state = dedup(store)
    await state.recover(ledger)
    assert state.persisted == {"p": 2, "old": 9}, "the snapshot, then the entry after it replayed"
    assert await store.get(state.path) is None, "read once"
    snapshot = last_snapshot(ledger)
    assert snapshot is not None and snapshot.mark_delete == Position(7, 2) and snapshot.properties == {"p": 2, "old": 9}
    ledger.cursors.clear()  # a broker restart
    restarted = dedup(store)
    await restarted.recover(ledger)
    assert restarted.persisted == {"p": 2, "old": 9}
    await store.close()


async def test_disabling_deduplication_deletes_its_cursor_and_cursor_ledger() -> None:
    store, ledger = MemoryMetadataStore(), FakeLedger()
    state = dedup(store)
    await state.recover(ledger)
    await state.take_snapshot()  # the first persisted change creates the cursor ledger
    key = f"{ledger.path}/{DEDUP_CURSOR}"
    assert await store.get(key) is not None and ledger.bookkeeper.ledgers
    ledger.cursors.clear()  # the broker restarted with brokerDeduplicationEnabled=false
    await MessageDeduplication.forget(ledger, store)
    assert await store.get(key) is None and not ledger.bookkeeper.ledgers
    await store.close()


async def test_the_dedup_cursor_is_no_subscription_and_its_name_is_refused() -> None:
    store = MemoryMetadataStore()
    ledger = closed_ledger(3, store=store)
    await ManagedCursor.open(ledger, DEDUP_CURSOR, store, start_at_earliest=False)
    await ManagedCursor.open(ledger, "sub", store, start_at_earliest=True)
    topic = await PersistentTopic.load(TopicName.parse("persistent://t/ns/x"), ledger, store, DispatchSettings())
    assert list(topic.subscriptions) == ["sub"]
    with pytest.raises(InvalidCommandError):
        await topic.subscribe(make_consumer(1), DEDUP_CURSOR, "Exclusive", True)
    await store.close()
