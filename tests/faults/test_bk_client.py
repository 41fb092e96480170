"""The broker's BookKeeper client against real bookie processes: ensemble changes when a bookie
dies, clear failure when too few remain, fencing by a recovering client, speculative reads,
recovery that does not wait on a hung bookie, and reads of an open ledger stopping at the LAC.

The client runs in the test process (it is a library); bookies and the metastore are real
processes on free ports.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from prometheus_client import REGISTRY

from minipulsar.bookkeeper import BookKeeper, metrics
from minipulsar.errors import LedgerFencedError, MiniPulsarError, NoSuchEntryError, NotEnoughBookiesError
from tests.support.bk_cluster import bk_client, bookies_running, numbered_bookie
from tests.support.process import ServerProcess, wait_for


def entry_data(entry_id: int) -> bytes:
    return f"entry-{entry_id:06d}-".encode() + bytes(200)


class Writer:
    """Keeps up to ``window`` adds in flight; records which entry ids were acknowledged."""

    def __init__(self, handle, window: int = 50) -> None:
        self.handle = handle
        self.window = asyncio.Semaphore(window)
        self.acked: dict[int, bytes] = {}
        self.errors: list[BaseException] = []
        self.sent = 0
        self._tasks: set[asyncio.Task] = set()

    async def run(self, count: int, stop: asyncio.Event | None = None) -> None:
        for _ in range(count):
            if (stop is not None and stop.is_set()) or self.errors:
                break
            await self.window.acquire()
            data = entry_data(self.sent)
            self.sent += 1
            task = asyncio.ensure_future(self._add(data))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        await asyncio.gather(*self._tasks)

    async def _add(self, data: bytes) -> None:
        try:
            entry_id = await self.handle.add(data)
            self.acked[entry_id] = data
        except MiniPulsarError as error:
            self.errors.append(error)
        finally:
            self.window.release()


def speculative_reads() -> float:
    return REGISTRY.get_sample_value(metrics.PREFIX + "SPECULATIVE_READ_COUNT") or 0.0


def bookie_index(bookies: list[ServerProcess], bookie_id: str) -> int:
    return next(i for i, b in enumerate(bookies) if b.address == bookie_id)


async def recovered_entries(bk: BookKeeper, ledger_id: int) -> dict[int, bytes]:
    handle = await bk.open_ledger(ledger_id, recovery=True)
    if handle.last_entry_id < 0:
        return {}
    return dict(await handle.read(0, handle.last_entry_id))


async def test_killing_an_ensemble_bookie_changes_the_ensemble_without_failing_an_add(tmp_path, metastore):
    async with bookies_running(tmp_path, metastore, 4) as bookies, bk_client(metastore) as bk:
        handle = await bk.create_ledger(3, 2, 2)
        victim = handle.metadata.last_ensemble[0]
        writer = Writer(handle)
        writing = asyncio.ensure_future(writer.run(3000))
        await wait_for(lambda: len(writer.acked) >= 500 or writing.done(), 20)
        bookies[bookie_index(bookies, victim)].kill()
        await writing

        assert writer.errors == []
        assert len(writer.acked) == 3000
        assert handle.ensemble_changes >= 1
        segments = handle.metadata.ensembles
        assert len(segments) >= 2 and victim not in segments[-1][1]
        await handle.close()
        stored = await bk.read_metadata(handle.ledger_id)
        assert [first for first, _ in stored.ensembles] == [first for first, _ in segments]
        assert await recovered_entries(bk, handle.ledger_id) == writer.acked


async def test_too_few_bookies_fail_pending_adds_clearly_and_lose_no_acknowledged_entry(tmp_path, metastore):
    async with bookies_running(tmp_path, metastore, 4) as bookies, bk_client(metastore) as bk:
        handle = await bk.create_ledger(3, 2, 2)
        writer = Writer(handle)
        writing = asyncio.ensure_future(writer.run(100_000))
        killed: list[int] = []
        for victim in handle.metadata.last_ensemble[:2]:
            await wait_for(lambda: len(writer.acked) >= 300 * (len(killed) + 1) or writing.done(), 20)
            index = bookie_index(bookies, victim)
            bookies[index].kill()
            killed.append(index)
            # the second kill leaves only bookies already in the ensemble: no replacement exists
        await asyncio.wait_for(writing, 30)

        assert writer.errors, "adds must fail once no replacement bookie is left"
        assert all(isinstance(e, NotEnoughBookiesError) for e in writer.errors), writer.errors
        assert "writable" in str(writer.errors[0]) or "bookies" in str(writer.errors[0])
        assert max(writer.acked) == len(writer.acked) - 1, "acknowledged entries form a prefix"

        for index in killed:  # their data is on disk: bring them back and read everything
            bookies[index] = numbered_bookie(tmp_path, index, metastore, bookies[index].port)
            await asyncio.to_thread(bookies[index].start)
        async with bk_client(metastore) as reader:
            content = await recovered_entries(reader, handle.ledger_id)
        assert {e: content.get(e) for e in writer.acked} == writer.acked


async def test_recovery_fences_the_writer_and_every_reader_sees_the_same_ledger(tmp_path, metastore):
    async with (
        bookies_running(tmp_path, metastore, 3) as _,
        bk_client(metastore) as writer_bk,
        bk_client(metastore) as recovering_bk,
        bk_client(metastore) as other_reader,
    ):
        handle = await writer_bk.create_ledger(3, 2, 2)
        writer = Writer(handle)
        writing = asyncio.ensure_future(writer.run(100_000))
        await wait_for(lambda: len(writer.acked) >= 300, 20)

        recovered = await recovering_bk.open_ledger(handle.ledger_id, recovery=True)
        acked_before_open_returned = dict(writer.acked)
        late = await asyncio.gather(handle.add(b"after-fence"), return_exceptions=True)
        await asyncio.wait_for(writing, 30)

        assert isinstance(late[0], LedgerFencedError)
        assert writer.errors and all(isinstance(e, (LedgerFencedError, MiniPulsarError)) for e in writer.errors)
        assert any(isinstance(e, LedgerFencedError) for e in writer.errors + late)
        last = recovered.last_entry_id
        assert recovered.metadata.is_closed
        assert set(writer.acked) <= set(range(last + 1)), "every acknowledged entry is in the ledger"
        assert acked_before_open_returned.keys() <= writer.acked.keys()
        content = dict(await recovered.read(0, last))
        assert all(content[e] == entry_data(e) for e in range(last + 1)), "only what A sent, in order"
        assert last < writer.sent
        assert await recovered_entries(other_reader, handle.ledger_id) == content


async def test_recovery_does_not_wait_for_a_hung_bookie(tmp_path, metastore):
    async with (
        bookies_running(tmp_path, metastore, 3) as bookies,
        bk_client(metastore) as writer_bk,
        bk_client(metastore, timeout_s=30.0) as recovering_bk,
    ):
        handle = await writer_bk.create_ledger(3, 3, 2)
        writer = Writer(handle)
        await writer.run(200)
        hung = bookies[bookie_index(bookies, handle.metadata.last_ensemble[2])]
        hung.pause()
        try:
            started_s = time.monotonic()
            recovered = await recovering_bk.open_ledger(handle.ledger_id, recovery=True)
            took_s = time.monotonic() - started_s
        finally:
            hung.resume()
        assert took_s < 10, f"recovery waited {took_s:.1f} s: it waited for the hung bookie"
        assert recovered.last_entry_id == 199
        assert dict(await recovered.read(0, 199)) == writer.acked


async def test_speculative_read_asks_another_replica_when_the_first_is_silent(tmp_path, metastore):
    async with (
        bookies_running(tmp_path, metastore, 2) as bookies,
        bk_client(metastore, speculative_read_timeout_s=0.1, timeout_s=30.0) as bk,
    ):
        handle = await bk.create_ledger(2, 2, 2)
        writer = Writer(handle)
        await writer.run(50)
        await handle.close()
        reader = await bk.open_ledger(handle.ledger_id)
        first_choice = reader._reader._replica_order(reader.metadata, 0)[0]
        silent = bookies[bookie_index(bookies, first_choice)]
        before = speculative_reads()
        silent.pause()
        try:
            entries = await asyncio.wait_for(reader.read(0, 49), 10)
        finally:
            silent.resume()
        assert dict(entries) == writer.acked
        assert speculative_reads() > before


async def test_reads_of_an_open_ledger_stop_at_the_last_add_confirmed(tmp_path, metastore):
    async with (
        bookies_running(tmp_path, metastore, 2) as _,
        bk_client(metastore) as writer_bk,
        bk_client(metastore) as reader_bk,
    ):
        handle = await writer_bk.create_ledger(2, 2, 2)
        writer = Writer(handle, window=1)
        await writer.run(20)
        reader = await reader_bk.open_ledger(handle.ledger_id, recovery=False)
        # the LAC travels on the next add, so the bookies know up to the second-to-last entry
        assert reader.last_entry_id == 18
        assert dict(await reader.read(0, 18)) == {e: writer.acked[e] for e in range(19)}
        with pytest.raises(NoSuchEntryError):
            await reader.read(0, 19)
        assert (await reader_bk.read_metadata(handle.ledger_id)).state.value == "OPEN", "not fenced"
        assert await handle.add(b"still writable") == 20


async def test_slow_sender_is_held_by_the_pending_add_byte_budget(tmp_path, metastore):
    async with (
        bookies_running(tmp_path, metastore, 2) as bookies,
        bk_client(metastore, max_pending_add_bytes_per_ledger=64 * 1024, timeout_s=30.0) as bk,
    ):
        handle = await bk.create_ledger(2, 2, 1)
        slow = bookies[bookie_index(bookies, handle.metadata.last_ensemble[1])]
        slow.pause()
        try:
            futures = [handle.add(os.urandom(8 * 1024)) for _ in range(40)]
            # Qa=1: the live bookie acknowledges, but the paused one holds the budget
            await wait_for(lambda: sum(f.done() for f in futures) >= 7, 10)
            assert sum(f.done() for f in futures) <= 9, "at most ~64 KiB of adds go out while a replica is silent"
            assert bk._ctx.client_add_budget.in_use <= 64 * 1024 + 8 * 1024
        finally:
            slow.resume()
        assert [await f for f in futures] == list(range(40))


async def test_a_bookie_that_times_out_is_quarantined_and_left_out_of_new_ensembles(tmp_path, metastore):
    async with (
        bookies_running(tmp_path, metastore, 4) as bookies,
        bk_client(
            metastore,
            timeout_s=0.5,
            health_check_interval_s=0.2,
            health_check_error_threshold=1,
            quarantine_time_s=60.0,
        ) as bk,
    ):
        handle = await bk.create_ledger(3, 2, 2)
        slow_id = handle.metadata.last_ensemble[0]
        slow = bookies[bookie_index(bookies, slow_id)]
        slow.pause()
        try:
            writer = Writer(handle)
            await writer.run(200)
            assert writer.errors == [] and handle.ensemble_changes >= 1
            await wait_for(lambda: bk.quarantine.is_quarantined(slow_id), 5)
            assert slow_id in (await bk.registry.bookies()).writable, "still registered, only quarantined"
            for _ in range(10):
                ledger = await bk.create_ledger(3, 2, 2)
                assert slow_id not in ledger.metadata.last_ensemble
                await ledger.close()
        finally:
            slow.resume()


async def test_load_aware_placement_polls_every_bookie_for_its_load_report(tmp_path, metastore):
    async with (
        bookies_running(tmp_path, metastore, 3) as bookies,
        bk_client(
            metastore, ensemble_placement_policy="LoadAwareEnsemblePlacementPolicy", bookie_load_poll_interval_s=0.2
        ) as bk,
    ):
        addresses = {b.address for b in bookies}
        await wait_for(lambda: set(bk.load_poller.reports) == addresses, 10)
        report = bk.load_poller.reports[bookies[0].address]
        assert 0.0 <= report.ledger_dirs_used_fraction <= 1.0
        assert report.journal_write_bytes_per_s >= 0.0 and not report.read_only
        handle = await bk.create_ledger(2, 2, 2)
        assert set(handle.metadata.last_ensemble) <= addresses
