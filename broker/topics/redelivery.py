"""How many times each entry of a subscription was sent again (Pulsar's InMemoryRedeliveryTracker).

An entry's count goes up each time it is handed back for redelivery — negative ack, ack
timeout, REDELIVER_UNACKED, its consumer leaving, a Failover switch or rewind — and is sent
with the entry as ``MESSAGE.redelivery_count`` (the client's dead-letter policy reads it).
Counts live in memory only, as in Pulsar: a broker restart starts them at zero again. An
acknowledged entry's count is dropped.

Invariants:

- a count only grows until its entry is acknowledged, then it is gone;
- with the tracker off every count reads 0.
"""

from __future__ import annotations

from collections.abc import Iterable

from minipulsar.broker.managed_ledger.position import Position


class RedeliveryTracker:
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._counts: dict[Position, int] = {}

    def increment(self, positions: Iterable[Position]) -> None:
        if not self.enabled:
            return
        counts = self._counts
        for position in positions:
            counts[position] = counts.get(position, 0) + 1

    def count(self, position: Position) -> int:
        return self._counts.get(position, 0) if self._counts else 0

    def remove(self, positions: Iterable[Position]) -> None:
        if self._counts:
            for position in positions:
                self._counts.pop(position, None)

    def remove_up_to(self, position: Position) -> None:
        """Forget every entry at or before ``position`` (a cumulative ack, a mark-delete move)."""
        if self._counts:
            self._counts = {p: n for p, n in self._counts.items() if p > position}

    def clear(self) -> None:
        self._counts.clear()

    def __len__(self) -> int:
        return len(self._counts)
