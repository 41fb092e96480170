"""The ordered ledgers of one managed ledger, and position arithmetic over them.

Positions are ``(ledger_id, entry_id)`` ordered as tuples; ledgers are kept in id order
(ledger ids only grow within a managed ledger), so a bisect over the ids finds a position's
ledger. A closed ledger's last entry is ``entries - 1``; the open one (``current``, being
written) ends at its handle's last-add-confirmed. ``(L, -1)`` means "before ledger L's first
entry" — the mark-delete position of a cursor that has acknowledged nothing in L.

Invariant: ``infos`` is the list object the ``ManagedLedgerInfo`` serialises; it is only
changed through the methods here, which keep the id index in step.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING

from minipulsar.broker.managed_ledger.info import LedgerInfo
from minipulsar.broker.managed_ledger.position import Position

if TYPE_CHECKING:
    from minipulsar.bookkeeper.ledger_handle import LedgerHandle


class LedgerList:
    def __init__(self, infos: list[LedgerInfo]) -> None:
        self.infos = infos
        self.current: LedgerHandle | None = None
        """The ledger being written (the last of ``infos``), or None between ledgers."""
        self._ids: list[int] = []
        self._by_id: dict[int, LedgerInfo] = {}
        self._reindex()

    def _reindex(self) -> None:
        self._ids = [info.ledger_id for info in self.infos]
        self._by_id = {info.ledger_id: info for info in self.infos}
        assert self._ids == sorted(self._ids), f"ledgers out of order: {self._ids}"

    # -- changes --------------------------------------------------------------------------------

    def replace(self, infos: list[LedgerInfo]) -> None:
        self.infos[:] = infos
        self._reindex()

    def append(self, info: LedgerInfo) -> None:
        assert not self.infos or info.ledger_id > self.infos[-1].ledger_id, "ledger ids must grow"
        self.infos.append(info)
        self._reindex()

    def remove(self, ledger_ids: set[int]) -> list[LedgerInfo]:
        removed = [info for info in self.infos if info.ledger_id in ledger_ids]
        self.infos[:] = [info for info in self.infos if info.ledger_id not in ledger_ids]
        self._reindex()
        return removed

    def close_current(self) -> LedgerInfo:
        """Record the open ledger's final entry count and size; it is no longer ``current``."""
        handle = self.current
        assert handle is not None
        info = self._by_id[handle.ledger_id]
        info.entries, info.size = handle.last_add_confirmed + 1, handle.length
        self.current = None
        return info

    # -- lookups --------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.infos)

    def get(self, ledger_id: int) -> LedgerInfo | None:
        return self._by_id.get(ledger_id)

    def last_entry_of(self, info: LedgerInfo) -> int:
        if info.entries is not None:
            return info.entries - 1
        current = self.current
        if current is not None and current.ledger_id == info.ledger_id:
            return current.last_add_confirmed
        return -1

    def contains(self, position: Position) -> bool:
        """True when ``position`` is an existing, confirmed entry."""
        info = self._by_id.get(position.ledger_id)
        return info is not None and 0 <= position.entry_id <= self.last_entry_of(info)

    @property
    def last_confirmed(self) -> Position:
        """The last durable entry, or ``(first ledger, -1)`` when there is none."""
        for info in reversed(self.infos):
            last = self.last_entry_of(info)
            if last >= 0:
                return Position(info.ledger_id, last)
        return self.first_position

    @property
    def first_position(self) -> Position:
        return Position(self.infos[0].ledger_id if self.infos else -1, -1)

    def normalize(self, position: Position) -> Position:
        """The first existing entry at or after ``position``; past the end stays in the last ledger."""
        infos = self.infos
        index = bisect_left(self._ids, position.ledger_id)
        while index < len(infos):
            info = infos[index]
            if info.ledger_id > position.ledger_id:
                position = Position(info.ledger_id, 0)
            if position.entry_id <= self.last_entry_of(info) or index == len(infos) - 1:
                return position
            index += 1
        return position

    def next_position(self, position: Position) -> Position:
        return self.normalize(Position(position.ledger_id, position.entry_id + 1))

    def count_entries(self, after: Position, up_to: Position) -> int:
        """Entries in ``(after, up_to]``."""
        total = 0
        infos = self.infos
        for index in range(bisect_left(self._ids, after.ledger_id), len(infos)):
            info = infos[index]
            if info.ledger_id > up_to.ledger_id:
                break
            low = after.entry_id + 1 if info.ledger_id == after.ledger_id else 0
            high = up_to.entry_id if info.ledger_id == up_to.ledger_id else self.last_entry_of(info)
            if high >= low:
                total += high - low + 1
        return total

    def entries_from(self, position: Position, limit: int) -> int:
        """Entries in ``[position, last_confirmed]``, counted from the tail and capped at ``limit``
        (cheap: a reader near the tail costs one ledger)."""
        total = 0
        for info in reversed(self.infos):
            last = self.last_entry_of(info)
            if info.ledger_id < position.ledger_id:
                break
            first = position.entry_id if info.ledger_id == position.ledger_id else 0
            total += max(0, last - max(first, 0) + 1)
            if total >= limit:
                return limit
        return total

    def total_entries(self) -> int:
        return sum(self.last_entry_of(info) + 1 for info in self.infos)

    def total_size_bytes(self) -> int:
        current = self.current
        return sum(
            current.length if current is not None and info.ledger_id == current.ledger_id else info.size
            for info in self.infos
        )
