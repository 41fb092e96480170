"""One persisted cursor position (Pulsar's ``PositionInfo``): what a cursor ledger entry holds.

A :class:`CursorPosition` is the mark-delete position, the first
``managedLedgerMaxUnackedRangesToPersist`` individually acknowledged ranges after it, and the
cursor's ``properties`` (names → 64-bit integers, Pulsar's ``LongProperty``; the deduplication
cursor would keep its producers' sequence ids there). Each persisted change is one entry of
the cursor's ledger, encoded with msgpack as a map with Pulsar's field names::

    {"ledgerId": L, "entryId": E,
     "individualDeletedMessages": [[from_ledger, from_entry, to_ledger, to_entry], ...],
     "properties": {"name": 17}}

msgpack, not JSON: the entry is read by brokers only (never by an operator's tool), msgpack is
already the wire's codec, and the ranges (up to 10 000 of four integers) take about half the
bytes and a fraction of the encode time; the keys stay self-describing, so a field can be
added the way protobuf's optional fields allow. A range spanning ledgers (never written) is
dropped on decode: its messages are delivered again, never lost.

Invariants: ranges are sorted, inclusive, within one ledger each, after the mark-delete
position; decoding what :func:`encode_position_info` wrote gives back an equal value.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import msgpack

from minipulsar.broker.managed_ledger.position import Position
from minipulsar.broker.managed_ledger.range_set import PositionRangeSet
from minipulsar.errors import PersistenceError
from minipulsar.protocol.codec import MSGPACK_SHAPE_ERRORS

Range = tuple[Position, Position]
_DECODE_ERRORS: tuple[type[Exception], ...] = (*MSGPACK_SHAPE_ERRORS, KeyError, ValueError, AttributeError)


@dataclass(frozen=True, slots=True)
class CursorPosition:
    mark_delete: Position
    ranges: tuple[Range, ...] = ()
    """The first ``managedLedgerMaxUnackedRangesToPersist`` acknowledged ranges after ``mark_delete``."""
    properties: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls, mark_delete: Position, acked: PositionRangeSet, max_ranges: int, properties: dict[str, int] | None = None
    ) -> tuple[CursorPosition, int]:
        """The position to persist, and how many ranges did not fit in ``max_ranges``."""
        ranges = tuple(itertools.islice(acked.ranges(), max_ranges))
        return cls(mark_delete, ranges, dict(properties or {})), len(acked) - len(ranges)

    def acked(self) -> PositionRangeSet:
        acked = PositionRangeSet()
        for start, end in self.ranges:
            acked.add_range(start, end)
        return acked


def ranges_to_json(ranges: tuple[Range, ...]) -> list[list[int]]:
    return [[start.ledger_id, start.entry_id, end.ledger_id, end.entry_id] for start, end in ranges]


def ranges_from_json(items: list) -> tuple[Range, ...]:
    """Stored ranges, ``[l, e, l, e]`` or ``[l, first, last]``; one spanning ledgers is dropped."""
    ranges = []
    for item in items:
        if len(item) == 3:  # [ledger, first, last]: a range within one ledger
            item = [item[0], item[1], item[0], item[2]]
        from_ledger, from_entry, to_ledger, to_entry = item
        if from_ledger == to_ledger and to_entry >= from_entry:
            ranges.append((Position(from_ledger, from_entry), Position(to_ledger, to_entry)))
    return tuple(ranges)


def encode_position_info(position: CursorPosition) -> bytes:
    body = {
        "ledgerId": position.mark_delete.ledger_id,
        "entryId": position.mark_delete.entry_id,
        "individualDeletedMessages": ranges_to_json(position.ranges),
        "properties": position.properties,
    }
    data: bytes = msgpack.packb(body, use_bin_type=True)
    return data


def decode_position_info(data: bytes) -> CursorPosition:
    """Raises PersistenceError for bytes that are not a position entry (the ledger is not a cursor's)."""
    try:
        raw = msgpack.unpackb(data, raw=False)
        mark_delete = Position(int(raw["ledgerId"]), int(raw["entryId"]))
        ranges = ranges_from_json(raw.get("individualDeletedMessages", []))
        properties = {str(name): int(value) for name, value in raw.get("properties", {}).items()}
    except _DECODE_ERRORS as error:
        raise PersistenceError(f"not a cursor position entry: {error}") from error
    return CursorPosition(mark_delete, ranges, properties)
