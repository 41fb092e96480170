"""Ledger recovery with ensemble change, over in-memory bookies (tests/support/fake_bookies.py)
and an in-memory metadata store: a failed bookie of the last ensemble is replaced from the first
recovered entry, the replacement holds the whole recovered tail before the new segment is
stored, a failed bookie is never chosen again, and racing recoverers or the old writer never
produce two different closes or lose an acknowledged entry."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from minipulsar.bookkeeper import recovery
from minipulsar.bookkeeper.ledger_handle import LedgerHandle
from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata, LedgerState, ledger_path
from minipulsar.bookkeeper.ledger_reader import LedgerReader
from minipulsar.bookkeeper.recovery import LedgerRecoveryOp, read_last_add_confirmed, recover_ledger
from minipulsar.errors import LedgerFencedError, MiniPulsarError, NotEnoughBookiesError, PersistenceError
from minipulsar.metadata.memory import MemoryMetadataStore
from minipulsar.metadata.store import NOT_EXISTS
from tests.support.fake_bookies import FakeBookies, fake_context

LEDGER = 7


def payload_of(entry_id: int) -> bytes:
    return b"entry-%d" % entry_id


async def stored_open_ledger(
    store: MemoryMetadataStore, ensemble: tuple[str, ...], quorums: tuple[int, int, int] = (2, 2, 2)
) -> LedgerMetadata:
    size, write_quorum, ack_quorum = quorums
    metadata = LedgerMetadata(LEDGER, size, write_quorum, ack_quorum, ((0, ensemble),))
    stat = await store.put(ledger_path(LEDGER), metadata.to_bytes(), NOT_EXISTS)
    return replace(metadata, version=stat.version)


def write_as_writer(bookies: FakeBookies, metadata: LedgerMetadata, last_entry_id: int) -> None:
    """Entries 0..last on their write sets, packaged with their digest as the writer does,
    each carrying the previous entry as its LAC."""
    digest = metadata.digest_manager()
    length = 0
    for entry_id in range(last_entry_id + 1):
        length += len(payload_of(entry_id))
        data = digest.package(entry_id, entry_id - 1, length, payload_of(entry_id))
        for bookie in metadata.write_set(entry_id):
            bookies.put(bookie, LEDGER, {entry_id: data}, lac=entry_id - 1)


async def stored_metadata(store: MemoryMetadataStore) -> LedgerMetadata:
    current = await store.get(ledger_path(LEDGER))
    assert current is not None
    return LedgerMetadata.from_bytes(LEDGER, current.value, current.version)


async def read_ledger_back(bookies: FakeBookies, store: MemoryMetadataStore, closed: LedgerMetadata) -> list[bytes]:
    reader = LedgerReader(fake_context(bookies, store))
    return [payload for _, payload in await reader.read(closed, 0, closed.last_entry_id)]


@pytest.mark.parametrize("dead_position", [0, 1])
async def test_dead_bookie_is_replaced_from_the_first_recovered_entry(dead_position: int) -> None:
    """2/2/2 on b1,b2 with entries 0..9 (bookie LAC 8); the bookie at ``dead_position`` is down but
    still registered: the tail (entry 9) goes to b2's survivor and the spare b3, in a segment
    from entry 9 stored while IN_RECOVERY; the ledger closes at 9; entries 0..8 stay where they
    were and read from the survivor."""
    store = MemoryMetadataStore()
    bookies = FakeBookies(["b1", "b2", "b3"])
    metadata = await stored_open_ledger(store, ("b1", "b2"))
    write_as_writer(bookies, metadata, 9)
    dead = ("b1", "b2")[dead_position]
    survivor = ("b1", "b2")[1 - dead_position]
    bookies[dead].down = True

    op = LedgerRecoveryOp(metadata, fake_context(bookies, store))
    closed = await op.run()

    expected_ensemble = ("b3", "b2") if dead_position == 0 else ("b1", "b3")
    assert closed.state is LedgerState.CLOSED and closed.last_entry_id == 9
    assert closed.ensembles == ((0, ("b1", "b2")), (9, expected_ensemble))
    assert await stored_metadata(store) == closed
    assert bookies["b3"].entry_ids(LEDGER) == [9], "only the recovered tail is written to the replacement"
    assert bookies[survivor].ledgers[LEDGER].fenced
    assert op.ensemble_changes == 1 and op.failed == {dead}
    assert await read_ledger_back(bookies, store, closed) == [payload_of(e) for e in range(10)]


async def test_a_hung_bookie_is_replaced_after_the_fence_grace_not_a_request_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """b1 takes requests and never answers: the fence goes on with b2 (coverage), waits the
    straggler grace for b1, then counts it failed, so the tail goes to b2 and b3 at once."""
    monkeypatch.setattr(recovery, "FENCE_STRAGGLER_GRACE_S", 0.05)
    store = MemoryMetadataStore()
    bookies = FakeBookies(["b1", "b2", "b3"])
    metadata = await stored_open_ledger(store, ("b1", "b2"))
    write_as_writer(bookies, metadata, 9)
    bookies["b1"].hung = True

    op = LedgerRecoveryOp(metadata, fake_context(bookies, store))
    closed = await asyncio.wait_for(op.run(), 5)

    assert op.failed == {"b1"}
    assert closed.last_entry_id == 9 and closed.ensembles[-1] == (9, ("b3", "b2"))
    assert not any(kind == "add" and bookie == "b1" for kind, bookie, _, _ in bookies.requests)


async def test_nothing_after_the_lac_closes_without_an_ensemble_change() -> None:
    """Every entry confirmed (LAC 9 on the survivor): nothing to re-write, so the dead bookie
    stays in the closed ledger's only segment and reads fail over to the survivor."""
    store = MemoryMetadataStore()
    bookies = FakeBookies(["b1", "b2", "b3"])
    metadata = await stored_open_ledger(store, ("b1", "b2"))
    write_as_writer(bookies, metadata, 9)
    bookies.put("b2", LEDGER, {}, lac=9)
    bookies["b1"].down = True

    closed = await recover_ledger(metadata, fake_context(bookies, store))

    assert closed.last_entry_id == 9 and closed.ensembles == ((0, ("b1", "b2")),)
    assert bookies["b3"].entry_ids(LEDGER) == []
    assert await read_ledger_back(bookies, store, closed) == [payload_of(e) for e in range(10)]


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
async def test_a_replacement_that_fails_is_replaced_again_and_never_chosen_twice(seed: int) -> None:
    """b1 (ensemble) and b3 (spare) down but registered, b4 up: whichever the policy picks first,
    the tail ends on b4 and b2, b3 is asked at most once, b1 never again after the fence."""
    store = MemoryMetadataStore()
    bookies = FakeBookies(["b1", "b2", "b3", "b4"])
    metadata = await stored_open_ledger(store, ("b1", "b2"))
    write_as_writer(bookies, metadata, 4)
    bookies["b1"].down = bookies["b3"].down = True

    closed = await recover_ledger(metadata, fake_context(bookies, store, seed=seed))

    assert closed.last_entry_id == 4
    assert closed.ensembles[-1] == (4, ("b4", "b2"))
    assert bookies["b4"].entry_ids(LEDGER) == [4]
    assert sum(1 for kind, bookie, _, _ in bookies.requests if kind == "add" and bookie == "b3") <= 1
    assert not any(kind == "add" and bookie == "b1" for kind, bookie, _, _ in bookies.requests)


