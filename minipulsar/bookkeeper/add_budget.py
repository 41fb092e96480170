"""Byte budgets for adds in flight: a slow bookie slows the writer instead of growing memory.

A ledger handle takes an add's payload size from its own budget and from the client-wide one
before sending it to the bookies, and gives it back once every replica answered (or the
request failed or timed out). Adds that do not fit wait in the handle, in entry order (Pulsar
issue 14861: with Qa < Qw a slow bookie made brokers run out of memory).

Invariant: ``in_use`` never exceeds ``limit`` — except for one add alone, which is always
admitted into an empty budget, so an entry larger than the limit cannot wedge a ledger.
"""

from __future__ import annotations

from collections.abc import Callable

Waiter = Callable[[], None]


class AddBudget:
    __slots__ = ("_on_change", "_waiters", "in_use", "limit")

    def __init__(self, limit: int, on_change: Callable[[int], None] | None = None) -> None:
        self.limit = limit
        self.in_use = 0
        self._waiters: dict[Waiter, None] = {}
        """Callbacks of holders waiting for room, in the order they started waiting."""
        self._on_change = on_change

    def fits(self, size: int) -> bool:
        return self.in_use == 0 or self.in_use + size <= self.limit

    def take(self, size: int) -> None:
        self.in_use += size
        if self._on_change is not None:
            self._on_change(self.in_use)

    def give_back(self, size: int) -> None:
        self.in_use -= size
        assert self.in_use >= 0, "every byte given back was taken"
        if self._on_change is not None:
            self._on_change(self.in_use)
        if self._waiters:
            waiters, self._waiters = self._waiters, {}
            for waiter in waiters:
                waiter()

    def wait(self, waiter: Waiter) -> None:
        """Call ``waiter`` (once) the next time bytes come back; re-register to wait again."""
        self._waiters[waiter] = None

    def forget(self, waiter: Waiter) -> None:
        self._waiters.pop(waiter, None)
