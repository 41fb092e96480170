"""The perf rate limiter: permits on an absolute schedule (no drift), bounded catch-up."""

from __future__ import annotations

import pytest

from minipulsar.cli.perf.rate_limiter import RateLimiter
from tests.support.clock import ManualClock


def test_permits_are_evenly_spaced_from_the_start() -> None:
    clock = ManualClock()
    limiter = RateLimiter(1000, clock=clock)
    waits = [limiter.reserve() for _ in range(4)]
    assert waits == pytest.approx([0.0, 0.001, 0.002, 0.003])


def test_late_wake_ups_do_not_drift_the_rate() -> None:
    """Goal: sleep overshoot (timers have ms resolution) is made up, not accumulated.
    Method: a caller that always wakes 0.7 ms late; after 10,000 permits at 10k/s the clock
    is where the schedule says (the last permit's 0.9999 s, plus at most one overshoot), not
    thousands of overshoots later."""
    clock = ManualClock(0.0)
    limiter = RateLimiter(10_000, clock=clock)
    for _ in range(10_000):
        wait_s = limiter.reserve()
        if wait_s > 0:
            clock.advance(wait_s + 0.0007)
    assert 0.9999 - 1e-9 <= clock.now_s <= 0.9999 + 0.0007 + 1e-9


def test_many_permits_are_due_at_once_after_a_late_wake_up() -> None:
    clock = ManualClock(0.0)
    limiter = RateLimiter(10_000, clock=clock)
    limiter.reserve()
    clock.advance(0.001)  # woke up 1 ms later: ten permits were due meanwhile
    assert [limiter.reserve() for _ in range(10)] == [0.0] * 10
    assert limiter.reserve() > 0


def test_a_caller_far_behind_catches_up_by_at_most_the_burst() -> None:
    """Goal: after a long stall (a full producer) the limiter does not release the whole
    backlog at once, only ``burst_s`` worth — as Guava's SmoothBursty (1 s)."""
    clock = ManualClock(0.0)
    limiter = RateLimiter(100, burst_s=1.0, clock=clock)
    limiter.reserve()
    clock.advance(10.0)  # stalled for 10 s: 1000 permits of debt
    immediate = 0
    while limiter.reserve() == 0.0:
        immediate += 1
    assert immediate == 101  # one second's worth stored, plus the permit due now


def test_reserving_several_permits_spaces_the_next_one_accordingly() -> None:
    clock = ManualClock(0.0)
    limiter = RateLimiter(10, clock=clock)
    assert limiter.reserve(5) == 0.0
    assert limiter.reserve() == pytest.approx(0.5)


@pytest.mark.parametrize("rate, burst", [(0, 1.0), (-5, 1.0), (10, -1.0)])
def test_bad_arguments_are_refused(rate: float, burst: float) -> None:
    with pytest.raises(ValueError):
        RateLimiter(rate, burst_s=burst)


def test_take_due_takes_every_permit_already_due_up_to_the_maximum() -> None:
    """Goal: a sender's burst — one clock read for all the permits that are due, none early."""
    clock = ManualClock(0.0)
    limiter = RateLimiter(10_000, clock=clock)
    assert limiter.take_due(64) == (1, 0.0), "the first permit is due at once"
    permits, wait_s = limiter.take_due(64)
    assert permits == 0 and wait_s == pytest.approx(0.0001), "nothing taken before it is due"
    clock.advance(0.0021)  # 21 permits became due (0.1 ms … 2.1 ms)
    assert limiter.take_due(5) == (5, 0.0) and limiter.take_due(64) == (16, 0.0)
    assert limiter.take_due(64)[0] == 0


def test_take_due_catches_up_by_at_most_the_burst() -> None:
    clock = ManualClock(0.0)
    limiter = RateLimiter(100, burst_s=1.0, clock=clock)
    limiter.take_due(1)
    clock.advance(10.0)
    taken = 0
    while (permits := limiter.take_due(64)[0]) > 0:
        taken += permits
    assert 100 <= taken <= 101


def test_take_due_says_when_the_first_permit_of_the_burst_was_due() -> None:
    """Goal: coordinated-omission correction — a sender late by a stall learns when each of the
    messages it sends now should have gone (the first permit's due time, then one interval each)."""
    clock = ManualClock(50.0)
    limiter = RateLimiter(1_000, clock=clock)
    assert limiter.take_due(1) == (1, 0.0) and limiter.last_due_s == 50.0
    clock.advance(0.0205)  # a 20 ms stall: permits due at 50.001 … 50.020
    permits, _ = limiter.take_due(64)
    assert permits == 20
    assert limiter.last_due_s == pytest.approx(50.001) and limiter.interval_s == pytest.approx(0.001)
