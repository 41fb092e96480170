"""LedgerTimers: the timed work of every managed ledger of a broker, on one timer and one task.

A managed ledger has two timed duties: the timed half of the rollover check (roll the current
ledger once it reaches its maximum age, or — full but younger than the minimum rollover time —
once it reaches that; the other half runs on each add) and the periodic retention trim (every
``retentionCheckIntervalInSeconds``). Pulsar runs the trim as one broker-wide task walking
every topic (``BrokerService``'s consumed-ledgers monitor); here both duties are broker-wide,
so an idle topic costs no task and no event-loop timer, whatever the number of topics:

- rollover checks: a heap of ``(due, ledger)``, with one ``call_later`` for the earliest. A
  ledger has at most one live entry — the due time it holds in ``roll_due``; an entry whose
  due no longer matches (rescheduled or cancelled) is stale and skipped when popped, and the
  heap is rebuilt from the live entries once stale ones outnumber them;
- retention: one :class:`~minipulsar.supervision.Periodic` walking the attached ledgers, asking
  only those that hold a ledger besides the current one to trim (the last ledger is never
  trimmed, so the others have nothing to do).

Invariants:

- at most one event-loop timer and one task, for any number of ledgers;
- a ledger's check runs no earlier than its due time, and only for the due it last asked for;
- a ledger detached (closed) is never called again.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Callable
from typing import Protocol

from minipulsar.supervision import Periodic, guarded

log = logging.getLogger(__name__)

REBUILD_MIN = 64
"""Stale heap entries tolerated before a rebuild is considered (small heaps are never rebuilt)."""


class TimedLedger(Protocol):
    """What the timers call on a managed ledger."""

    name: str
    roll_due: float | None
    """The monotonic time of the ledger's pending rollover check, or None."""

    def roll_check_due(self) -> None:
        """The timed rollover check (``roll_due`` was cleared before the call)."""
        ...

    def may_trim(self) -> bool:
        """Something could be trimmed (a ledger besides the current one)."""
        ...

    def trim_soon(self) -> None: ...


class LedgerTimers:
    def __init__(self, retention_check_interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._ledgers: dict[int, TimedLedger] = {}
        """id → every attached ledger (insertion ordered: the retention walk's order)."""
        self._heap: list[tuple[float, int, TimedLedger]] = []
        self._live = 0
        """Heap entries that are some ledger's ``roll_due``."""
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0
        self._retention = Periodic(
            "managed ledgers: retention check", retention_check_interval_s, self.check_retention, logger=log
        )

    def __len__(self) -> int:
        return len(self._ledgers)

    @property
    def scheduled_checks(self) -> int:
        """Ledgers with a rollover check pending."""
        return self._live

    @property
    def heap_entries(self) -> int:
        """Entries in the heap, live or stale: at most ``max(REBUILD_MIN, 2 × live) + 1``."""
        return len(self._heap)

    # -- ledgers --------------------------------------------------------------------------------

    def attach(self, ledger: TimedLedger) -> None:
        """``ledger`` is open: include it in the retention walk (starting the walk on first use)."""
        self._ledgers[id(ledger)] = ledger
        if not self._retention.running:
            self._retention.start()

    def detach(self, ledger: TimedLedger) -> None:
        """``ledger`` closed: no more checks for it."""
        self.cancel_roll_check(ledger)
        self._ledgers.pop(id(ledger), None)

    async def close(self) -> None:
        """Stop the retention walk and the timer (the ledgers are closed or closing)."""
        await self._retention.stop()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._heap.clear()
        self._live = 0

    # -- rollover checks ------------------------------------------------------------------------

    def roll_check_at(self, ledger: TimedLedger, due_s: float) -> None:
        """Call ``ledger.roll_check_due()`` at monotonic time ``due_s`` (replacing any pending check)."""
        self.cancel_roll_check(ledger)
        ledger.roll_due = due_s
        self._live += 1
        heapq.heappush(self._heap, (due_s, next(self._seq), ledger))
        if len(self._heap) > REBUILD_MIN and len(self._heap) > 2 * self._live:
            self._rebuild()
        self._arm()

    def cancel_roll_check(self, ledger: TimedLedger) -> None:
        if ledger.roll_due is not None:
            ledger.roll_due = None
            self._live -= 1

    def _rebuild(self) -> None:
        self._heap = [entry for entry in self._heap if entry[2].roll_due == entry[0]]
        heapq.heapify(self._heap)

    def _arm(self) -> None:
        """One timer, for the earliest entry (stale or not: popping it is cheap)."""
        if not self._heap:
            return
        due = self._heap[0][0]
        if self._timer is not None:
            if self._timer_due <= due:
                return
            self._timer.cancel()
        self._timer_due = due
        delay_s = max(0.0, due - self._clock()) + 0.001
        self._timer = asyncio.get_running_loop().call_later(delay_s, self._timer_fired)

    def _timer_fired(self) -> None:
        self._timer = None
        self.run_due()

    def run_due(self) -> None:
        """Run every rollover check due now (the timer calls this), then re-arm the timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        now = self._clock()
        heap = self._heap
        while heap and heap[0][0] <= now:
            due, _, ledger = heapq.heappop(heap)
            if ledger.roll_due != due or id(ledger) not in self._ledgers:
                continue  # stale: rescheduled, cancelled or detached
            ledger.roll_due = None
            self._live -= 1
            guarded(log, f"{ledger.name}: rollover check", ledger.roll_check_due)
        self._arm()

    # -- retention ------------------------------------------------------------------------------

    def check_retention(self) -> None:
        """One retention round: every ledger that may trim trims (in the background)."""
        for ledger in list(self._ledgers.values()):
            if ledger.may_trim():
                ledger.trim_soon()
