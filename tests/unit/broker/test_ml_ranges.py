"""PositionRangeSet (a cursor's ack holes) and the cursor's stored form (cursor_info)."""

from __future__ import annotations

import json
import random

from minipulsar.broker.managed_ledger.cursor_info import decode_cursor_info, decode_mark_delete, encode_cursor_info
from minipulsar.broker.managed_ledger.position import Position
from minipulsar.broker.managed_ledger.position_info import CursorPosition
from minipulsar.broker.managed_ledger.range_set import PositionRangeSet


def P(ledger_id: int, entry_id: int) -> Position:
    return Position(ledger_id, entry_id)


def test_adjacent_positions_merge_into_one_range_within_a_ledger_only() -> None:
    acked = PositionRangeSet()
    for position in (P(1, 3), P(1, 5), P(1, 4), P(2, 0), P(1, 6)):
        assert acked.add(position)
    assert not acked.add(P(1, 4)), "already held"
    assert list(acked.ranges()) == [(P(1, 3), P(1, 6)), (P(2, 0), P(2, 0))]
    assert acked.entry_count == 5 and len(acked) == 2
    assert P(1, 5) in acked and P(1, 2) not in acked and P(1, 7) not in acked


def test_range_set_matches_a_plain_set_under_random_operations() -> None:
    rng = random.Random(7)
    acked, model = PositionRangeSet(), set()
    for _ in range(3000):
        position = P(rng.randrange(3), rng.randrange(40))
        if rng.random() < 0.9:
            assert acked.add(position) == (position not in model)
            model.add(position)
        else:
            acked.remove_up_to(position)
            model = {p for p in model if p > position}
        assert acked.entry_count == len(model)
    assert list(acked.positions()) == sorted(model)
    for start, end in acked.ranges():
        assert start.ledger_id == end.ledger_id and start <= end


def test_add_range_merges_what_it_overlaps_or_touches() -> None:
    acked = PositionRangeSet([P(1, 0), P(1, 10), P(1, 20)])
    acked.add_range(P(1, 5), P(1, 11))
    acked.add_range(P(1, 12), P(1, 12))
    assert list(acked.ranges()) == [(P(1, 0), P(1, 0)), (P(1, 5), P(1, 12)), (P(1, 20), P(1, 20))]
    assert acked.entry_count == 1 + 8 + 1


def test_remove_up_to_cuts_the_range_it_falls_in() -> None:
    acked = PositionRangeSet()
    acked.add_range(P(1, 0), P(1, 9))
    acked.add_range(P(2, 0), P(2, 4))
    acked.remove_up_to(P(1, 4))
    assert list(acked.ranges()) == [(P(1, 5), P(1, 9)), (P(2, 0), P(2, 4))] and acked.entry_count == 10
    acked.remove_up_to(P(1, 100))
    assert list(acked.ranges()) == [(P(2, 0), P(2, 4))] and acked.entry_count == 5


def test_cursor_info_stores_ranges_as_four_numbers_and_round_trips() -> None:
    acked = PositionRangeSet([P(1, 1), P(1, 2), P(1, 3), P(1, 7), P(2, 0)])
    position, left_out = CursorPosition.of(P(1, 0), acked, max_ranges=100)
    data = encode_cursor_info(position)
    assert left_out == 0
    assert json.loads(data)["individualDeletedMessages"] == [[1, 1, 1, 3], [1, 7, 1, 7], [2, 0, 2, 0]]
    info = decode_cursor_info(data)
    assert info.cursors_ledger_id == -1 and info.position == position
    assert info.position.mark_delete == P(1, 0) == decode_mark_delete(data)
    assert list(info.position.acked().ranges()) == list(acked.ranges())


def test_cursor_info_keeps_the_first_ranges_within_the_bound_and_says_how_many_it_left_out() -> None:
    acked = PositionRangeSet(P(5, 2 * i) for i in range(10))
    position, left_out = CursorPosition.of(P(5, -1), acked, max_ranges=4)
    assert left_out == 6
    decoded = decode_cursor_info(encode_cursor_info(position)).position
    assert list(decoded.acked().positions()) == [P(5, 0), P(5, 2), P(5, 4), P(5, 6)]


def test_cursor_info_reads_the_legacy_triples() -> None:
    data = json.dumps(
        {"markDeleteLedgerId": 3, "markDeleteEntryId": 1, "individualDeletedMessages": [[3, 3, 5]]}
    ).encode()
    info = decode_cursor_info(data)
    assert info.cursors_ledger_id == -1, "a key written before cursor ledgers holds the position itself"
    assert info.position.mark_delete == P(3, 1)
    assert list(info.position.acked().positions()) == [P(3, 3), P(3, 4), P(3, 5)]


def test_a_key_naming_a_cursor_ledger_leaves_the_ranges_out() -> None:
    position = CursorPosition(P(4, 2), ((P(4, 5), P(4, 6)),), {"seq": 9})
    info = decode_cursor_info(encode_cursor_info(position, cursors_ledger_id=77))
    assert info.cursors_ledger_id == 77 and info.position == CursorPosition(P(4, 2), (), {"seq": 9})
