"""The write cache: one half's accounting and order, and the double buffer of a ledger dir —
bounded admission, waiting for room (throttling), swaps, and the sorted flush."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from minipulsar.bookie.storage import metrics
from minipulsar.bookie.storage.entry_log import split_location
from minipulsar.bookie.storage.single_directory import SingleDirectoryDbLedgerStorage, StorageSettings
from minipulsar.bookie.storage.write_cache import ENTRY_OVERHEAD_BYTES, WriteCache
from minipulsar.errors import BookieReadOnlyError, TooManyRequestsError
from tests.support.bookie_storage import open_single_directory
from tests.support.process import wait_for

KIB = 1024


def test_put_get_and_a_replacing_put_keep_the_size_exact() -> None:
    cache = WriteCache()
    cache.put(1, 0, b"a" * 100)
    cache.put(1, 1, b"b" * 50)
    assert (cache.count, cache.size_bytes) == (2, 150 + 2 * ENTRY_OVERHEAD_BYTES)
    cache.put(1, 0, b"c" * 10)
    assert cache.get(1, 0) == b"c" * 10 and cache.get(1, 2) is None and cache.get(9, 0) is None
    assert (cache.count, cache.size_bytes) == (2, 60 + 2 * ENTRY_OVERHEAD_BYTES)
    cache.clear()
    assert (cache.count, cache.size_bytes, cache.get(1, 1)) == (0, 0, None)


def test_sorted_entries_come_by_ledger_then_entry() -> None:
    cache = WriteCache()
    for ledger_id, entry_id in [(9, 3), (2, 7), (9, 0), (2, 1), (5, 0), (2, 4)]:
        cache.put(ledger_id, entry_id, bytes([ledger_id, entry_id]))
    expected = [(2, 1), (2, 4), (2, 7), (5, 0), (9, 0), (9, 3)]
    assert [(ledger, entry) for ledger, entry, _ in cache.sorted_entries()] == expected


def test_admission_is_bounded_by_the_active_half(tmp_path: Path) -> None:
    """Goal: reservations plus the active half never exceed half of dbStorage_writeCacheMaxSizeMb;
    a full half asks for a flush."""
    flushes: list = []
    directory = open_single_directory(tmp_path, 20 * KIB, flushes)
    entry = 1000
    admitted = 0
    while directory.try_admit(entry):
        admitted += 1
    assert admitted == 10 * KIB // (entry + ENTRY_OVERHEAD_BYTES)
    assert not flushes, "nothing to flush yet: the room is reserved, not filled"
    for entry_id in range(admitted):
        directory.add_entry(1, entry_id, entry_id - 1, bytes(entry))
    assert not directory.try_admit(entry)
    assert flushes, "an add refused by a filled active half asks for a flush"
    directory.swap()
    assert directory.try_admit(entry), "a swap gives the active half's room back"
    directory.close()


def test_an_entry_larger_than_a_half_is_admitted_into_an_empty_half(tmp_path: Path) -> None:
    directory = open_single_directory(tmp_path, 8 * KIB)
    assert directory.try_admit(100 * KIB)
    assert not directory.try_admit(1)
    directory.close()


async def test_an_add_waits_for_room_until_a_swap_and_is_counted_as_throttled(tmp_path: Path) -> None:
    directory = open_single_directory(tmp_path, 8 * KIB)
    assert directory.try_admit(3 * KIB)
    directory.add_entry(1, 0, -1, bytes(3 * KIB))
    throttled_before = metrics.THROTTLED_WRITE_REQUESTS._value.get()
    waiting = asyncio.ensure_future(directory.admit(3 * KIB))
    later = asyncio.ensure_future(directory.admit(10))
    await wait_for(lambda: len(directory._waiters) == 2, 5, message="both adds wait for room")
    assert not waiting.done() and not later.done(), "no room until the active half is swapped out"
    assert not directory.try_admit(10), "first come, first served: a newcomer may not overtake"
    directory.swap()
    await asyncio.wait_for(asyncio.gather(waiting, later), 5)
    assert metrics.THROTTLED_WRITE_REQUESTS._value.get() == throttled_before + 2
    directory.close()


async def test_a_cancelled_admission_gives_its_room_to_the_next_waiter(tmp_path: Path) -> None:
    directory = open_single_directory(tmp_path, 8 * KIB)
    assert directory.try_admit(3 * KIB)
    waiting = asyncio.ensure_future(directory.admit(2 * KIB))
    await wait_for(lambda: len(directory._waiters) == 1, 5, message="the add waits for room")
    assert not waiting.done()
    directory.cancel_admission(3 * KIB)  # e.g. the journal refused the first add
    await asyncio.wait_for(waiting, 5)
    directory.close()


async def test_an_add_without_room_within_max_throttle_time_is_refused_and_the_next_one_moves_up(
    tmp_path: Path,
) -> None:
    """Goal: BookKeeper's dbStorage_maxThrottleTimeMs — an add that waited that long for room
    (the flush slow or failing) is refused with TooManyRequests and counted as rejected, and
    the add queued behind it is admitted at once if it fits. Method: a 4 KiB half holding
    3 KiB; a 3 KiB add waits and is refused after 0.2 s; a 100-byte add behind it then fits."""
    directory = SingleDirectoryDbLedgerStorage(
        tmp_path, StorageSettings(write_cache_max_bytes=8 * KIB, max_throttle_s=0.2)
    )
    directory.open()
    assert directory.try_admit(3 * KIB)
    directory.add_entry(1, 0, -1, bytes(3 * KIB))
    rejected_before = metrics.REJECTED_WRITE_REQUESTS._value.get()
    started = time.monotonic()
    big = asyncio.ensure_future(directory.admit(3 * KIB))
    small = asyncio.ensure_future(directory.admit(100))
    with pytest.raises(TooManyRequestsError, match="dbStorage_maxThrottleTimeMs"):
        await asyncio.wait_for(big, 5)
    await asyncio.wait_for(small, 5)
    assert time.monotonic() - started >= 0.2
    assert metrics.REJECTED_WRITE_REQUESTS._value.get() == rejected_before + 1
    directory.close()


async def test_refusing_the_waiting_adds_spares_recovery_adds(tmp_path: Path) -> None:
    """Goal: when the bookie turns read-only the adds waiting for room (not journaled yet) are
    refused at once, except recovery adds, which ledger recovery needs; those get room later."""
    directory = open_single_directory(tmp_path, 8 * KIB)
    assert directory.try_admit(3 * KIB)
    directory.add_entry(1, 0, -1, bytes(3 * KIB))
    plain = asyncio.ensure_future(directory.admit(2 * KIB))
    recovery = asyncio.ensure_future(directory.admit(2 * KIB, recovery=True))
    await wait_for(lambda: len(directory._waiters) == 2, 5, message="both adds wait for room")
    assert directory.refuse_waiting(lambda: BookieReadOnlyError("read-only")) == 1
    with pytest.raises(BookieReadOnlyError):
        await asyncio.wait_for(plain, 5)
    assert not recovery.done()
    directory.swap()
    await asyncio.wait_for(recovery, 5)
    directory.close()


def test_reads_see_entries_in_both_halves_and_after_the_flush(tmp_path: Path) -> None:
    directory = open_single_directory(tmp_path, 128 * KIB)
    for entry_id in range(6):
        assert directory.try_admit(10)
        directory.add_entry(3, entry_id, entry_id - 1, bytes([entry_id]) * 10)
        if entry_id == 2:
            batch = directory.swap()
    assert [e for e, _ in directory.read_entries(3, 0, 10, 1 << 20)] == list(range(6))
    directory.flush(batch)
    directory.flush_completed(batch)
    assert directory.read_entries(3, 0, 10, 1 << 20) == [(i, bytes([i]) * 10) for i in range(6)]
    assert directory.entry_count == 6
    directory.close()


def test_a_flush_writes_the_entries_sorted_by_ledger_then_entry(tmp_path: Path) -> None:
    directory = open_single_directory(tmp_path, 128 * KIB)
    order = [(7, 2), (3, 1), (7, 0), (3, 0), (7, 1), (5, 0)]
    for ledger_id, entry_id in order:
        directory.try_admit(100)
        directory.add_entry(ledger_id, entry_id, -1, bytes(100))
    batch = directory.swap()
    directory.flush(batch)
    directory.flush_completed(batch)
    offsets = {key: split_location(directory._locations.get(*key))[1] for key in order}
    assert sorted(offsets, key=offsets.get) == sorted(order)
    directory.close()


async def test_an_add_whose_flush_request_swapped_at_once_is_admitted_at_once(tmp_path: Path) -> None:
    """Goal: when an add finds no room and its flush request swaps the halves on the spot (no
    checkpoint running), the add is admitted into the now empty half — it waited for a wake-up
    that had already happened, and was refused after dbStorage_maxThrottleTimeMs."""
    holder: list[SingleDirectoryDbLedgerStorage] = []
    directory = SingleDirectoryDbLedgerStorage(
        tmp_path,
        StorageSettings(write_cache_max_bytes=8 * KIB, max_throttle_s=30.0),
        request_flush=lambda: holder[0].swap(),  # noqa: PLW0108 -- holder[0] is set below
    )
    holder.append(directory)
    directory.open()
    assert directory.try_admit(3 * KIB)
    directory.add_entry(1, 0, -1, bytes(3 * KIB))
    await asyncio.wait_for(directory.admit(2 * KIB), 5)
    directory.close()


@pytest.mark.parametrize("refusal", ["read-only", "max-throttle-time"])
async def test_a_refused_add_cancelled_before_it_resumes_gives_back_no_room(tmp_path: Path, refusal: str) -> None:
    """Goal: an add refused while it waited for room (the bookie turned read-only, or
    dbStorage_maxThrottleTimeMs passed) and cancelled before it resumed (its connection
    closed in the same loop turn) had no room reserved and gives none back: the reservations
    stayed negative, and the write cache's bound was off for good."""
    directory = SingleDirectoryDbLedgerStorage(
        tmp_path, StorageSettings(write_cache_max_bytes=8 * KIB, max_throttle_s=30.0)
    )
    directory.open()
    assert directory.try_admit(3 * KIB)
    directory.add_entry(1, 0, -1, bytes(3 * KIB))
    waiting = asyncio.ensure_future(directory.admit(2 * KIB))
    await wait_for(lambda: len(directory._waiters) == 1, 5)
    if refusal == "read-only":
        directory.refuse_waiting(lambda: BookieReadOnlyError("read-only"))
    else:
        directory._reject(directory._waiters[0])
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert directory._reserved == 0
    directory.swap()
    assert directory.try_admit(100)
    directory.cancel_admission(100)  # e.g. the journal refused it: asserted the bound before
    assert directory._reserved == 0
    directory.close()
