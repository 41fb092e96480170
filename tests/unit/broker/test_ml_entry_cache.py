"""The broker-wide entry cache (eviction by size, age and cursor position) and the
reads-in-flight limiter."""

from __future__ import annotations

import asyncio

import pytest

from minipulsar.broker.managed_ledger.entry_cache import EntryCache
from minipulsar.broker.managed_ledger.position import Entry, Position
from minipulsar.broker.managed_ledger.reads_limiter import ReadsInFlightLimiter
from tests.support.process import wait_for


def entry(ledger_id: int, entry_id: int, size: int = 100) -> Entry:
    return Entry(Position(ledger_id, entry_id), bytes(size), 1)


def test_size_eviction_goes_down_to_the_watermark_oldest_first() -> None:
    cache = EntryCache(1000, eviction_watermark=0.5)
    topic = cache.for_ledger("a", lambda: None)
    for entry_id in range(10):
        topic.insert(entry(1, entry_id))
    assert cache.size_bytes == 1000 and cache.evictions == 0
    topic.insert(entry(1, 10))
    assert cache.size_bytes <= 500 and len(topic) == 5, "over the budget: freed down to 0.5 × budget"
    assert topic.get(Position(1, 5)) is None and topic.get(Position(1, 10)) is not None
    assert cache.evictions == 6 and cache.inserted == 11 and cache.entries == 5


def test_size_eviction_takes_from_the_largest_caches() -> None:
    cache = EntryCache(1000, eviction_watermark=0.9)
    big, small = cache.for_ledger("big", lambda: None), cache.for_ledger("small", lambda: None)
    for entry_id in range(2):
        small.insert(entry(2, entry_id))
    for entry_id in range(8):
        big.insert(entry(1, entry_id))
    big.insert(entry(1, 8))
    assert cache.size_bytes <= 900
    assert len(small) == 2, "the small cache is not part of the half of the total taken from"


def test_entries_are_only_appended_in_position_order_and_never_bigger_than_the_budget() -> None:
    cache = EntryCache(1000)
    topic = cache.for_ledger("a", lambda: None)
    assert topic.insert(entry(1, 5))
    assert not topic.insert(entry(1, 4)) and not topic.insert(entry(1, 5))
    assert not topic.insert(entry(1, 6, size=1001))
    assert not EntryCache(0).for_ledger("b", lambda: None).insert(entry(1, 0)), "budget 0: no cache"


def test_periodic_eviction_drops_what_every_active_cursor_is_past_and_what_is_too_old() -> None:
    wanted_from: list[Position | None] = [Position(1, 3)]
    cache = EntryCache(1 << 20, eviction_time_threshold_ms=1000)
    topic = cache.for_ledger("a", lambda: wanted_from[0])
    for entry_id in range(6):
        topic.insert(entry(1, entry_id))
    inserted_s = next(iter(topic._entries.values()))[1]
    assert cache.evict(now_s=inserted_s + 0.5) == 3
    assert [p.entry_id for p in topic._entries] == [3, 4, 5]
    wanted_from[0] = None  # no active cursor: only age counts
    assert cache.evict(now_s=inserted_s + 0.5) == 0
    assert cache.evict(now_s=inserted_s + 2.0) == 3 and cache.size_bytes == 0 and cache.entries == 0


async def test_the_periodic_task_evicts_by_age() -> None:
    cache = EntryCache(1 << 20, eviction_interval_ms=5, eviction_time_threshold_ms=20)
    topic = cache.for_ledger("a", lambda: None)
    topic.insert(entry(1, 0))
    cache.start()
    try:
        await wait_for(lambda: len(topic) == 0, timeout_s=5, interval_s=0.005)
    finally:
        await cache.stop()


async def test_reads_that_do_not_fit_wait_in_order_and_never_fail() -> None:
    limiter = ReadsInFlightLimiter(max_bytes=100)
    first = await limiter.acquire(60)
    second = asyncio.ensure_future(limiter.acquire(60))
    third = asyncio.ensure_future(limiter.acquire(10))
    await asyncio.sleep(0)
    assert not second.done() and not third.done(), "FIFO: the small read waits behind the large one"
    limiter.release(first)
    assert await second == 60 and await third == 10
    assert limiter.in_flight_bytes == 70 and limiter.waited == 2
    huge = asyncio.ensure_future(limiter.acquire(10_000))
    await asyncio.sleep(0)
    assert not huge.done()
    limiter.release(60)
    limiter.release(10)
    assert await huge == 100, "larger than the limit: admitted alone, counted as the whole limit"


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    limiter = ReadsInFlightLimiter(max_bytes=10)
    held = await limiter.acquire(10)
    waiting = asyncio.ensure_future(limiter.acquire(5))
    behind = asyncio.ensure_future(limiter.acquire(5))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    limiter.release(held)
    assert await behind == 5 and limiter.in_flight_bytes == 5


async def test_limit_zero_means_off() -> None:
    limiter = ReadsInFlightLimiter(0)
    assert await limiter.acquire(1 << 40) == 0 and limiter.in_flight_bytes == 0
