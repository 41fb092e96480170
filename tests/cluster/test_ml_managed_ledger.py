"""The managed ledger, its cursors and the entry cache, in the test process, against a real
metastore and a real bookie process: ledger rollover (entries, size, time, minimum age),
trimming under retention, cursor persistence with ranges, reset by position and by publish
time, and cache hits for tailing, non-durable and rewinding cursors."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from minipulsar.bookkeeper import BookKeeper, BookKeeperSettings
from minipulsar.broker.managed_ledger.config import ManagedLedgerConfig
from minipulsar.broker.managed_ledger.cursor import ManagedCursor
from minipulsar.broker.managed_ledger.entry_cache import EntryCache
from minipulsar.broker.managed_ledger.ledger import MAX_ADD_ATTEMPTS, ManagedLedger
from minipulsar.broker.managed_ledger.position import Position
from minipulsar.broker.managed_ledger.position_info import decode_position_info
from minipulsar.errors import MiniPulsarError
from minipulsar.metadata import MetadataStore, open_metadata_store
from minipulsar.protocol.batch import BatchMessage, decode_batch, encode_batch
from tests.support.process import ServerProcess, started, wait_for

TOPIC = "public/default/persistent/ml-test"
KEEP_FOREVER = {"retention_time_minutes": -1, "retention_size_mb": -1}


@dataclass
class Env:
    store: MetadataStore
    bookkeeper: BookKeeper
    cache: EntryCache

    async def open_ledger(self, name: str = TOPIC, **config) -> ManagedLedger:
        ledger = ManagedLedger(name, self.store, self.bookkeeper, self.cache, ManagedLedgerConfig(**config))
        await ledger.open()
        return ledger

    async def ledger_list(self, name: str = TOPIC) -> list[dict]:
        stored = await self.store.get(f"/managed-ledgers/{name}")
        return json.loads(stored.value)["ledgers"]

    async def ledger_exists(self, ledger_id: int) -> bool:
        return await self.store.get(f"/ledgers/L{ledger_id}") is not None


@pytest.fixture
async def env(tmp_path: Path, metastore: ServerProcess) -> AsyncIterator[Env]:
    bookie = ServerProcess(
        "bookie",
        [
            "--port",
            "0",
            "--http-port",
            "0",
            "--journal-dir",
            str(tmp_path / "bookie" / "journal"),
            "--ledger-dirs",
            str(tmp_path / "bookie" / "ledgers"),
            "--metadata-url",
            metastore.url,
            "--set",
            "zkTimeout=2000",
        ],
        tmp_path / "logs" / "bookie.log",
    )
    async with started(bookie):
        store = await open_metadata_store(metastore.url, session_timeout_ms=2000)
        bookkeeper = BookKeeper(store, BookKeeperSettings(timeout_s=10.0))
        await bookkeeper.start()
        cache = EntryCache(64 << 20, eviction_time_threshold_ms=60_000)
        try:
            yield Env(store, bookkeeper, cache)
        finally:
            await cache.stop()
            await bookkeeper.close()
            await store.close()


def batch_entry(i: int, size: int = 0, publish_time_ms: int = 0) -> bytes:
    return encode_batch(publish_time_ms, "p", [BatchMessage(i, b"m-%d" % i + bytes(size))])


async def read_to_end(cursor: ManagedCursor) -> list:
    entries = []
    while cursor.has_more_entries():
        entries += await cursor.read_entries(100)
    return entries


@contextlib.asynccontextmanager
async def opened(env: Env, **config) -> AsyncIterator[ManagedLedger]:
    ledger = await env.open_ledger(**config)
    try:
        yield ledger
    finally:
        await ledger.close()


# -- rollover -------------------------------------------------------------------------------------


async def test_rollover_by_entries_keeps_every_queued_add_in_order(env: Env) -> None:
    """Goal: at managedLedgerMaxEntriesPerLedger the ledger rolls; adds issued meanwhile are
    neither lost nor reordered. Method: 35 adds issued at once with 10 entries per ledger."""
    async with opened(env, max_entries_per_ledger=10, **KEEP_FOREVER) as ledger:
        cursor = await ManagedCursor.open(ledger, "sub", env.store, start_at_earliest=True)
        positions = await asyncio.gather(*(ledger.add_entry(batch_entry(i)) for i in range(35)))
        assert positions == sorted(positions) and len(set(positions)) == 35
        assert [info.entries for info in ledger.ledgers] == [10, 10, 10, None]
        assert [p.entry_id for p in positions[:12]] == [*range(10), 0, 1]
        entries = await read_to_end(cursor)
        assert [e.payload for e in entries] == [batch_entry(i) for i in range(35)]
        stored = await env.ledger_list()
        assert [item["entries"] for item in stored[:3]] == [10, 10, 10], "closed ledgers recorded in the ML info"


async def test_rollover_by_size(env: Env) -> None:
    """Goal: at managedLedgerMaxSizePerLedgerMbytes the ledger rolls after the entry that filled it."""
    async with opened(env, max_size_per_ledger_bytes=10_000, **KEEP_FOREVER) as ledger:
        for i in range(10):
            await ledger.add_entry(batch_entry(i, size=3_000))
        sizes = [info.size for info in ledger.ledgers if info.entries is not None]
        assert [info.entries for info in ledger.ledgers][:2] == [4, 4], "3 entries < 10 kB ≤ 4 entries"
        assert all(10_000 <= size < 13_000 for size in sizes)


async def test_rollover_by_time_and_never_before_the_minimum_age(env: Env) -> None:
    """Goal: a ledger rolls once managedLedgerMaxLedgerRolloverTimeMinutes passed (by the timer,
    without a write), and a full ledger waits for managedLedgerMinLedgerRolloverTimeMinutes."""
    async with opened(env, max_rollover_s=0.3, **KEEP_FOREVER) as ledger:
        await ledger.add_entry(batch_entry(0))
        first = ledger.ledgers[0]
        await wait_for(lambda: first.entries == 1, timeout_s=5, interval_s=0.02, message="not rolled by age")
        assert len(ledger.ledgers) == 1, "the next ledger is created on the next write"
        assert (await ledger.add_entry(batch_entry(1))).ledger_id != first.ledger_id
    # The minimum age leaves a loaded 2-core CI machine ample time for three adds.
    async with opened(env, name=TOPIC + "-min", max_entries_per_ledger=1, min_rollover_s=2.0, **KEEP_FOREVER) as ledger:
        started_s = time.monotonic()
        positions = [await ledger.add_entry(batch_entry(i)) for i in range(3)]
        assert time.monotonic() - started_s < 2.0
        assert len({p.ledger_id for p in positions}) == 1, "full at 1 entry, but younger than the minimum"
        await wait_for(
            lambda: ledger.ledgers[0].entries == 3,
            timeout_s=10,
            interval_s=0.02,
            message="not rolled once the minimum age passed",
        )


# -- trimming -------------------------------------------------------------------------------------


async def test_consumed_ledgers_are_trimmed_without_retention_and_kept_while_needed(env: Env) -> None:
    """Goal: with retention 0 a ledger every durable cursor consumed is deleted from the ML info
    and from the ledger metadata; a ledger a cursor still needs stays, its data readable."""
    async with opened(env, max_entries_per_ledger=5, retention_time_minutes=0, retention_size_mb=0) as ledger:
        fast = await ManagedCursor.open(ledger, "fast", env.store, start_at_earliest=True)
        slow = await ManagedCursor.open(ledger, "slow", env.store, start_at_earliest=True)
        positions = [await ledger.add_entry(batch_entry(i)) for i in range(17)]
        ids = sorted({p.ledger_id for p in positions})
        await fast.acknowledge_cumulative(positions[-1])
        await slow.acknowledge_cumulative(positions[7])  # inside the second ledger
        await wait_for(lambda: ledger.ledgers_trimmed == 1, timeout_s=5, message="ledger 1 not trimmed")
        assert not await env.ledger_exists(ids[0]) and await env.ledger_exists(ids[1])
        assert [item["ledgerId"] for item in await env.ledger_list()] == ids[1:]
        entries = await read_to_end(slow)
        assert [e.payload for e in entries[:2]] == [batch_entry(8), batch_entry(9)], "unacknowledged data still read"
        await slow.acknowledge_cumulative(positions[-1])
        await wait_for(lambda: ledger.ledgers_trimmed == len(ids) - 1, timeout_s=5, message="not trimmed")
        assert ledger.ledgers[0].ledger_id == ids[-1], "the current ledger is never trimmed"
        for ledger_id in ids[:-1]:
            assert not await env.ledger_exists(ledger_id)
        assert ledger.cached_entries == 0 or min(p.ledger_id for p in ledger._ledger_cache._entries) == ids[-1]


async def test_retention_keeps_consumed_ledgers(env: Env) -> None:
    """Goal: with retention -1/-1 consumed ledgers are kept and stay readable from the start."""
    async with opened(env, max_entries_per_ledger=5, **KEEP_FOREVER) as ledger:
        cursor = await ManagedCursor.open(ledger, "sub", env.store, start_at_earliest=True)
        positions = [await ledger.add_entry(batch_entry(i)) for i in range(12)]
        await cursor.acknowledge_cumulative(positions[-1])
        assert await ledger.trim_consumed_ledgers() == []
        assert len(ledger.ledgers) == 3
        reader = ManagedCursor.open_non_durable(ledger, "reader", Position(-1, -1))
        assert len(await read_to_end(reader)) == 12


async def test_non_durable_cursors_hold_nothing_and_skip_forward(env: Env) -> None:
    """Goal: a reader behind the data does not prevent trimming; it skips to the first entry left."""
    async with opened(env, max_entries_per_ledger=4, retention_time_minutes=0, retention_size_mb=0) as ledger:
        durable = await ManagedCursor.open(ledger, "sub", env.store, start_at_earliest=True)
        reader = ManagedCursor.open_non_durable(ledger, "reader", Position(-1, -1))
        positions = [await ledger.add_entry(batch_entry(i)) for i in range(10)]
        await durable.acknowledge_cumulative(positions[-1])
        await wait_for(lambda: len(ledger.ledgers) == 1, timeout_s=5, message="not trimmed")
        assert reader.read_position >= Position(ledger.ledgers[0].ledger_id, 0)
        assert [e.payload for e in await read_to_end(reader)] == [batch_entry(8), batch_entry(9)]


async def test_trimming_waits_for_durable_cursors_not_yet_opened(env: Env) -> None:
    """Goal: after a restart, before its subscriptions are re-opened, the managed ledger keeps
    what their stored positions still need."""
    async with opened(env, max_entries_per_ledger=3, **KEEP_FOREVER) as ledger:
        await ManagedCursor.open(ledger, "sub", env.store, start_at_earliest=True)
        for i in range(7):
            await ledger.add_entry(batch_entry(i))
    async with opened(env, max_entries_per_ledger=3, retention_time_minutes=0, retention_size_mb=0) as ledger:
        assert ledger.cursors == []
        assert await ledger.trim_consumed_ledgers() == []
        cursor = await ManagedCursor.open(ledger, "sub", env.store, start_at_earliest=True)
        assert [e.payload for e in await read_to_end(cursor)] == [batch_entry(i) for i in range(7)]


# -- cursors --------------------------------------------------------------------------------------


async def test_individual_acks_persist_as_ranges_within_the_bound(env: Env) -> None:
    """Goal: out-of-order acks survive a reopen as ranges; beyond managedLedgerMaxUnackedRangesToPersist
    only the first ranges are stored and the rest is delivered again (never lost)."""
    async with opened(env, max_unacked_ranges_to_persist=4, **KEEP_FOREVER) as ledger:
        cursor = await ManagedCursor.open(ledger, "sub", env.store, start_at_earliest=True)
        positions = [await ledger.add_entry(batch_entry(i)) for i in range(20)]
        await cursor.acknowledge([p for i, p in enumerate(positions) if i % 4 in (1, 2)])  # 5 ranges of 2
        assert cursor.non_contiguous_deleted_ranges == 5 and cursor.unpersisted_ranges == 1
        assert cursor.persistence is not None
        handle = await env.bookkeeper.open_ledger(cursor.persistence.ledger_id, recovery=True)  # the LAC: all
        [(_, entry)] = await handle.read(handle.last_entry_id, handle.last_entry_id)
        assert len(decode_position_info(entry).ranges) == 4, "the cursor ledger's last entry holds the first 4"
    async with opened(env, **KEEP_FOREVER) as ledger:
        cursor = await ManagedCursor.open(ledger, "sub", env.store, start_at_earliest=True)
        redelivered = [decode_batch(e.payload).messages[0].sequence_id for e in await read_to_end(cursor)]
        assert redelivered == [0, 3, 4, 7, 8, 11, 12, 15, 16, 17, 18, 19], "17, 18 were acked but not stored"
        assert cursor.backlog_entries == 12


async def test_reset_by_position_and_by_publish_time(env: Env) -> None:
    """Goal: SEEK by message id and by timestamp: the cursor reads from that entry on, the
    entries before it count as acknowledged, durably."""
    async with opened(env, max_entries_per_ledger=4, **KEEP_FOREVER) as ledger:
        cursor = await ManagedCursor.open(ledger, "sub", env.store, start_at_earliest=True)
        positions = [await ledger.add_entry(batch_entry(i, publish_time_ms=1000 * (i + 1))) for i in range(10)]
        assert await ledger.find_position_by_publish_time(0) == positions[0]
        assert await ledger.find_position_by_publish_time(5000) == positions[4]
        assert await ledger.find_position_by_publish_time(5001) == positions[5], "first published at or after"
        assert await ledger.find_position_by_publish_time(99_999) > positions[-1], "after the tail"
        await cursor.reset(await ledger.find_position_by_publish_time(7000))
        assert [e.payload for e in await read_to_end(cursor)] == [
            batch_entry(i, publish_time_ms=1000 * (i + 1)) for i in range(6, 10)
        ]
        await cursor.reset(positions[2])
        assert cursor.backlog_entries == 8
    async with opened(env, **KEEP_FOREVER) as ledger:
        cursor = await ManagedCursor.open(ledger, "sub", env.store, start_at_earliest=True)
        assert cursor.mark_delete == Position(positions[2].ledger_id, positions[2].entry_id - 1)


# -- cursor ledgers -------------------------------------------------------------------------------


async def key_of(env: Env, cursor: ManagedCursor) -> tuple[int, dict]:
    stored = await env.store.get(cursor.path)
    assert stored is not None
    return stored.version, json.loads(stored.value)


async def test_acks_go_to_the_cursor_ledger_on_the_bookies_with_no_metadata_write(env: Env) -> None:
    """Goal: an ack that waits for durability costs one bookie write and no metadata write;
    the key names the cursor ledger, whose ledger metadata names the managed ledger and cursor."""
    async with opened(env, **KEEP_FOREVER) as ledger:
        cursor = await ManagedCursor.open(ledger, "sub", env.store, start_at_earliest=True)
        positions = [await ledger.add_entry(batch_entry(i)) for i in range(30)]
        await cursor.acknowledge([positions[0]])  # the first persisted change creates the cursor ledger
        version, key = await key_of(env, cursor)
        assert cursor.persistence is not None and key["cursorsLedgerId"] == cursor.persistence.ledger_id
        custom = (await env.bookkeeper.read_metadata(cursor.persistence.ledger_id)).custom
        assert custom == {"pulsar/managed-ledger": TOPIC, "pulsar/cursor": "sub"}
        for position in positions[1:]:
            await cursor.acknowledge([position])
        assert (await key_of(env, cursor))[0] == version, "29 durable acks, no metadata write"


async def test_cursor_ledgers_roll_over_by_entries_and_by_age(env: Env) -> None:
    """Goal: managedLedgerCursorMaxEntriesPerLedger and managedLedgerCursorRolloverTimeInSeconds
    switch the cursor to a new ledger (key by compare-and-set), and the old one is deleted."""
    async with opened(env, cursor_max_entries_per_ledger=5, cursor_rollover_time_s=0, **KEEP_FOREVER) as ledger:
        cursor = await ManagedCursor.open(ledger, "sub", env.store, start_at_earliest=True)
        assert cursor.persistence is not None
        await cursor.acknowledge([await ledger.add_entry(batch_entry(0))])  # creates the first cursor ledger
        first = cursor.persistence.ledger_id
        for i in range(1, 6):
            await cursor.acknowledge([await ledger.add_entry(batch_entry(i))])
        second = cursor.persistence.ledger_id
        assert second != first and (await key_of(env, cursor))[1]["cursorsLedgerId"] == second
        assert not await env.ledger_exists(first), "the old cursor ledger is deleted after the switch"
    async with opened(env, cursor_rollover_time_s=1, **KEEP_FOREVER) as ledger:
        cursor = await ManagedCursor.open(ledger, "sub", env.store, start_at_earliest=True)
        assert cursor.mark_delete.entry_id == 5 and cursor.persistence is not None
        await cursor.acknowledge([await ledger.add_entry(batch_entry(6))])
        third = cursor.persistence.ledger_id

        async def acked_into_a_new_ledger() -> bool:
            await cursor.acknowledge([await ledger.add_entry(batch_entry(7))])
            return cursor.persistence is not None and cursor.persistence.ledger_id != third

        await wait_for(acked_into_a_new_ledger, timeout_s=10, interval_s=0.2, message="no rollover by age")
        assert not await env.ledger_exists(third)


async def test_a_new_owner_recovers_the_last_entry_and_fences_the_old_owner(env: Env, metastore) -> None:
    """Goal: a broker that died without closing (as after SIGKILL) left its position only in its
    cursor ledger; the next owner opens that ledger with recovery, takes its last entry, and
    the old owner's next write to it is refused by the bookies."""
    old = await env.open_ledger(**KEEP_FOREVER)
    cursor = await ManagedCursor.open(old, "sub", env.store, start_at_earliest=True)
    positions = [await old.add_entry(batch_entry(i)) for i in range(10)]
    await cursor.acknowledge([positions[4], positions[7]])
    await cursor.acknowledge_cumulative(positions[2])
    assert cursor.persistence is not None and cursor.persistence._handle is not None
    old_handle = cursor.persistence._handle
    assert (await key_of(env, cursor))[1]["markDeleteEntryId"] == -1, "the key holds the creation's position"
    store = await open_metadata_store(metastore.url, session_timeout_ms=2000)
    bookkeeper = BookKeeper(store, BookKeeperSettings(timeout_s=10.0))
    await bookkeeper.start()
    try:
        new = ManagedLedger(TOPIC, store, bookkeeper, env.cache, ManagedLedgerConfig(**KEEP_FOREVER))
        await new.open()
        recovered = await ManagedCursor.open(new, "sub", store, start_at_earliest=True)
        assert recovered.mark_delete == positions[2]
        assert recovered.is_acked(positions[4]) and recovered.is_acked(positions[7])
        assert not recovered.is_acked(positions[3])
        with pytest.raises(MiniPulsarError):
            await old_handle.add(b"late")
        await recovered.acknowledge([positions[3]])
        await new.close()
        await old.close()  # its clean close loses the compare-and-set to the new owner's
        assert (await key_of(env, cursor))[1]["markDeleteEntryId"] == positions[4].entry_id
    finally:
        await old.close()
        await bookkeeper.close()
        await store.close()


