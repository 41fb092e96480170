"""The first-cut entry index: consecutive ranges, gaps, byte limits, idempotent re-adds."""

from __future__ import annotations

from bookie.journal_format import EntryLocation
from bookie.storage.entry_index import ENTRY_OVERHEAD_BYTES, EntryIndex
from bookie.storage.ledger_state import LedgerState


def _loc(offset: int, length: int = 100) -> EntryLocation:
    return EntryLocation(0, 1, offset, length)


def test_a_range_stops_at_the_first_gap_and_at_count() -> None:
    index = EntryIndex()
    for entry_id in (0, 1, 2, 4):
        index.put(5, entry_id, _loc(entry_id * 200))
    assert [e for e, _ in index.consecutive(5, 0, 10, 1 << 20)] == [0, 1, 2]
    assert [e for e, _ in index.consecutive(5, 1, 1, 1 << 20)] == [1]
    assert index.consecutive(5, 3, 10, 1 << 20) == []
    assert index.consecutive(6, 0, 10, 1 << 20) == []


def test_max_bytes_limits_a_range_but_never_drops_the_first_entry() -> None:
    index = EntryIndex()
    for entry_id in range(5):
        index.put(1, entry_id, _loc(entry_id * 200, 100))
    per_entry = 100 + ENTRY_OVERHEAD_BYTES
    assert len(index.consecutive(1, 0, 5, 2 * per_entry)) == 2
    assert len(index.consecutive(1, 0, 5, 2 * per_entry + 1)) == 2
    assert len(index.consecutive(1, 0, 5, 1)) == 1


def test_a_re_added_entry_is_counted_once_and_points_at_the_latest_copy() -> None:
    index = EntryIndex()
    assert index.put(1, 0, _loc(0)) is True
    assert index.put(1, 0, _loc(500)) is False
    assert index.entries == 1 and index.get(1, 0) == _loc(500)


def test_ledger_state_keeps_maxima_whatever_the_order() -> None:
    state = LedgerState(1)
    for entry_id, lac in [(3, 1), (1, 0), (2, 2)]:
        state.entry_added(entry_id, lac, is_new=True)
    assert (state.last_entry_id, state.lac, state.entries) == (3, 2, 3)
