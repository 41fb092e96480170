"""FrozenHeap: loaded topics leave the cyclic garbage collector's scans.

A loaded topic is a few dozen long-lived container objects (its managed ledger, ledger
handle, counters, producers). CPython's full collection scans every tracked object while
holding the GIL, and runs each time the objects promoted since the last one reach a quarter
of the old generation: with 10,000 topics loaded that is ~500,000 objects, a 450 ms stall of
every publish of every topic (measured on the 2-core machine), and the young collections
around it cost ~35 µs per entry more than with one topic.

So once topics have loaded (``loaded``, within :data:`FREEZE_DELAY_S`), ``gc.freeze()``
moves what exists then into the permanent generation, which no collection scans. What is
frozen is freed by reference counting as usual; only reference cycles among frozen objects
wait. Those appear when topics are closed (an unload, a shutdown): ``unloaded`` unfreezes
everything, so the next full collection finds them, and the next load freezes again.

Invariants:

- at most one freeze is pending: a burst of loads freezes at most once per ``delay_s``, and
  the last load of a burst is frozen at most ``delay_s`` later;
- garbage cycles kept frozen never outlive the next unload: memory stays bounded by what
  was loaded and what closed since the last unfreeze (a freeze first collects the young and
  middle generations, so only cycles already in the old one can be caught by it).
"""

from __future__ import annotations

import asyncio
import gc

FREEZE_DELAY_S = 1.0
"""Longest time from a topic load to the freeze that covers it."""


class FrozenHeap:
    def __init__(self, delay_s: float = FREEZE_DELAY_S) -> None:
        self._delay_s = delay_s
        self._timer: asyncio.TimerHandle | None = None
        self.freezes = 0
        """Freezes done (for tests and stats)."""

    def loaded(self) -> None:
        """A topic loaded: freeze the heap within ``delay_s``."""
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._delay_s, self._due)

    def unloaded(self) -> None:
        """Topics closed: their cycles must be collectable again."""
        gc.unfreeze()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _due(self) -> None:
        self._timer = None
        self.freeze_now()

    def freeze_now(self) -> None:
        gc.collect(1)  # the young and middle generations' garbage first (cheap): nothing to keep
        gc.freeze()
        self.freezes += 1
