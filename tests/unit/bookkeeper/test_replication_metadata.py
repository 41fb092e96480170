"""The under-replication manager and the auditor election over the in-memory metadata store.

Goal: marks merge and clear at their version, locks are exclusive and ephemeral, disable stops
hand-outs, the election has one winner and moves when its session dies.
Method: ``memory://`` stores sharing one tree (one per simulated process)."""

from __future__ import annotations

import asyncio
import uuid

from minipulsar.bookkeeper.replication.auditor_elector import AuditorElector, who_is_auditor
from minipulsar.bookkeeper.replication.underreplication_manager import LedgerUnderreplicationManager
from minipulsar.metadata import open_metadata_store
from minipulsar.metadata.memory import MemoryMetadataStore
from tests.support.process import wait_for


async def test_marks_merge_and_clear_only_at_their_version() -> None:
    store = await open_metadata_store(f"memory://{uuid.uuid4()}")
    urm = LedgerUnderreplicationManager(store)
    await urm.mark_ledger_underreplicated(5, ["b1"])
    await urm.mark_ledger_underreplicated(5, ["b2"])
    await urm.mark_ledger_underreplicated(70000, ["b1"])
    marks = await urm.list_underreplicated()
    assert [(m.ledger_id, m.missing_replicas) for m in marks] == [(5, {"b1", "b2"}), (70000, {"b1"})]
    taken = await urm.acquire_next()
    assert taken is not None
    await urm.mark_ledger_underreplicated(taken.ledger_id, ["b3"])  # marked while it is worked
    assert not await urm.mark_ledger_replicated(taken)
    again = await urm.get(taken.ledger_id)
    assert again is not None and "b3" in again.missing_replicas
    assert await urm.mark_ledger_replicated(again)
    await urm.release(taken.ledger_id)
    assert len(await urm.list_underreplicated()) == 1
    await store.close()


async def test_locks_are_exclusive_and_go_with_the_session() -> None:
    name = f"memory://{uuid.uuid4()}"
    first, second = await open_metadata_store(name), await open_metadata_store(name)
    one, two = LedgerUnderreplicationManager(first), LedgerUnderreplicationManager(second)
    await one.mark_ledger_underreplicated(1, ["b"])
    assert (await one.acquire_next()) is not None
    assert (await two.acquire_next()) is None
    backend = first.backend
    assert isinstance(backend, MemoryMetadataStore)
    backend.expire_session()
    await wait_for(lambda: two.acquire(1), timeout_s=5, message="the lock went with the session")
    await first.close()
    await second.close()


async def test_disable_and_the_lost_bookie_recovery_delay() -> None:
    store = await open_metadata_store(f"memory://{uuid.uuid4()}")
    urm = LedgerUnderreplicationManager(store)
    await urm.mark_ledger_underreplicated(1, ["b"])
    await urm.disable()
    assert not await urm.is_enabled()
    assert await urm.acquire_next() is None
    await urm.enable()
    assert await urm.acquire_next() is not None
    assert await urm.lost_bookie_recovery_delay_s(default_s=0) == 0
    await urm.set_lost_bookie_recovery_delay_s(60)
    assert await urm.lost_bookie_recovery_delay_s(default_s=0) == 60
    await store.close()


async def test_one_auditor_at_a_time_and_reelection_when_its_session_dies() -> None:
    name = f"memory://{uuid.uuid4()}"
    stores = [await open_metadata_store(name, session_timeout_ms=500) for _ in range(3)]
    running: set[str] = set()

    def elector(index: int) -> AuditorElector:
        my_id = f"bookie-{index}"

        async def unelected() -> None:
            running.discard(my_id)

        return AuditorElector(stores[index], my_id, lambda: running.add(my_id), unelected)

    electors = [elector(i) for i in range(3)]
    for e in electors:
        e.start()
        await asyncio.sleep(0)
    await wait_for(lambda: len(running) == 1, timeout_s=5, message="one auditor")
    first = next(iter(running))
    assert await who_is_auditor(stores[0]) == first
    index = int(first.rsplit("-", 1)[1])
    store = stores[index]
    backend = store.backend
    assert isinstance(backend, MemoryMetadataStore)
    backend.expire_session()

    await wait_for(lambda: len(running) == 1 and first not in running, timeout_s=5, message="re-elected")
    assert await who_is_auditor(stores[0]) in running
    for e in electors:
        await e.stop()
    assert not running
    for s in stores:
        await s.close()
