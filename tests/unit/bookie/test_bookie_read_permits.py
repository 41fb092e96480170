"""Goal: ``maxReadsInProgressLimit`` permits — at most ``limit`` held, the rest of the reads
wait first come first served and are never refused, a waiter that gave up is skipped, and 0
means unlimited.

Method: a :class:`ReadPermits` driven by hand on the test's loop."""

from __future__ import annotations

import pytest

from minipulsar.bookie.read_permits import ReadPermits


async def test_reads_past_the_limit_wait_in_arrival_order() -> None:
    permits = ReadPermits(2)
    assert permits.acquire() is None and permits.acquire() is None
    first, second = permits.acquire(), permits.acquire()
    assert first is not None and second is not None and permits.held == 2 and permits.waiting == 2
    permits.release()
    assert first.done() and not second.done(), "the oldest waiter gets the permit given back"
    assert permits.held == 2
    late = permits.acquire()
    assert late is not None, "a newcomer waits behind the waiters even with a permit about to free"
    permits.release()
    permits.release()
    assert second.done() and late.done() and permits.held == 2
    for _ in range(2):
        permits.release()
    assert permits.held == 0 and permits.acquire() is None


async def test_a_waiter_that_gave_up_is_skipped() -> None:
    permits = ReadPermits(1)
    assert permits.acquire() is None
    gave_up, waiting = permits.acquire(), permits.acquire()
    assert gave_up is not None and waiting is not None
    gave_up.cancel()
    permits.release()
    assert waiting.done() and not waiting.cancelled() and permits.held == 1
    permits.release()
    assert permits.held == 0 and permits.waiting == 0


async def test_zero_is_unlimited() -> None:
    permits = ReadPermits(0)
    assert all(permits.acquire() is None for _ in range(10_000))
    permits.release()
    assert permits.held == 0 and permits.waiting == 0


def test_a_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="maxReadsInProgressLimit"):
        ReadPermits(-1)
