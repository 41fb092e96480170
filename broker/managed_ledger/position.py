"""Positions in a managed ledger: ``(ledger_id, entry_id)``, ordered as tuples.

Invariant: positions order as ``(ledger_id, entry_id)`` tuples; ``(L, -1)`` is just before
ledger L's first entry.
"""

from __future__ import annotations

from typing import NamedTuple


class Position(NamedTuple):
    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


class Entry(NamedTuple):
    """One entry read from or added to a managed ledger: a producer batch."""

    position: Position
    payload: bytes
    num_messages: int