async def test_a_bookie_failing_mid_tail_gets_the_whole_tail_re_written_to_its_replacement() -> None:
    """Entries 0..9, LAC 4: b2 takes the recovery adds of 5 and 6, then dies; its replacement b3
    gets 5..9 (the new segment starts at 5), stored once all of them have two copies."""
    store = MemoryMetadataStore()
    bookies = FakeBookies(["b1", "b2", "b3"])
    metadata = await stored_open_ledger(store, ("b1", "b2"))
    write_as_writer(bookies, metadata, 9)
    for bookie in ("b1", "b2"):
        bookies[bookie].ledgers[LEDGER].lac = 4
    bookies["b2"].dies_after_adds = 2

    closed = await recover_ledger(metadata, fake_context(bookies, store))

    assert closed.last_entry_id == 9
    assert closed.ensembles == ((0, ("b1", "b2")), (5, ("b1", "b3")))
    assert bookies["b3"].entry_ids(LEDGER) == [5, 6, 7, 8, 9]
    bookies["b2"].ledgers.clear()  # gone for good: every entry of the new segment is still on two bookies
    reader = LedgerReader(fake_context(bookies, store))
    for bookie in ("b1", "b3"):
        assert bookies[bookie].entry_ids(LEDGER)[-5:] == [5, 6, 7, 8, 9]
    assert [p for _, p in await reader.read(closed, 5, 9)] == [payload_of(e) for e in range(5, 10)]


async def test_a_long_tail_is_recovered_window_by_window_onto_the_replacement() -> None:
    """40 entries after the LAC (more than two read windows), b1 dead: all reach b3 and b2."""
    store = MemoryMetadataStore()
    bookies = FakeBookies(["b1", "b2", "b3"])
    metadata = await stored_open_ledger(store, ("b1", "b2"))
    write_as_writer(bookies, metadata, 49)
    for bookie in ("b1", "b2"):
        bookies[bookie].ledgers[LEDGER].lac = 9
    bookies["b1"].down = True

    closed = await recover_ledger(metadata, fake_context(bookies, store))

    assert closed.last_entry_id == 49 and closed.ensembles[-1] == (10, ("b3", "b2"))
    assert bookies["b3"].entry_ids(LEDGER) == list(range(10, 50))
    assert await read_ledger_back(bookies, store, closed) == [payload_of(e) for e in range(50)]


