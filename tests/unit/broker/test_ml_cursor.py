"""ManagedCursor logic on a ledger list without bookies: non-durable cursors, reset, backlog,
and the persistence of durable cursors (coalesced, rate-limited, bounded ranges) against an
in-process metadata store."""

from __future__ import annotations

import itertools
import json
import logging
import time

import pytest

from minipulsar.broker.managed_ledger import metrics
from minipulsar.broker.managed_ledger.cursor import ManagedCursor
from minipulsar.broker.managed_ledger.info import LedgerInfo
from minipulsar.broker.managed_ledger.position import Entry, Position
from minipulsar.broker.managed_ledger.position_info import CursorPosition, decode_position_info
from minipulsar.errors import ConnectionClosedError, LedgerFencedError
from minipulsar.metadata.memory import MemoryMetadataStore
from tests.support.broker_fakes import closed_ledger
from tests.support.memory_bookies import MemoryBookies
from tests.support.process import wait_for


class CountingStore(MemoryMetadataStore):
    """The real in-process store, recording when each write happened."""

    def __init__(self) -> None:
        super().__init__()
        self.put_times_s: list[float] = []

    async def put(self, path, value, expected_version=None, *, ephemeral=False):
        self.put_times_s.append(time.monotonic())
        return await super().put(path, value, expected_version, ephemeral=ephemeral)


async def test_non_durable_cursor_starts_latest_earliest_or_at_a_position() -> None:
    ledger = closed_ledger(3, 2)
    latest = ManagedCursor.open_non_durable(ledger, "r1", None)
    assert not latest.has_more_entries() and latest.active and not latest.durable
    earliest = ManagedCursor.open_non_durable(ledger, "r2", Position(-1, -1))
    assert earliest.read_position == Position(10, 0) and earliest.backlog_entries == 5
    inclusive = ManagedCursor.open_non_durable(ledger, "r3", Position(10, 2))
    exclusive = ManagedCursor.open_non_durable(ledger, "r4", Position(10, 2), inclusive=False)
    assert inclusive.read_position == Position(10, 2) and exclusive.read_position == Position(11, 0)
    trimmed = ManagedCursor.open_non_durable(ledger, "r5", Position(3, 7), inclusive=False)
    assert trimmed.read_position == Position(10, 0), "a start that no longer exists begins at the first entry"
    assert len(ledger.cursors) == 5


async def test_reset_acknowledges_everything_before_the_position_and_clears_holes() -> None:
    ledger = closed_ledger(5, 5)
    cursor = ManagedCursor(ledger, "sub", None, Position(10, -1))
    await cursor.acknowledge([Position(11, 3), Position(10, 1)])
    await cursor.reset(Position(11, 0))
    assert cursor.mark_delete == Position(11, -1) and not cursor.individually_deleted
    assert cursor.read_position == Position(11, 0) and cursor.backlog_entries == 5
    await cursor.reset(Position(10, 2))
    assert cursor.mark_delete == Position(10, 1) and cursor.backlog_entries == 8, "seek backwards un-acks"
    await cursor.reset(Position(99, 0))
    assert cursor.backlog_entries == 0 and cursor.mark_delete == ledger.last_confirmed, "past the tail: latest"


async def test_a_cumulative_ack_past_the_read_position_moves_it() -> None:
    ledger = closed_ledger(5)
    cursor = ManagedCursor(ledger, "sub", None, Position(10, -1))
    await cursor.acknowledge_cumulative(Position(10, 2))
    assert cursor.read_position == Position(10, 3)


async def test_non_durable_cursor_skips_trimmed_ledgers() -> None:
    ledger = closed_ledger(5, 5)
    reader = ManagedCursor.open_non_durable(ledger, "r", Position(10, 0))
    await reader.acknowledge([Position(10, 4)])
    ledger._ledgers.replace([LedgerInfo(11, entries=5)])
    reader.skip_trimmed(ledger.first_position)
    assert reader.mark_delete == Position(11, -1) and reader.read_position == Position(11, 0)
    assert not reader.individually_deleted and reader.backlog_entries == 5


