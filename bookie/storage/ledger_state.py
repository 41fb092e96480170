"""What a bookie knows about each ledger besides its entries: last entry, LAC, fenced.

Every update is a max or a one-way flag, so applying the same adds and fences in any order
(replay of several journals, duplicate adds) gives the same state.
"""

from __future__ import annotations


class LedgerState:
    """One ledger on this bookie."""

    __slots__ = ("ledger_id", "last_entry_id", "lac", "fenced", "entries")

    def __init__(self, ledger_id: int) -> None:
        self.ledger_id = ledger_id
        self.last_entry_id = -1
        """The highest entry id stored here (-1: none)."""
        self.lac = -1
        """The highest last-add-confirmed piggybacked by the adds received (-1: none)."""
        self.fenced = False
        """Set by a fencing read; refuses later non-recovery adds. Never cleared."""
        self.entries = 0

    def entry_added(self, entry_id: int, lac: int, is_new: bool) -> None:
        if entry_id > self.last_entry_id:
            self.last_entry_id = entry_id
        if lac > self.lac:
            self.lac = lac
        if is_new:
            self.entries += 1

    def __repr__(self) -> str:
        return (f"LedgerState(ledger_id={self.ledger_id}, last_entry_id={self.last_entry_id}, "
                f"lac={self.lac}, fenced={self.fenced}, entries={self.entries})")


class LedgerStates:
    """ledger id → :class:`LedgerState`; a ledger exists once it got an add or a fence."""

    __slots__ = ("_ledgers",)

    def __init__(self) -> None:
        self._ledgers: dict[int, LedgerState] = {}

    def get(self, ledger_id: int) -> LedgerState | None:
        return self._ledgers.get(ledger_id)

    def get_or_create(self, ledger_id: int) -> LedgerState:
        state = self._ledgers.get(ledger_id)
        if state is None:
            state = self._ledgers[ledger_id] = LedgerState(ledger_id)
        return state

    def __len__(self) -> int:
        return len(self._ledgers)

    def __iter__(self):
        return iter(self._ledgers.values())
