"""A LAB FAULT, off by default: a bookie that answers adds with TooManyRequests once loaded
(``minipulsarAddErrorAboveAddsPerSecond``; minipulsar's own key, no BookKeeper equivalent).

BIGO's overloaded bookie kept failing requests while it was hot, which is what the bookie
client's quarantine reacts to (bookkeeper/quarantine.py). This fault reproduces that on a
machine whose bookies are never really overloaded: the bookie admits at most ``limit`` adds a
second (a token bucket holding at most one second's worth) and refuses the excess at once
with TooManyRequests, the answer an overloaded BookKeeper bookie gives (a rejected write).
The broker's ledger then replaces the bookie in that ledger (an ensemble change) and counts
the errors toward quarantine, as BookKeeper's client does.

Invariants:

- over any interval of ``t`` seconds at most ``limit · (t + 1)`` adds are admitted;
- a refused add takes no token (a bookie under an error storm still admits ``limit`` a second);
- time comes from the injected ``clock``: the bucket is pure logic (unit-tested with a fake clock).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class AddRateFault:
    def __init__(self, limit_per_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if limit_per_s <= 0:
            raise ValueError(
                f"minipulsarAddErrorAboveAddsPerSecond must be > 0 to install the fault, got {limit_per_s}"
            )
        self.limit_per_s = limit_per_s
        self._clock = clock
        self._tokens = limit_per_s
        self._at_s = clock()
        self.refused = 0
        """Adds refused since start."""

    def admit(self, count: int) -> int:
        """How many of ``count`` adds arriving now are admitted (the first ones); the rest are refused."""
        now_s = self._clock()
        self._tokens = min(self.limit_per_s, self._tokens + (now_s - self._at_s) * self.limit_per_s)
        self._at_s = now_s
        admitted = min(count, int(self._tokens))
        self._tokens -= admitted
        self.refused += count - admitted
        return admitted


def from_setting(limit_per_s: float) -> AddRateFault | None:
    """The fault for ``minipulsarAddErrorAboveAddsPerSecond`` (0, the default: none)."""
    return AddRateFault(limit_per_s) if limit_per_s > 0 else None
