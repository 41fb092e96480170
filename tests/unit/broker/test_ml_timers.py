"""Goal: every managed ledger's timed work runs on one shared timer and one task — a rollover
check runs once its due time passed, only for the due its ledger last asked for, never for a
closed ledger; stale heap entries stay bounded; the retention walk asks only ledgers that may
trim. Method: LedgerTimers driven by hand with a ManualClock and fake ledgers."""

from __future__ import annotations

from minipulsar.broker.managed_ledger.timers import REBUILD_MIN, LedgerTimers
from tests.support.clock import ManualClock


class TimedFake:
    def __init__(self, name: str, trimmable: bool = False) -> None:
        self.name = name
        self.roll_due: float | None = None
        self.trimmable = trimmable
        self.checks = 0
        self.trims = 0

    def roll_check_due(self) -> None:
        self.checks += 1

    def may_trim(self) -> bool:
        return self.trimmable

    def trim_soon(self) -> None:
        self.trims += 1


async def test_a_check_runs_once_due_and_only_for_the_latest_due() -> None:
    clock = ManualClock()
    timers = LedgerTimers(120.0, clock=clock)
    early, late, moved = TimedFake("early"), TimedFake("late"), TimedFake("moved")
    for ledger in (early, late, moved):
        timers.attach(ledger)
    timers.roll_check_at(early, clock() + 10)
    timers.roll_check_at(late, clock() + 20)
    timers.roll_check_at(moved, clock() + 5)
    timers.roll_check_at(moved, clock() + 30)  # rescheduled: the first due is stale
    clock.advance(9)
    timers.run_due()
    assert (early.checks, late.checks, moved.checks) == (0, 0, 0), "nothing is due yet"
    clock.advance(11)
    timers.run_due()
    assert (early.checks, late.checks, moved.checks) == (1, 1, 0)
    assert early.roll_due is None and timers.scheduled_checks == 1
    clock.advance(10)
    timers.run_due()
    assert moved.checks == 1, "the latest due ran, once"
    timers.run_due()
    assert moved.checks == 1 and timers.scheduled_checks == 0
    await timers.close()


async def test_cancelled_and_detached_ledgers_are_not_checked() -> None:
    clock = ManualClock()
    timers = LedgerTimers(120.0, clock=clock)
    cancelled, closed = TimedFake("cancelled"), TimedFake("closed")
    for ledger in (cancelled, closed):
        timers.attach(ledger)
        timers.roll_check_at(ledger, clock() + 1)
    timers.cancel_roll_check(cancelled)
    timers.detach(closed)
    clock.advance(2)
    timers.run_due()
    assert (cancelled.checks, closed.checks) == (0, 0)
    assert len(timers) == 1 and timers.scheduled_checks == 0
    await timers.close()


async def test_stale_entries_stay_bounded_when_ledgers_reschedule_often() -> None:
    clock = ManualClock()
    timers = LedgerTimers(120.0, clock=clock)
    ledgers = [TimedFake(f"l{i}") for i in range(10)]
    for ledger in ledgers:
        timers.attach(ledger)
    for round_ in range(1000):  # each ledger rolls often, long before its maximum age
        for ledger in ledgers:
            timers.roll_check_at(ledger, clock() + 3600 + round_)
    assert timers.scheduled_checks == len(ledgers)
    assert timers.heap_entries <= max(REBUILD_MIN, 2 * len(ledgers)) + 1
    await timers.close()


async def test_the_retention_walk_asks_only_ledgers_that_may_trim() -> None:
    timers = LedgerTimers(120.0, clock=ManualClock())
    single, several = TimedFake("one ledger"), TimedFake("closed ledgers too", trimmable=True)
    timers.attach(single)
    timers.attach(several)
    timers.check_retention()
    assert (single.trims, several.trims) == (0, 1)
    timers.detach(several)
    timers.check_retention()
    assert several.trims == 1, "a closed ledger is not walked"
    await timers.close()
