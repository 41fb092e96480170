"""AutoRecovery's periodic check and worker against in-process bookies.

Goal: "a completed add whose slow replica later failed" is re-replicated: a closed ledger whose
metadata names a bookie that never stored its entries is found by the Auditor's periodic check,
marked, and the worker copies the entries from the surviving replica to another bookie and
swaps it into the metadata. Method: three bookies (AutoRecovery off in them) on one memory://
store; the ledger's entries are written to one bookie only, its metadata names two. And the
Auditor audits after a reconnection of its metadata session (a registration deleted meanwhile
was never notified)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from minipulsar.bookkeeper.bookie_client import BookieClient
from minipulsar.bookkeeper.client import BookKeeper, BookKeeperSettings
from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata, ledger_path
from minipulsar.bookkeeper.replication.autorecovery_main import AutoRecoveryMain
from minipulsar.bookkeeper.replication.replication_worker import ReplicationWorker
from minipulsar.bookkeeper.replication.settings import AutoRecoverySettings
from minipulsar.metadata import open_metadata_store
from minipulsar.metadata.store import NOT_EXISTS
from tests.support.bookie_service import memory_store_url, running_service, service_config
from tests.support.process import wait_for
from tests.support.replication import bookie_has_entries

LEDGER_ID = 100
ENTRIES = 25


async def write_packaged(bookies: BookieClient, bookie: str, metadata: LedgerMetadata, count: int) -> None:
    """Entries 0..count-1 on ``bookie``, packaged with their digest and key as a writer sends them."""
    digest = metadata.digest_manager()
    for entry_id in range(count):
        data = digest.package(entry_id, entry_id - 1, entry_id + 1, b"e")
        await bookies.add_entry(bookie, LEDGER_ID, entry_id, entry_id - 1, data, master_key=digest.master_key)


async def test_periodic_check_finds_a_replica_that_never_stored_its_entries(tmp_path: Path) -> None:
    url = memory_store_url()
    async with contextlib.AsyncExitStack() as stack:
        bookies = [
            await stack.enter_async_context(
                running_service(service_config(tmp_path / f"b{i}", url, autoRecoveryDaemonEnabled="false"))
            )
            for i in range(3)
        ]
        a, c, spare = (b.bookie_id for b in bookies)
        store = await open_metadata_store(url)
        stack.push_async_callback(store.close)
        writer = BookKeeper(store, BookKeeperSettings(health_check_enabled=False))
        stack.push_async_callback(writer.close)
        metadata = LedgerMetadata(
            ledger_id=LEDGER_ID, ensemble_size=2, write_quorum=2, ack_quorum=1, ensembles=((0, (a, c)),)
        ).closed(ENTRIES - 1, 100)
        await write_packaged(writer.bookies, a, metadata, ENTRIES)
        await store.put(ledger_path(LEDGER_ID), metadata.to_bytes(), NOT_EXISTS)

        recovery = AutoRecoveryMain(store, "test", AutoRecoverySettings(rereplication_entry_batch_size=4))
        await recovery.bk.start()
        stack.push_async_callback(recovery.bk.close)
        await recovery.auditor.check_all_ledgers()
        marks = await recovery.urm.list_underreplicated()
        assert [(m.ledger_id, m.missing_replicas) for m in marks] == [(LEDGER_ID, {c})]
        assert await recovery.worker.run_once()
        stored = await recovery.bk.read_metadata(LEDGER_ID)
        assert stored.ensembles == ((0, (a, spare)),)
        assert await bookie_has_entries(spare, LEDGER_ID, range(ENTRIES))
        assert await recovery.urm.list_underreplicated() == []


async def test_a_marked_bookie_that_still_holds_its_fragments_keeps_them(tmp_path: Path) -> None:
    """Goal: a mark naming a writable bookie that holds its fragments (it came back before a
    worker got to the ledger) is cleared and the metadata left alone.
    Method: the entries on both bookies of the ensemble; mark one; one worker round."""
    url = memory_store_url()
    async with contextlib.AsyncExitStack() as stack:
        bookies = [
            await stack.enter_async_context(
                running_service(service_config(tmp_path / f"b{i}", url, autoRecoveryDaemonEnabled="false"))
            )
            for i in range(3)
        ]
        a, b, _ = (s.bookie_id for s in bookies)
        store = await open_metadata_store(url)
        stack.push_async_callback(store.close)
        recovery = AutoRecoveryMain(store, "test", AutoRecoverySettings())
        await recovery.bk.start()
        stack.push_async_callback(recovery.bk.close)
        metadata = LedgerMetadata(
            ledger_id=LEDGER_ID, ensemble_size=2, write_quorum=2, ack_quorum=2, ensembles=((0, (a, b)),)
        ).closed(2, 3)
        for bookie in (a, b):
            await write_packaged(recovery.bk.bookies, bookie, metadata, 3)
        await store.put(ledger_path(LEDGER_ID), metadata.to_bytes(), NOT_EXISTS)
        await recovery.urm.mark_ledger_underreplicated(LEDGER_ID, [b])
        assert await recovery.worker.run_once()
        assert (await recovery.bk.read_metadata(LEDGER_ID)).ensembles == ((0, (a, b)),)
        assert await recovery.urm.list_underreplicated() == []


async def test_a_bookie_lost_while_the_auditor_was_disconnected_is_audited_on_reconnection() -> None:
    """Goal: the Auditor misses the deletion of a registration while its metadata connection is
    down; on RECONNECTED it audits anyway and marks the lost bookie's ledger (else nothing would
    until the daily periodic bookie check). Method: no bookie runs: a ledger names two
    registered ids, the Auditor runs on one store, another store deletes one registration."""
    url = memory_store_url()
    store, other = await open_metadata_store(url), await open_metadata_store(url)
    recovery = AutoRecoveryMain(store, "test", AutoRecoverySettings())
    try:
        for bookie in ("a:3181", "c:3181"):
            await other.put(f"/ledgers/available/{bookie}", b"{}", ephemeral=True)
        metadata = LedgerMetadata(
            ledger_id=LEDGER_ID, ensemble_size=2, write_quorum=2, ack_quorum=1, ensembles=((0, ("a:3181", "c:3181")),)
        ).closed(ENTRIES - 1, 100)
        await other.put(ledger_path(LEDGER_ID), metadata.to_bytes(), NOT_EXISTS)
        await recovery.bk.start()
        recovery.auditor.start()
        await recovery.auditor.audit_bookies()
        assert await recovery.urm.list_underreplicated() == []
        store.disconnect()
        await other.delete("/ledgers/available/c:3181")
        store.reconnect()

        async def marked() -> bool:
            return [(m.ledger_id, m.missing_replicas) for m in await recovery.urm.list_underreplicated()] == [
                (LEDGER_ID, {"c:3181"})
            ]

        await wait_for(marked, 5, message="the lost bookie's ledger was never marked")
    finally:
        await recovery.auditor.stop()
        await recovery.bk.close()
        await store.close()
        await other.close()


class CountingWorker(ReplicationWorker):
    """A worker that only counts its rounds (each finds nothing to do)."""

    rounds = 0

    async def run_once(self) -> bool:
        self.rounds += 1
        return False


async def test_the_replication_worker_looks_at_the_marks_after_a_reconnection() -> None:
    """Goal: a mark made while the worker's store was disconnected (its notification lost) is
    looked at when the store reconnects, not at the next poll (an hour here)."""
    url = memory_store_url()
    store = await open_metadata_store(url)
    recovery = AutoRecoveryMain(store, "test", AutoRecoverySettings(worker_poll_interval_s=3600))
    worker = CountingWorker(recovery.bk, store, recovery.urm, recovery.settings)
    try:
        worker.start()
        await wait_for(lambda: worker.rounds == 1, 5, message="the worker never ran")
        store.disconnect()
        store.reconnect()
        await wait_for(lambda: worker.rounds == 2, 5, message="the worker slept through the reconnection")
    finally:
        await worker.stop()
        await store.close()
