"""The replay set of a Shared/Key_Shared dispatcher: entries to send again, oldest first.

Pulsar's ``MessageRedeliveryController``: positions with the sticky-key hash of their entry
(0 for Shared). Reads take the lowest positions first. ``hash_counts`` tells Key_Shared which
keys still have an older entry waiting here, so that a newer one of the same key is held back.

Invariants:

- a position is held at most once; reads take the lowest positions first;
- ``hash_counts`` counts, per key hash, the positions held.
"""

from __future__ import annotations

import heapq

from minipulsar.broker.managed_ledger.position import Position


class ReplayQueue:
    def __init__(self) -> None:
        self._hashes: dict[Position, int] = {}
        self._heap: list[Position] = []
        self.hash_counts: dict[int, int] = {}

    def add(self, position: Position, key_hash: int = 0) -> None:
        if position in self._hashes:
            return
        self._hashes[position] = key_hash
        heapq.heappush(self._heap, position)
        self.hash_counts[key_hash] = self.hash_counts.get(key_hash, 0) + 1

    def discard(self, position: Position) -> None:
        key_hash = self._hashes.pop(position, None)
        if key_hash is not None:
            self._uncount(key_hash)

    def discard_up_to(self, position: Position) -> None:
        while self._heap and self._heap[0] <= position:
            self.discard(heapq.heappop(self._heap))

    def pop_first(self, count: int) -> list[tuple[Position, int]]:
        """Remove and return up to ``count`` lowest positions with their hashes."""
        taken: list[tuple[Position, int]] = []
        heap, hashes = self._heap, self._hashes
        while heap and len(taken) < count:
            position = heapq.heappop(heap)
            key_hash = hashes.pop(position, None)
            if key_hash is None:  # discarded earlier; the heap drops it lazily
                continue
            self._uncount(key_hash)
            taken.append((position, key_hash))
        return taken

    def key_hash(self, position: Position) -> int | None:
        return self._hashes.get(position)

    def _uncount(self, key_hash: int) -> None:
        left = self.hash_counts[key_hash] - 1
        if left:
            self.hash_counts[key_hash] = left
        else:
            del self.hash_counts[key_hash]

    def clear(self) -> None:
        self._hashes.clear()
        self._heap.clear()
        self.hash_counts.clear()

    def __len__(self) -> int:
        return len(self._hashes)

    def __bool__(self) -> bool:
        return bool(self._hashes)

    def __contains__(self, position: object) -> bool:
        return position in self._hashes
