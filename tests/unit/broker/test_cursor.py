"""ManagedCursor and ManagedLedger position arithmetic, on a ledger list without bookies."""

from __future__ import annotations

import json

from minipulsar.broker.managed_ledger.cursor import ManagedCursor
from minipulsar.broker.managed_ledger.cursor_info import decode_cursor_info, encode_cursor_info
from minipulsar.broker.managed_ledger.entry_cache import EntryCache
from minipulsar.broker.managed_ledger.position import Entry, Position
from minipulsar.broker.managed_ledger.position_info import CursorPosition
from minipulsar.broker.managed_ledger.range_set import PositionRangeSet
from tests.support.broker_fakes import closed_ledger


async def test_positions_skip_empty_and_finished_ledgers() -> None:
    ledger = closed_ledger(3, 0, 2)
    assert ledger.last_confirmed == Position(12, 1)
    assert ledger.next_position(Position(10, 1)) == Position(10, 2)
    assert ledger.next_position(Position(10, 2)) == Position(12, 0), "ledger 11 is empty"
    assert ledger.next_position(Position(12, 1)) == Position(12, 2), "past the end stays in the last ledger"
    assert ledger.normalize(Position(10, -1)) == Position(10, -1)
    assert ledger.count_entries(Position(10, -1), ledger.last_confirmed) == 5
    assert ledger.count_entries(Position(10, 1), Position(12, 0)) == 2


async def test_individual_acks_move_mark_delete_over_contiguous_runs() -> None:
    ledger = closed_ledger(3, 2)
    cursor = ManagedCursor(ledger, "sub", None, Position(10, -1))
    await cursor.acknowledge([Position(10, 1), Position(11, 0)])
    assert cursor.mark_delete == Position(10, -1)
    assert set(cursor.individually_deleted.positions()) == {Position(10, 1), Position(11, 0)}
    assert cursor.backlog_entries == 3
    await cursor.acknowledge([Position(10, 0)])
    assert cursor.mark_delete == Position(10, 1)
    await cursor.acknowledge([Position(10, 2)])
    assert cursor.mark_delete == Position(11, 0), "the run crosses into the next ledger"
    assert not cursor.individually_deleted
    assert cursor.backlog_entries == 1


async def test_cumulative_ack_drops_holes_below_it() -> None:
    ledger = closed_ledger(5)
    cursor = ManagedCursor(ledger, "sub", None, Position(10, -1))
    await cursor.acknowledge([Position(10, 3)])
    await cursor.acknowledge_cumulative(Position(10, 2))
    assert cursor.mark_delete == Position(10, 3)
    assert cursor.is_acked(Position(10, 0)) and not cursor.is_acked(Position(10, 4))


async def test_acks_beyond_the_last_entry_are_ignored() -> None:
    ledger = closed_ledger(2)
    cursor = ManagedCursor(ledger, "sub", None, Position(10, -1))
    await cursor.acknowledge([Position(10, 7), Position(99, 0)])
    assert not cursor.individually_deleted


async def test_read_skips_acknowledged_entries_and_rewind_returns_to_the_first_unacked() -> None:
    ledger = closed_ledger(4)
    ledger.cache.max_bytes = 1 << 20
    for entry_id in range(4):
        ledger._ledger_cache.insert(Entry(Position(10, entry_id), b"e%d" % entry_id, 1))
    cursor = ManagedCursor(ledger, "sub", None, Position(10, -1))
    await cursor.acknowledge([Position(10, 1)])
    entries = await cursor.read_entries(10)
    assert [e.position.entry_id for e in entries] == [0, 2, 3]
    assert not cursor.has_more_entries()
    cursor.rewind()
    assert cursor.read_position == Position(10, 0)


def test_ack_holes_persist_as_ranges() -> None:
    holes = {Position(1, 1), Position(1, 2), Position(1, 3), Position(1, 7), Position(2, 0)}
    position, left_out = CursorPosition.of(Position(1, 0), PositionRangeSet(holes), 1000)
    data = encode_cursor_info(position)
    assert json.loads(data)["individualDeletedMessages"] == [[1, 1, 1, 3], [1, 7, 1, 7], [2, 0, 2, 0]]
    decoded = decode_cursor_info(data).position
    assert left_out == 0 and decoded.mark_delete == Position(1, 0) and set(decoded.acked().positions()) == holes


def test_entry_cache_evicts_oldest_beyond_its_size() -> None:
    cache = EntryCache(max_bytes=10)
    ledger_cache = cache.for_ledger("t", lambda: None)
    for i in range(4):
        ledger_cache.insert(Entry(Position(1, i), b"abcd", 1))
    assert len(cache) == 2 and cache.size_bytes == 8 and cache.evictions == 2
    assert ledger_cache.get(Position(1, 0)) is None and ledger_cache.get(Position(1, 3)) is not None
