"""A cursor's individually acknowledged positions as sorted, disjoint, inclusive ranges.

Pulsar keeps ``individualDeletedMessages`` as a range set, never one item per position: a
consumer acking a million messages out of order in a handful of runs costs a handful of
ranges. Here the ranges live in two parallel sorted lists (starts, ends), so membership is a
bisect and adding a position touches at most its two neighbours.

Invariants: ranges are sorted, disjoint and never adjacent within a ledger (adjacent ones are
merged); a range never spans two ledgers (so its entry count is ``end - start + 1`` without
asking the ledger list); ``entry_count`` is the number of positions held.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator

from minipulsar.broker.managed_ledger.position import Position


class PositionRangeSet:
    __slots__ = ("_ends", "_starts", "entry_count")

    def __init__(self, positions: Iterable[Position] = ()) -> None:
        self._starts: list[Position] = []
        self._ends: list[Position] = []
        self.entry_count = 0
        for position in positions:
            self.add(position)

    def __len__(self) -> int:
        """The number of ranges (Pulsar's ``nonContiguousDeletedMessagesRange``)."""
        return len(self._starts)

    def __bool__(self) -> bool:
        return bool(self._starts)

    def __contains__(self, position: Position) -> bool:
        index = bisect_right(self._starts, position) - 1
        return index >= 0 and self._ends[index] >= position

    def ranges(self) -> Iterator[tuple[Position, Position]]:
        return zip(self._starts, self._ends)

    def __iter__(self) -> Iterator[Position]:
        return self.positions()

    def positions(self) -> Iterator[Position]:
        """Every position held, in order: O(positions) — use :meth:`ranges` where it matters."""
        for start, end in self.ranges():
            for entry_id in range(start.entry_id, end.entry_id + 1):
                yield Position(start.ledger_id, entry_id)

    def first(self) -> tuple[Position, Position] | None:
        return (self._starts[0], self._ends[0]) if self._starts else None

    def add(self, position: Position) -> bool:
        """Add one position; False when it was already held."""
        starts, ends = self._starts, self._ends
        index = bisect_right(starts, position)
        if index > 0 and ends[index - 1] >= position:
            return False
        ledger_id, entry_id = position
        joins_left = index > 0 and ends[index - 1] == (ledger_id, entry_id - 1)
        joins_right = index < len(starts) and starts[index] == (ledger_id, entry_id + 1)
        if joins_left and joins_right:
            ends[index - 1] = ends[index]
            del starts[index], ends[index]
        elif joins_left:
            ends[index - 1] = position
        elif joins_right:
            starts[index] = position
        else:
            starts.insert(index, position)
            ends.insert(index, position)
        self.entry_count += 1
        return True

    def add_range(self, start: Position, end: Position) -> None:
        """Add ``start..end`` (one ledger, inclusive), merging what it overlaps or touches."""
        if start.ledger_id != end.ledger_id or end < start:
            raise ValueError(f"bad range {start}..{end}")
        starts, ends = self._starts, self._ends
        low = bisect_left(ends, Position(start.ledger_id, start.entry_id - 1))
        high = bisect_right(starts, Position(end.ledger_id, end.entry_id + 1))
        # Ranges low..high-1 overlap or touch [start, end]; all lie in the same ledger.
        if low < high:
            merged = sum(e.entry_id - s.entry_id + 1 for s, e in zip(starts[low:high], ends[low:high]))
            start, end = min(start, starts[low]), max(end, ends[high - 1])
        else:
            merged = 0
        starts[low:high] = [start]
        ends[low:high] = [end]
        self.entry_count += end.entry_id - start.entry_id + 1 - merged

    def remove_up_to(self, position: Position) -> None:
        """Drop every position at or before ``position`` (a range crossing it is cut)."""
        starts, ends = self._starts, self._ends
        count = bisect_right(starts, position)
        if count == 0:
            return
        removed = sum(end.entry_id - start.entry_id + 1 for start, end in zip(starts[:count], ends[:count]))
        last_end = ends[count - 1]
        if last_end > position:  # same ledger: a range never spans two
            kept_start = Position(position.ledger_id, position.entry_id + 1)
            removed -= last_end.entry_id - kept_start.entry_id + 1
            starts[count - 1] = kept_start
            count -= 1
        del starts[:count], ends[:count]
        self.entry_count -= removed

    def pop_first(self) -> tuple[Position, Position]:
        start, end = self._starts.pop(0), self._ends.pop(0)
        self.entry_count -= end.entry_id - start.entry_id + 1
        return start, end

    def clear(self) -> None:
        self._starts.clear()
        self._ends.clear()
        self.entry_count = 0

    def __repr__(self) -> str:
        shown = ", ".join(f"[{s}..{e}]" for s, e in list(self.ranges())[:5])
        return f"PositionRangeSet({shown}{', ...' if len(self) > 5 else ''}; {self.entry_count} positions)"