def persisted(bookies: MemoryBookies, cursor: ManagedCursor) -> CursorPosition:
    """The cursor's newest position as its cursor ledger holds it."""
    assert cursor.persistence is not None
    return decode_position_info(bookies.last_entry(cursor.persistence.ledger_id))


async def test_acks_waiting_for_durability_are_written_at_once_despite_the_rate_limit() -> None:
    store, bookies = CountingStore(), MemoryBookies()
    ledger = closed_ledger(100, store=store, bookies=bookies, mark_delete_rate_limit=0.2)  # one write per 5 s
    cursor = await ManagedCursor.open(ledger, "sub", store, start_at_earliest=True)
    started_s = time.monotonic()
    for entry_id in range(5):
        await cursor.acknowledge([Position(10, entry_id)])
    assert time.monotonic() - started_s < 1.0
    assert persisted(bookies, cursor).mark_delete == Position(10, 4)
    assert len(store.put_times_s) == 2, "the creation's position, the first ack's cursor ledger; then none"


async def test_acks_not_waited_for_are_coalesced_and_spaced_by_the_rate_limit() -> None:
    store, bookies = CountingStore(), MemoryBookies()
    ledger = closed_ledger(100, store=store, bookies=bookies, mark_delete_rate_limit=4.0)
    cursor = await ManagedCursor.open(ledger, "sub", store, start_at_earliest=True)
    for entry_id in range(50):
        await cursor.acknowledge([Position(10, entry_id)], wait_durable=False)
    await wait_for(lambda: cursor._persisted == cursor._changes, timeout_s=5, interval_s=0.01)
    times = writes = bookies.add_times_s  # the creation wrote the key alone
    assert 1 <= len(writes) <= 3, f"50 acks, {len(writes)} writes"
    assert all(b - a >= 0.24 for a, b in itertools.pairwise(times)), "4 writes/s at most"
    assert persisted(bookies, cursor).mark_delete == Position(10, 49)


async def test_ranges_beyond_the_bound_stay_in_memory_with_a_warning_and_a_count(caplog) -> None:
    store, bookies = MemoryMetadataStore(), MemoryBookies()
    ledger = closed_ledger(100, store=store, bookies=bookies, max_unacked_ranges_to_persist=3)
    cursor = await ManagedCursor.open(ledger, "sub", store, start_at_earliest=True)
    before = metrics.CURSOR_RANGES_OVER_LIMIT._value.get()
    with caplog.at_level(logging.WARNING, logger="minipulsar.broker.managed_ledger.cursor"):
        for entry_id in range(1, 20, 2):
            await cursor.acknowledge([Position(10, entry_id)])
    assert cursor.non_contiguous_deleted_ranges == 10 and cursor.unpersisted_ranges == 7
    assert len([r for r in caplog.records if "managedLedgerMaxUnackedRangesToPersist" in r.message]) == 1
    assert metrics.CURSOR_RANGES_OVER_LIMIT._value.get() - before == cursor.ranges_over_limit == 7
    stored = persisted(bookies, cursor).ranges
    assert stored == tuple((Position(10, e), Position(10, e)) for e in (1, 3, 5))
    reopened = await ManagedCursor.open(ledger, "sub", store, start_at_earliest=True)
    assert reopened.is_acked(Position(10, 5)) and not reopened.is_acked(Position(10, 7)), (
        "the ranges not persisted are delivered again after a restart"
    )


async def test_closing_a_cursor_writes_its_pending_changes_into_the_key_and_deletes_its_ledger() -> None:
    store, bookies = MemoryMetadataStore(), MemoryBookies()
    ledger = closed_ledger(10, store=store, bookies=bookies, mark_delete_rate_limit=0.01)
    cursor = await ManagedCursor.open(ledger, "sub", store, start_at_earliest=True)
    await cursor.acknowledge_cumulative(Position(10, 2))  # the first persisted change: a cursor ledger
    [cursor_ledger] = bookies.created
    await cursor.acknowledge_cumulative(Position(10, 6), wait_durable=False)  # held back by the rate
    await cursor.close()
    stored = json.loads((await store.get(cursor.path)).value)
    assert stored["markDeleteEntryId"] == 6 and stored["cursorsLedgerId"] == -1
    assert bookies.deleted == [cursor_ledger] and not bookies.ledgers
    assert cursor not in ledger.cursors


