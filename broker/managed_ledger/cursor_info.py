"""What a durable cursor stores at ``/managed-ledgers/{topic}/{cursor}`` (Pulsar's
``ManagedCursorInfo``, as JSON)::

    {"cursorsLedgerId": 57, "markDeleteLedgerId": L, "markDeleteEntryId": E,
     "individualDeletedMessages": [[from_ledger, from_entry, to_ledger, to_entry], ...],
     "properties": {"name": 17}, "lastActive": ms}

``cursorsLedgerId`` names the cursor ledger (cursor_ledger.py) whose last entry holds the
newest position; the mark-delete position beside it is the one as of the switch to that
ledger — older than the ledger's, so it may only hold data back, never release it — and the
ranges are left out. ``cursorsLedgerId`` -1 (or absent: a key written before cursor ledgers)
means the key itself holds the position, ranges included: after a clean close, or when the
bookies could not take a write. ``individualDeletedMessages`` are at most
``managedLedgerMaxUnackedRangesToPersist``; ranges left out are redelivered after a crash,
never lost. A range stored as a ``[ledger, first, last]`` triple is read too.

Invariant: the key names the ledger holding the newest persisted position, or holds it itself.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from minipulsar.broker.managed_ledger.position import Position
from minipulsar.broker.managed_ledger.position_info import CursorPosition, ranges_from_json, ranges_to_json

NO_LEDGER = -1
"""``cursorsLedgerId`` when the key itself holds the position."""


@dataclass(frozen=True, slots=True)
class CursorInfo:
    cursors_ledger_id: int
    position: CursorPosition


def encode_cursor_info(position: CursorPosition, cursors_ledger_id: int = NO_LEDGER) -> bytes:
    """The key's bytes; ranges are written only without a cursor ledger (Pulsar's choice)."""
    raw: dict[str, object] = {
        "cursorsLedgerId": cursors_ledger_id,
        "markDeleteLedgerId": position.mark_delete.ledger_id,
        "markDeleteEntryId": position.mark_delete.entry_id,
        "individualDeletedMessages": ranges_to_json(position.ranges) if cursors_ledger_id == NO_LEDGER else [],
        "lastActive": int(time.time() * 1000),
    }
    if position.properties:
        raw["properties"] = position.properties
    return json.dumps(raw, separators=(",", ":")).encode()


def decode_cursor_info(data: bytes) -> CursorInfo:
    raw = json.loads(data)
    position = CursorPosition(
        decode_mark_delete(data, raw),
        ranges_from_json(raw.get("individualDeletedMessages", [])),
        {str(name): int(value) for name, value in raw.get("properties", {}).items()},
    )
    return CursorInfo(int(raw.get("cursorsLedgerId", NO_LEDGER)), position)


def decode_mark_delete(data: bytes, raw: dict | None = None) -> Position:
    raw = json.loads(data) if raw is None else raw
    return Position(raw["markDeleteLedgerId"], raw["markDeleteEntryId"])
