"""Rates (per second) of the topics' counters, recomputed every ``statsUpdateFrequencyInSecs``.

Pulsar computes ``msgRateIn`` and friends the same way: the hot paths only bump counters, and a
periodic task turns the difference since the previous sample into a rate, which the stats and
/metrics report until the next sample.

Invariants:

- a rate is the growth of its counter over the last sample interval, never negative;
- an object not seen in a sample has no rates any more (0.0).
"""

from __future__ import annotations

from typing import Any


class Rate:
    """The rate of one growing counter over the last sample interval; 0 before the first one."""

    __slots__ = ("_last", "value")

    def __init__(self) -> None:
        self._last = 0
        self.value = 0.0

    def sample(self, total: int, elapsed_s: float) -> None:
        if elapsed_s > 0:
            self.value = max(0.0, (total - self._last) / elapsed_s)
        self._last = total


class RateTable:
    """Named rates per object (topic, producer, subscription, consumer), by identity.

    Objects not seen in a sample are dropped: a consumer that left takes its rates with it.
    Counters start at 0 when their object is created, so a first sample counts from there.
    """

    __slots__ = ("_rates", "_seen")

    def __init__(self) -> None:
        self._rates: dict[int, tuple[Any, dict[str, Rate]]] = {}
        self._seen: dict[int, tuple[Any, dict[str, Rate]]] = {}

    def begin(self) -> None:
        self._seen = {}

    def sample(self, owner: Any, name: str, total: int, elapsed_s: float) -> None:
        key = id(owner)
        slot = self._seen.get(key)
        if slot is None:
            known = self._rates.get(key)
            slot = known if known is not None and known[0] is owner else (owner, {})
            self._seen[key] = slot
        rate = slot[1].get(name)
        if rate is None:
            rate = slot[1][name] = Rate()
        rate.sample(total, elapsed_s)

    def end(self) -> None:
        self._rates, self._seen = self._seen, {}

    def get(self, owner: Any, name: str) -> float:
        slot = self._rates.get(id(owner))
        if slot is None or slot[0] is not owner:
            return 0.0
        rate = slot[1].get(name)
        return rate.value if rate is not None else 0.0