# -- entry cache ----------------------------------------------------------------------------------


async def tail(ledger: ManagedLedger, cursor: ManagedCursor, count: int) -> None:
    """Publish ``count`` entries one by one, the cursor reading each as it arrives."""
    for i in range(count):
        await ledger.add_entry(batch_entry(i, size=100))
        while cursor.has_more_entries():
            await cursor.read_entries(10)


async def test_a_tailing_durable_cursor_reads_from_the_cache(env: Env) -> None:
    async with opened(env, **KEEP_FOREVER) as ledger:
        cursor = await ManagedCursor.open(ledger, "sub", env.store, start_at_earliest=False)
        await tail(ledger, cursor, 100)
        assert cursor.cache_hits_tailing >= 99 and cursor.cache_misses <= 1
        assert ledger.cache_hits / (ledger.cache_hits + ledger.cache_misses) > 0.95


async def test_a_non_durable_cursor_reads_from_the_cache(env: Env) -> None:
    async with opened(env, **KEEP_FOREVER) as ledger:
        reader = ManagedCursor.open_non_durable(ledger, "reader", None)
        await tail(ledger, reader, 100)
        assert reader.cache_hits_tailing == 100 and reader.cache_misses == 0


async def test_with_non_durable_cursors_inactive_a_topic_read_only_by_readers_caches_nothing(env: Env) -> None:
    """Goal: minipulsarNonDurableCursorsInactive shows Pulsar before PR 6769: a Reader's cursor is
    never active, so nothing written is cached and the Reader reads every entry from the bookies;
    a durable cursor still counts."""
    async with opened(env, non_durable_cursors_inactive=True, **KEEP_FOREVER) as ledger:
        reader = ManagedCursor.open_non_durable(ledger, "reader", None)
        await tail(ledger, reader, 50)
        assert reader.cache_hits == 0 and reader.cache_misses == 50
        assert ledger.cached_entries == 0
        durable = await ManagedCursor.open(ledger, "sub", env.store, start_at_earliest=False)
        await tail(ledger, durable, 50)
        assert durable.cache_hits_tailing >= 49