async def test_an_unreadable_entry_before_the_end_fails_recovery_one_after_it_does_not() -> None:
    """b1 dead; b2 cannot read entry 6 (I/O error). With entries 0..9 recovery cannot tell whether
    6 exists and fails rather than truncate; with entries 0..3 the end (4) comes first and the
    error on 6, read in the same window, does not matter."""
    for last_entry_id, closes_at in ((9, None), (3, 3)):
        store = MemoryMetadataStore()
        bookies = FakeBookies(["b1", "b2", "b3"])
        metadata = await stored_open_ledger(store, ("b1", "b2"))
        write_as_writer(bookies, metadata, last_entry_id)
        for bookie in ("b1", "b2"):
            bookies[bookie].ledgers[LEDGER].lac = 1
        bookies["b1"].down = True
        bookies["b2"].unreadable.add(6)
        if closes_at is None:
            with pytest.raises(PersistenceError, match="cannot tell whether entry 6 exists"):
                await recover_ledger(metadata, fake_context(bookies, store))
            assert (await stored_metadata(store)).state is LedgerState.IN_RECOVERY
        else:
            closed = await recover_ledger(metadata, fake_context(bookies, store))
            assert closed.last_entry_id == closes_at


async def test_striped_ensemble_replaces_the_dead_position_only() -> None:
    """3/2/2 on b1,b2,b3 with b2 down: entries 0..5, bookie LACs from the writer; the tail goes to
    the spare b4 at b2's position."""
    store = MemoryMetadataStore()
    bookies = FakeBookies(["b1", "b2", "b3", "b4"])
    metadata = await stored_open_ledger(store, ("b1", "b2", "b3"), (3, 2, 2))
    write_as_writer(bookies, metadata, 5)
    bookies["b2"].down = True

    closed = await recover_ledger(metadata, fake_context(bookies, store))

    assert closed.last_entry_id == 5
    start, ensemble = closed.ensembles[-1]
    assert ensemble == ("b1", "b4", "b3") and start <= 5
    assert await read_ledger_back(bookies, store, closed) == [payload_of(e) for e in range(6)]


@pytest.mark.parametrize("seeds", [(1, 2), (3, 4), (5, 6), (7, 8)])
async def test_racing_recoverers_close_the_ledger_once_and_agree(seeds: tuple[int, int]) -> None:
    """Two recoveries of the same ledger at once (different placement seeds, so different
    replacements): both return the one stored close, and every entry reads back."""
    store = MemoryMetadataStore()
    bookies = FakeBookies(["b1", "b2", "b3", "b4"])
    metadata = await stored_open_ledger(store, ("b1", "b2"))
    write_as_writer(bookies, metadata, 9)
    bookies["b1"].down = True

    first, second = await asyncio.gather(
        recover_ledger(metadata, fake_context(bookies, store, seed=seeds[0])),
        recover_ledger(metadata, fake_context(bookies, store, seed=seeds[1])),
    )

    stored = await stored_metadata(store)
    assert first == second == stored
    assert stored.is_closed and stored.last_entry_id == 9
    assert await read_ledger_back(bookies, store, stored) == [payload_of(e) for e in range(10)]


class CrashBeforeClose(Exception):
    """Stands for the recovering process dying between two metadata writes."""


class RecoveryDyingBeforeClose(LedgerRecoveryOp):
    async def _close(self, metadata, tail):  # type: ignore[no-untyped-def]
        raise CrashBeforeClose(f"died with metadata at version {metadata.version}")


async def test_recovery_after_a_recoverer_died_between_ensemble_change_and_close_keeps_every_entry() -> None:
    """A recoverer stores its recovery segment from entry 5 (b1 dead) and dies before closing. The
    next recoverer works from that segment, whose replacement b3 already holds the whole tail,
    so the replacement's answers cannot truncate the ledger: it closes at 9 with every entry."""
    store = MemoryMetadataStore()
    bookies = FakeBookies(["b1", "b2", "b3", "b4"])
    metadata = await stored_open_ledger(store, ("b1", "b2"))
    write_as_writer(bookies, metadata, 9)
    for bookie in ("b1", "b2"):
        bookies[bookie].ledgers[LEDGER].lac = 4
    bookies["b1"].down = True

    with pytest.raises(CrashBeforeClose):
        await RecoveryDyingBeforeClose(metadata, fake_context(bookies, store, seed=3)).run()
    half_done = await stored_metadata(store)
    assert half_done.state is LedgerState.IN_RECOVERY and half_done.ensembles[-1][0] == 5

    closed = await recover_ledger(half_done, fake_context(bookies, store, seed=4))

    assert closed.last_entry_id == 9
    assert await read_ledger_back(bookies, store, closed) == [payload_of(e) for e in range(10)]