async def test_a_fenced_cursor_never_writes_the_key_the_next_owner_read() -> None:
    """Goal: a broker that lost a topic (its session expired) and wakes cannot overwrite the
    cursor key the next owner recovered from — not by a fallback, not by its clean close — so
    the next owner's compare-and-set still holds (the CI failure: BadVersion on its first ack)."""
    store, bookies = MemoryMetadataStore(), MemoryBookies()
    old_ledger = closed_ledger(10, store=store, bookies=bookies)
    old = await ManagedCursor.open(old_ledger, "sub", store, start_at_earliest=True)
    await old.acknowledge_cumulative(Position(10, 2))
    old_ledger.fence(LedgerFencedError("metadata session lost"))

    new_ledger = closed_ledger(10, store=store, bookies=bookies)
    new = await ManagedCursor.open(new_ledger, "sub", store, start_at_earliest=True)  # fences old's ledger
    assert new.mark_delete == Position(10, 2)
    key_version = (await store.get(old.path)).version

    with pytest.raises(LedgerFencedError):
        await old.acknowledge_cumulative(Position(10, 5))  # the bookies refuse; no fallback to the key
    await old_ledger.close()
    assert (await store.get(old.path)).version == key_version, "the fenced cursor wrote the key"

    await new.acknowledge_cumulative(Position(10, 3))
    reopened = await ManagedCursor.open(closed_ledger(10, store=store, bookies=bookies), "sub", store, True)
    assert reopened.mark_delete == Position(10, 3)


@pytest.mark.parametrize("max_bytes", [None, 250])
async def test_reads_come_from_the_cache_and_count_tailing_hits(max_bytes) -> None:
    ledger = closed_ledger(4)
    ledger.cache.max_bytes = 1 << 20
    for entry_id in range(4):
        ledger._ledger_cache.insert(Entry(Position(10, entry_id), bytes(100), 1))
    cursor = ManagedCursor.open_non_durable(ledger, "r", Position(10, 0))
    entries = await cursor.read_entries(10, max_bytes=max_bytes)
    assert len(entries) == (4 if max_bytes is None else 2)
    assert cursor.cache_hits_tailing == len(entries) and cursor.cache_misses == 0
    assert ledger.cache_hits == len(entries) and ledger.cache.hits == len(entries)


class LosesAnswers(MemoryMetadataStore):
    """The next ``cut`` writes are applied, then reported cut off by a dropped connection."""

    cut = 0

    async def put(self, path, value, expected_version=None, *, ephemeral=False):
        stat = await super().put(path, value, expected_version, ephemeral=ephemeral)
        if self.cut > 0:
            self.cut -= 1
            raise ConnectionClosedError(f"connection lost before the write to {path} was answered")
        return stat


async def test_a_cursor_key_write_whose_answer_was_lost_does_not_wedge_the_cursor() -> None:
    """Goal: a lost connection without expiry keeps serving: the cursor's compare-and-set of its
    key that was applied but never answered is recognised as its own (read back), so the key
    writes after it (here the clean close) succeed. (Retrying at the old version got BadVersion
    from its own write and every later key write failed: a consumer with ack receipts stalled
    after a ZooKeeper leader kill.)"""
    store, bookies = LosesAnswers(), MemoryBookies()
    ledger = closed_ledger(100, store=store, bookies=bookies)
    store.cut = 1  # the key write that names the first cursor ledger
    cursor = await ManagedCursor.open(ledger, "sub", store, start_at_earliest=True)
    for entry_id in range(5):
        await cursor.acknowledge([Position(10, entry_id)])
    assert persisted(bookies, cursor).mark_delete == Position(10, 4)
    await cursor.close()
    assert json.loads((await store.get(cursor.path)).value)["markDeleteEntryId"] == 4
    await store.close()