@pytest.mark.parametrize("by_mark_delete", [True, False])
async def test_a_cursor_rewinding_behind_its_read_position_hits_only_with_mark_delete_eviction(
    env: Env, by_mark_delete: bool
) -> None:
    """Goal: cacheEvictionByMarkDeletedPosition keeps read-but-unacknowledged entries cached, so a
    consumer that reconnects (rewinds to its mark-delete) still hits the cache; with the default
    eviction (what every active cursor has read) it misses."""
    async with opened(env, cache_evict_by_mark_delete=by_mark_delete, **KEEP_FOREVER) as ledger:
        cursor = await ManagedCursor.open(ledger, "sub", env.store, start_at_earliest=False)
        await tail(ledger, cursor, 40)
        await cursor.acknowledge_cumulative(
            ledger.last_confirmed._replace(entry_id=ledger.last_confirmed.entry_id - 30)
        )
        env.cache.evict()  # one round of the periodic eviction
        hits, misses = cursor.cache_hits, cursor.cache_misses
        cursor.rewind()  # the consumer reconnected: redeliver from the mark-delete position
        assert len(await read_to_end(cursor)) == 30
        if by_mark_delete:
            assert (cursor.cache_hits - hits, cursor.cache_misses - misses) == (30, 0)
        else:
            assert (cursor.cache_hits - hits, cursor.cache_misses - misses) == (0, 30)


