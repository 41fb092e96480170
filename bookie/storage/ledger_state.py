"""What a bookie knows about each ledger besides its entries: last entry, LAC, fenced, master key.

Every update is a max, a one-way flag or a first-write-wins value (the master key), so
applying the same adds and fences in any order (replay of several journals, duplicate adds,
a state loaded from the index and then the journal replayed over it) gives the same state.
"""

from __future__ import annotations


class LedgerState:
    """One ledger on this bookie."""

    __slots__ = ("fenced", "lac", "last_entry_id", "ledger_id", "master_key")

    def __init__(
        self,
        ledger_id: int,
        last_entry_id: int = -1,
        lac: int = -1,
        fenced: bool = False,
        master_key: bytes | None = None,
    ) -> None:
        self.ledger_id = ledger_id
        self.last_entry_id = last_entry_id
        """The highest entry id stored here (-1: none)."""
        self.lac = lac
        """The highest last-add-confirmed piggybacked by the adds received (-1: none)."""
        self.fenced = fenced
        """Set by a fencing read; refuses later non-recovery adds. Never cleared."""
        self.master_key = master_key
        """The key of the ledger's first add or fence (None: not known yet); adds and fencing
        reads with another are refused (UnauthorizedAccess). Never changed once set."""

    def entry_added(self, entry_id: int, lac: int) -> None:
        if entry_id > self.last_entry_id:
            self.last_entry_id = entry_id
        if lac > self.lac:
            self.lac = lac

    def __repr__(self) -> str:
        return (
            f"LedgerState(ledger_id={self.ledger_id}, last_entry_id={self.last_entry_id}, "
            f"lac={self.lac}, fenced={self.fenced}, master_key={self.master_key.hex() if self.master_key else None})"
        )


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

    def put(self, state: LedgerState) -> None:
        self._ledgers[state.ledger_id] = state

    def remove(self, ledger_id: int) -> None:
        self._ledgers.pop(ledger_id, None)

    def __len__(self) -> int:
        return len(self._ledgers)

    def __iter__(self):
        return iter(self._ledgers.values())
