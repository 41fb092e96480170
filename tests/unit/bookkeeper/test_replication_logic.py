"""AutoRecovery's pure logic: the under-replication paths, fragments of a ledger, the auditor's
lost-bookie delay.

Goal: the metadata layout is BookKeeper's, and fragment computation matches the striping rule
(entry ``e`` on the Qw positions from ``e mod E``). Method: hand-made metadata, no I/O."""

from __future__ import annotations

import pytest

from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata, LedgerState
from minipulsar.bookkeeper.replication.auditor import due_bookies, update_lost
from minipulsar.bookkeeper.replication.fragments import (
    bookies_of,
    fragments_of,
    fragments_on,
    replace_bookie,
    segment_bounds,
)
from minipulsar.bookkeeper.replication.ledger_checker import checkable_last_entry
from minipulsar.bookkeeper.replication.paths import (
    parse_ur_node,
    parse_vote,
    ur_ledger_path,
    ur_lock_path,
    vote_name,
)


def striped_ledger(closed_at: int | None = 9) -> LedgerMetadata:
    """E=3 Qw=2 Qa=2; entries 0-4 on a,b,c, from 5 on a,d,c."""
    metadata = LedgerMetadata(
        ledger_id=7,
        ensemble_size=3,
        write_quorum=2,
        ack_quorum=2,
        ensembles=((0, ("a", "b", "c")), (5, ("a", "d", "c"))),
    )
    return metadata if closed_at is None else metadata.closed(closed_at, 100)


def test_paths_are_bookkeepers_hierarchical_layout() -> None:
    assert ur_ledger_path(42) == "/ledgers/underreplication/ledgers/0000/0000/0000/002a/urL0000000042"
    big = (0x1234 << 48) | (0x5678 << 32) | (0x9ABC << 16) | 0xDEF0
    assert ur_ledger_path(big).startswith("/ledgers/underreplication/ledgers/1234/5678/9abc/def0/urL")
    assert ur_lock_path(42) == "/ledgers/underreplication/locks/urL0000000042"
    assert parse_ur_node("urL0000000042") == 42
    assert parse_ur_node("urLx") is None and parse_ur_node("L42") is None
    assert parse_vote(vote_name(3)) == 3 and parse_vote("V_") is None
    with pytest.raises(ValueError):
        ur_ledger_path(-1)


def test_segment_bounds_and_fragments_of_a_striped_ledger() -> None:
    metadata = striped_ledger()
    assert segment_bounds(metadata, 9) == [(0, 0, 4), (1, 5, 9)]
    fragments = fragments_of(metadata, 9)
    assert len(fragments) == 6
    on_b = [f for f in fragments if f.bookie == "b"]
    assert len(on_b) == 1
    # b is position 1: stores e with (1 - e) mod 3 < 2 → e mod 3 in {0, 1}
    assert list(on_b[0].entry_ids()) == [0, 1, 3, 4]
    assert (on_b[0].first_stored, on_b[0].last_stored) == (0, 4)
    for entry_id in range(10):
        for fragment in fragments:
            if fragment.first_entry_id <= entry_id <= fragment.last_entry_id:
                assert fragment.stores(entry_id) == (fragment.bookie in metadata.write_set(entry_id))


def test_fragments_on_lost_bookies_and_an_empty_tail_segment() -> None:
    metadata = striped_ledger(closed_at=4)  # the second segment holds nothing
    assert {(f.segment_index, f.bookie) for f in fragments_on(metadata, 4, {"a", "d"})} == {(0, "a")}
    assert bookies_of(metadata) == {"a", "b", "c", "d"}
    assert fragments_of(striped_ledger(closed_at=-1), -1) == []


def test_replace_bookie_swaps_one_segment_only() -> None:
    metadata = striped_ledger()
    changed = replace_bookie(metadata, 0, 1, "b", "e")
    assert changed.ensembles == ((0, ("a", "e", "c")), (5, ("a", "d", "c")))
    with pytest.raises(ValueError):
        replace_bookie(metadata, 0, 1, "x", "e")  # no longer there
    with pytest.raises(ValueError):
        replace_bookie(metadata, 0, 1, "b", "c")  # already in the segment


def test_only_final_fragments_are_checked() -> None:
    assert checkable_last_entry(striped_ledger()) == 9
    open_ledger = striped_ledger(closed_at=None)
    assert open_ledger.state is LedgerState.OPEN
    assert checkable_last_entry(open_ledger) == 4


def test_lost_bookie_delay() -> None:
    lost = update_lost({}, {"a", "b"}, now=10.0)
    lost = update_lost(lost, {"a"}, now=12.0)  # b came back
    assert lost == {"a": 10.0}
    assert due_bookies(lost, 12.0, delay_s=5) == set()
    assert due_bookies(lost, 15.0, delay_s=5) == {"a"}
    assert due_bookies(lost, 10.0, delay_s=0) == {"a"}