async def test_catch_up_reads_are_misses_and_bounded_in_flight(env: Env) -> None:
    """Goal: a cursor far behind reads from the bookies, counted as catch-up misses; with
    managedLedgerMaxReadsInFlightSizeInMB tiny, concurrent reads wait for each other and all complete."""
    env.cache.reads_in_flight.max_bytes = 300
    async with opened(env, cursor_backlogged_threshold=10, **KEEP_FOREVER) as ledger:
        for i in range(50):
            await ledger.add_entry(batch_entry(i, size=100))
        readers = [ManagedCursor.open_non_durable(ledger, f"r{n}", Position(-1, -1)) for n in range(4)]
        results = await asyncio.gather(*(read_to_end(reader) for reader in readers))
        assert all(len(entries) == 50 for entries in results)
        assert all(reader.cache_misses_catch_up >= 40 for reader in readers)
        assert env.cache.reads_in_flight.waited > 0 and env.cache.reads_in_flight.in_flight_bytes == 0


async def test_an_add_failure_does_not_lose_queued_adds(env: Env) -> None:
    """Goal: when the current ledger fails, the failed adds go first, in order, on the next ledger."""
    async with opened(env, **KEEP_FOREVER) as ledger:
        first = await ledger.add_entry(batch_entry(0))
        handle = ledger._ledgers.current
        handle._fail(MiniPulsarError("simulated bookie write failure"))  # what a lost ensemble does
        positions = await asyncio.gather(*(ledger.add_entry(batch_entry(i)) for i in range(1, 6)))
        assert all(p.ledger_id != first.ledger_id for p in positions) and positions == sorted(positions)
        reader = ManagedCursor.open_non_durable(ledger, "r", Position(-1, -1))
        assert [e.payload for e in await read_to_end(reader)] == [batch_entry(i) for i in range(6)]


async def test_an_add_given_up_on_takes_every_add_behind_it_along(env: Env) -> None:
    """Goal: when an add's failure reaches its producer, no add issued after it is stored (a
    later one stored would leave a hole that deduplication then takes for a duplicate).
    Method: five adds in flight, the first one on its last attempt; the ledger fails."""
    async with opened(env, **KEEP_FOREVER) as ledger:
        await ledger.add_entry(batch_entry(0))
        adds = [ledger.add_entry(batch_entry(i)) for i in range(1, 6)]
        ledger._in_flight[0].attempts = MAX_ADD_ATTEMPTS - 1
        ledger._ledgers.current._fail(MiniPulsarError("simulated bookie write failure"))
        outcomes = await asyncio.gather(*adds, return_exceptions=True)
        assert all(isinstance(outcome, MiniPulsarError) for outcome in outcomes), outcomes
        await ledger.add_entry(batch_entry(6))
        reader = ManagedCursor.open_non_durable(ledger, "r", Position(-1, -1))
        assert [e.payload for e in await read_to_end(reader)] == [batch_entry(0), batch_entry(6)]
