"""What a durable cursor stores at ``/managed-ledgers/{topic}/{cursor}`` (Pulsar's
``ManagedCursorInfo``, as JSON)::

    {"markDeleteLedgerId": L, "markDeleteEntryId": E,
     "individualDeletedMessages": [[from_ledger, from_entry, to_ledger, to_entry], ...],
     "lastActive": ms}

``individualDeletedMessages`` are the acknowledged ranges after the mark-delete position,
inclusive, sorted — at most ``managedLedgerMaxUnackedRangesToPersist`` of them, the first
ones. Ranges left out are only in memory: after a crash those messages are delivered again
(at-least-once), never lost. A range stored as a ``[ledger, first, last]`` triple (within one
ledger) is read too.

Invariant: the ranges written are sorted, inclusive, after the mark-delete position, and at
most ``managedLedgerMaxUnackedRangesToPersist`` of them.
"""

from __future__ import annotations

import itertools
import json
import time

from minipulsar.broker.managed_ledger.position import Position
from minipulsar.broker.managed_ledger.range_set import PositionRangeSet


def encode_cursor_info(mark_delete: Position, acked: PositionRangeSet, max_ranges: int) -> tuple[bytes, int]:
    """The stored form, and how many ranges did not fit in ``max_ranges``."""
    ranges = [
        [start.ledger_id, start.entry_id, end.ledger_id, end.entry_id]
        for start, end in itertools.islice(acked.ranges(), max_ranges)
    ]
    data = json.dumps(
        {
            "markDeleteLedgerId": mark_delete.ledger_id,
            "markDeleteEntryId": mark_delete.entry_id,
            "individualDeletedMessages": ranges,
            "lastActive": int(time.time() * 1000),
        },
        separators=(",", ":"),
    ).encode()
    return data, len(acked) - len(ranges)


def decode_cursor_info(data: bytes) -> tuple[Position, PositionRangeSet]:
    raw = json.loads(data)
    acked = PositionRangeSet()
    for item in raw.get("individualDeletedMessages", []):
        if len(item) == 3:  # [ledger, first, last]: a range within one ledger
            item = [item[0], item[1], item[0], item[2]]
        from_ledger, from_entry, to_ledger, to_entry = item
        # We never write a range spanning ledgers (its entry count needs the ledger list); one
        # that does is skipped: its messages are delivered again, which is safe.
        if from_ledger == to_ledger and to_entry >= from_entry:
            acked.add_range(Position(from_ledger, from_entry), Position(to_ledger, to_entry))
    return decode_mark_delete(data, raw), acked


def decode_mark_delete(data: bytes, raw: dict | None = None) -> Position:
    raw = json.loads(data) if raw is None else raw
    return Position(raw["markDeleteLedgerId"], raw["markDeleteEntryId"])