async def test_the_old_writer_cannot_add_after_recovery_and_loses_no_acknowledged_entry() -> None:
    """A live writer acknowledged entries 0..9 (b1 and b2); b1 dies, another client recovers the
    ledger: the writer's next add fails (fenced, or its ensemble change loses the CAS), and the
    closed ledger holds all ten acknowledged entries."""
    store = MemoryMetadataStore()
    bookies = FakeBookies(["b1", "b2", "b3", "b4"])
    metadata = await stored_open_ledger(store, ("b1", "b2"))
    writer = LedgerHandle(metadata, fake_context(bookies, store), writable=True)
    acked = [await writer.add(payload_of(e)) for e in range(10)]
    bookies["b1"].down = True

    closed = await recover_ledger(metadata, fake_context(bookies, store, seed=2))
    with pytest.raises(MiniPulsarError) as failure:
        await writer.add(payload_of(10))

    assert isinstance(failure.value, LedgerFencedError)
    assert acked == list(range(10)) and closed.last_entry_id == 9
    assert await read_ledger_back(bookies, store, closed) == [payload_of(e) for e in range(10)]
    assert (await stored_metadata(store)) == closed


async def test_a_lost_cas_on_the_recovery_mark_rereads_and_goes_on() -> None:
    """The writer's ensemble change lands between our read of the metadata and our IN_RECOVERY
    mark: the mark's CAS fails, recovery re-reads and recovers the changed ledger."""
    store = MemoryMetadataStore()
    bookies = FakeBookies(["b1", "b2", "b3"])
    metadata = await stored_open_ledger(store, ("b1", "b2"))
    write_as_writer(bookies, metadata, 3)
    changed = replace(metadata, ensembles=(*metadata.ensembles, (4, ("b1", "b3"))))
    await store.put(ledger_path(LEDGER), changed.to_bytes(), metadata.version)

    closed = await recover_ledger(metadata, fake_context(bookies, store))

    assert closed.ensembles == changed.ensembles and closed.last_entry_id == 3
    assert await read_ledger_back(bookies, store, closed) == [payload_of(e) for e in range(4)]


async def test_no_bookie_to_replace_the_dead_one_fails_recovery_and_leaves_it_in_recovery() -> None:
    """Two bookies at 2/2/2, one down: there is no replacement, recovery fails (the caller retries
    later) and the stored metadata is IN_RECOVERY with its one segment."""
    store = MemoryMetadataStore()
    bookies = FakeBookies(["b1", "b2"])
    metadata = await stored_open_ledger(store, ("b1", "b2"))
    write_as_writer(bookies, metadata, 3)
    bookies["b1"].down = True

    with pytest.raises(NotEnoughBookiesError):
        await recover_ledger(metadata, fake_context(bookies, store))

    stored = await stored_metadata(store)
    assert stored.state is LedgerState.IN_RECOVERY and stored.ensembles == metadata.ensembles


async def test_no_spare_bookie_is_fine_when_the_others_make_the_ack_quorum() -> None:
    """3/3/2 on the only three bookies, b3 down: no replacement exists, but b1 and b2 make Qa, so
    the ledger closes with every entry and without an ensemble change."""
    store = MemoryMetadataStore()
    bookies = FakeBookies(["b1", "b2", "b3"])
    metadata = await stored_open_ledger(store, ("b1", "b2", "b3"), (3, 3, 2))
    write_as_writer(bookies, metadata, 9)
    bookies["b3"].down = True

    closed = await recover_ledger(metadata, fake_context(bookies, store))

    assert closed.last_entry_id == 9 and closed.ensembles == metadata.ensembles
    assert await read_ledger_back(bookies, store, closed) == [payload_of(e) for e in range(10)]


async def test_lac_read_without_recovery_works_with_one_bookie_of_the_ensemble_down() -> None:
    """The open-without-recovery path: the LAC from the survivor, nothing fenced, the dead bookie
    reported as failed."""
    store = MemoryMetadataStore()
    bookies = FakeBookies(["b1", "b2", "b3"])
    metadata = await stored_open_ledger(store, ("b1", "b2"))
    write_as_writer(bookies, metadata, 9)
    bookies["b1"].down = True
    failed: set[str] = set()

    lac = await read_last_add_confirmed(metadata, fake_context(bookies, store).bookies, fence=False, failed=failed)

    assert lac == 8 and failed == {"b1"}
    assert not bookies["b2"].ledgers[LEDGER].fenced
