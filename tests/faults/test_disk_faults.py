"""Real disk faults under real bookie processes (BookKeeper's LedgerDirsManager and journal
failure handling): EIO from the ``LD_PRELOAD`` shim, ENOSPC from a small tmpfs
(:mod:`tests.support.disk_faults`; each skips with its reason where it cannot run).

- EIO on one of two ledger dirs: that dir is marked failed, its ledgers' adds are refused, the
  other dir's ledgers take adds, every acked entry reads back (also after a restart);
- EIO on the only ledger dir: the bookie turns read-only and serves reads; producers on the
  cluster keep getting receipts (the writers replace it);
- EIO on a journal: the bookie unregisters and exits with 5 (BOOKIE_EXCEPTION); producers keep
  getting receipts;
- ENOSPC on the journal and on the ledger dir: nothing acked is lost or corrupt; once space is
  back a restart reads every acked entry and takes adds again.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from minipulsar import Client
from minipulsar.errors import BookieReadOnlyError, MiniPulsarError, NoSuchEntryError, NoSuchLedgerError
from minipulsar.ledger_paths import LEDGERS_ROOT, parse_ledger_node
from minipulsar.metadata import MetadataStore, open_metadata_store
from minipulsar.net import connect
from minipulsar.protocol.commands import BookieInfo
from tests.support.cluster import ProcessCluster, make_cluster
from tests.support.consume import consume_all
from tests.support.disk_faults import EioShim, fill, small_filesystem
from tests.support.entries import entry_payload
from tests.support.process import ServerProcess, started, wait_for
from tests.support.raw_client import RawClient, add_entry, read_entries
from tests.support.servers import bookie_process
from tests.support.web import metric_value

SESSION_MS = 2000
FAST_FLUSH: dict[str, object] = {"flushInterval": 100, "diskCheckInterval": 200, "zkTimeout": SESSION_MS}
"""Checkpoints every 100 ms: a fault in a ledger dir shows within a fraction of a second."""
AVAILABLE, READONLY = "/ledgers/available", "/ledgers/available/readonly"
LEDGER_DIR_FAILED = (r"ledger dir \S+ failed", r"flush failed in checkpoint", r"checkpoint \d+ failed")
JOURNAL_FAILED = (
    r"write failed, refusing further adds",
    r"journal \d+ \(.*\) failed",
    r"shutting the bookie down",
    r"stopped on a failure",
    r"cannot roll",
)


@pytest.fixture
def eio_shim(tmp_path: Path) -> EioShim:
    return EioShim.build(tmp_path / "eio-shim")


@pytest_asyncio.fixture
async def registry(metastore: ServerProcess) -> AsyncIterator[MetadataStore]:
    store = await open_metadata_store(f"metastore://{metastore.address}", session_timeout_ms=SESSION_MS)
    try:
        yield store
    finally:
        await store.close()


async def registrations(store: MetadataStore, bookie_id: str) -> set[str]:
    """The registration paths (writable, read-only) listing ``bookie_id`` now."""
    return {path for path in (AVAILABLE, READONLY) if bookie_id in await store.children(path)}


async def add_until_refused(conn: RawClient, ledger_id: int, first: int, size: int, limit: int) -> list[int]:
    """Add entries from ``first`` one at a time until one fails (or ``limit`` is reached);
    returns the ids acknowledged."""
    acked = []
    for entry_id in range(first, first + limit):
        try:
            await add_entry(conn, ledger_id, entry_id, entry_payload(ledger_id, entry_id, size=size))
        except MiniPulsarError:
            break
        acked.append(entry_id)
    return acked


async def assert_reads_back(conn: RawClient, ledger_id: int, entry_ids: list[int], size: int = 100) -> None:
    for entry_id in entry_ids:
        got = await read_entries(conn, ledger_id, entry_id)
        assert got == [(entry_id, entry_payload(ledger_id, entry_id, size=size))], f"{ledger_id}:{entry_id}"


async def bookie_info(conn: RawClient) -> dict:
    return (await conn.request(BookieInfo)).info


# -- EIO on a ledger dir ------------------------------------------------------------------------


@pytest.mark.expect_error_log(*LEDGER_DIR_FAILED)
async def test_eio_on_one_of_two_ledger_dirs_fails_that_dir_and_the_other_takes_the_adds(
    tmp_path: Path, metastore: ServerProcess, eio_shim: EioShim
) -> None:
    """Goal: a ledger dir whose writes fail with EIO is marked failed and no longer written;
    the ledgers of the other dir take adds as before; nothing acknowledged is lost, now or
    after a restart. Method: ledgers-1 (odd ledgers) under the shim; 10 entries in ledgers 2
    and 3, arm, 10 more each (ledger 3's until refused), wait for the failed flush; ledger 3 is refused
    with BookieReadOnly naming the dir, ledgers 2 and 4 take 20 more; BOOKIE_INFO and
    ``bookie_ledger_writable_dirs`` show it; all read back; stop, disarm, restart: all read back."""
    bad = tmp_path / "ledgers-1"
    bookie = bookie_process(tmp_path, metastore.url, ledgers=("ledgers-0", "ledgers-1"), settings=FAST_FLUSH)
    bookie.env.update(eio_shim.env(prefix=bad))
    acked: dict[int, list[int]] = {2: [], 3: [], 4: []}
    async with started(bookie):
        conn = await connect(RawClient, bookie.host, bookie.port)
        for ledger_id in (2, 3):
            acked[ledger_id] += await add_until_refused(conn, ledger_id, 0, 100, 10)
        eio_shim.arm()
        for ledger_id in (2, 3):  # ledger 3's may be refused once a flush failed (100 ms)
            acked[ledger_id] += await add_until_refused(conn, ledger_id, 10, 100, 10)
        assert acked[2] == list(range(20)) and len(acked[3]) >= 10

        async def dir_failed() -> bool:
            return str(bad) in (await bookie_info(conn))["failedLedgerDirs"]

        await wait_for(dir_failed, 15, message="ledgers-1 not marked failed")
        refused = len(acked[3])
        with pytest.raises(BookieReadOnlyError, match="ledgers-1 failed"):
            await add_entry(conn, 3, refused, entry_payload(3, refused))
        for ledger_id in (2, 4):
            first = len(acked[ledger_id])
            acked[ledger_id] += await add_until_refused(conn, ledger_id, first, 100, 20)
        assert acked[2] == list(range(40)) and acked[4] == list(range(20))
        info = await bookie_info(conn)
        assert info["readOnly"] is False and info["writableLedgerDirs"] == 1
        assert await metric_value(bookie, "bookie_ledger_writable_dirs") == 1
        assert await metric_value(bookie, "bookie_ledger_num_dirs") == 2
        for ledger_id, entry_ids in acked.items():
            await assert_reads_back(conn, ledger_id, entry_ids)
        conn.close()
        assert await asyncio.to_thread(bookie.stop) == 0, "a requested stop, even with a dir failed"
    eio_shim.disarm()
    restarted = bookie_process(
        tmp_path, metastore.url, port=bookie.port, ledgers=("ledgers-0", "ledgers-1"), settings=FAST_FLUSH
    )
    async with started(restarted):
        conn = await connect(RawClient, restarted.host, restarted.port)
        for ledger_id, entry_ids in acked.items():
            await assert_reads_back(conn, ledger_id, entry_ids)
        assert (await bookie_info(conn))["failedLedgerDirs"] == {}
        await add_entry(conn, 3, refused, entry_payload(3, refused))
        conn.close()


async def send_numbered(producer, first: int, count: int) -> list[bytes]:
    sent = []
    for index in range(first, first + count):
        payload = f"m-{index}".encode()
        await asyncio.wait_for(producer.send(payload), 30)
        sent.append(payload)
    return sent


async def ledger_ids(store: MetadataStore) -> list[int]:
    names = await store.children(LEDGERS_ROOT)
    return sorted(i for i in map(parse_ledger_node, names) if i is not None)


async def entries_served(conn: RawClient, ledgers: list[int]) -> int:
    """How many of ``ledgers`` the bookie serves entry 0 of (cursor ledgers may have none)."""
    served = 0
    for ledger_id in ledgers:
        try:
            served += bool(await read_entries(conn, ledger_id, 0))
        except (NoSuchEntryError, NoSuchLedgerError):
            continue
    return served


async def two_bookie_cluster_then_a_third(cluster: ProcessCluster) -> None:
    """The topic's first ledger goes to bookies 0 and 1 (the only ones); bookie 2 joins after,
    the replacement the writer can pick."""
    await cluster.add_bookie()


@pytest.mark.expect_error_log(*LEDGER_DIR_FAILED)
async def test_eio_on_the_only_ledger_dir_turns_the_bookie_read_only_and_producers_go_on(
    tmp_path: Path, eio_shim: EioShim
) -> None:
    """Goal: with its only ledger dir failing, a bookie turns read-only (registered under
    readonly/), keeps serving reads, and the producers on the cluster keep getting receipts
    (their ledger's writer replaces it). Method: bookies 0 and 1 hold the topic's ledger
    (E=Qw=Qa=2), bookie 2 joins; bookie 0's ledger dir fails with EIO; 300 sends in all, all
    acked and then consumed in order; bookie 0 serves a read of what it acked before."""
    ledger_dir = tmp_path / "bookie-0" / "ledgers"
    async with make_cluster(
        tmp_path, bookies=2, bookie_settings=FAST_FLUSH, bookie_env={0: eio_shim.env(prefix=ledger_dir)}
    ) as cluster:
        store = await open_metadata_store(cluster.metadata_url)
        try:
            async with Client(cluster.service_url) as client:
                producer = await client.create_producer("disk-eio-ledger")
                sent = await send_numbered(producer, 0, 50)
                first_ledgers = await ledger_ids(store)
                await two_bookie_cluster_then_a_third(cluster)
                bookie = cluster.bookies[0]
                eio_shim.arm()
                sent += await send_numbered(producer, 50, 100)

                async def read_only() -> bool:
                    return await registrations(store, bookie.address) == {READONLY}

                await wait_for(read_only, 20, message="bookie 0 not registered read-only")
                sent += await send_numbered(producer, 150, 150)
            conn = await connect(RawClient, bookie.host, bookie.port)
            info = await bookie_info(conn)
            assert info["readOnly"] is True and info["writableLedgerDirs"] == 0
            assert info["ledgers"] >= 1 and info["entries"] >= 1
            assert await entries_served(conn, first_ledgers) >= 1, "reads of the read-only bookie"
            conn.close()
            assert await consume_all(cluster.service_url, "disk-eio-ledger", len(sent)) == sent
        finally:
            await store.close()


# -- EIO on a journal ------------------------------------------------------------------------------


@pytest.mark.expect_error_log(*JOURNAL_FAILED)
async def test_eio_on_a_journal_makes_the_bookie_leave_and_producers_go_on(tmp_path: Path, eio_shim: EioShim) -> None:
    """Goal: a journal that fails (fdatasync/write EIO) makes the bookie leave the cluster
    cleanly: its registration goes, the process exits with 5 (BOOKIE_EXCEPTION), and the
    producers keep getting receipts. Method: as above, with bookie 0's journal dir failing."""
    journal_dir = tmp_path / "bookie-0" / "journal"
    async with make_cluster(
        tmp_path, bookies=2, bookie_settings=FAST_FLUSH, bookie_env={0: eio_shim.env(prefix=journal_dir)}
    ) as cluster:
        store = await open_metadata_store(cluster.metadata_url)
        try:
            async with Client(cluster.service_url) as client:
                producer = await client.create_producer("disk-eio-journal")
                sent = await send_numbered(producer, 0, 50)
                await two_bookie_cluster_then_a_third(cluster)
                bookie = cluster.bookies[0]
                eio_shim.arm()
                sent += await send_numbered(producer, 50, 100)
                assert bookie.proc is not None
                code = await asyncio.to_thread(bookie.proc.wait, 30)
                assert code == 5, bookie.log_tail()
                assert await registrations(store, bookie.address) == set()
                assert "journal 0 failed" in bookie.log_tail(200)
                sent += await send_numbered(producer, 150, 100)
            assert await consume_all(cluster.service_url, "disk-eio-journal", len(sent)) == sent
        finally:
            await store.close()


# -- ENOSPC ------------------------------------------------------------------------------------------


def grow(directory: Path, size: str = "64m") -> None:
    """Free space: the tmpfs grows (its files stay)."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(directory)], check=True, capture_output=True)


@pytest.mark.expect_error_log(*JOURNAL_FAILED)
async def test_a_full_journal_disk_loses_nothing_acked_and_a_restart_with_space_reads_it_all(
    tmp_path: Path, metastore: ServerProcess
) -> None:
    """Goal: ENOSPC on the journal never corrupts it: the add that found no space is not
    acknowledged, the bookie leaves (exit 5), and once space is back a restart replays the
    journal (a partial record at its tail, if any, dropped by its CRC) and reads back every
    acked entry byte-identical. Method: the journal on a 4 MiB tmpfs, mostly filled; 8 KiB
    adds until one fails; grow the tmpfs; restart; read all; add more."""
    with small_filesystem(tmp_path / "journal-fs", "4m") as journal_fs:
        settings = {**FAST_FLUSH, "journalMaxSizeMB": 1}
        bookie = bookie_process(tmp_path, metastore.url, journals=(journal_fs / "journal",), settings=settings)
        async with started(bookie):
            filler = fill(journal_fs)
            os.truncate(filler, filler.stat().st_size - (1536 << 10))  # ~1.5 MiB left for the journal
            conn = await connect(RawClient, bookie.host, bookie.port)
            acked = await add_until_refused(conn, 7, 0, 8192, 2000)
            conn.close()
            assert bookie.proc is not None
            assert await asyncio.to_thread(bookie.proc.wait, 30) == 5
        assert 0 < len(acked) < 2000, "the journal disk must fill up"
        grow(journal_fs)
        restarted = bookie_process(
            tmp_path, metastore.url, port=bookie.port, journals=(journal_fs / "journal",), settings=settings
        )
        async with started(restarted):
            conn = await connect(RawClient, restarted.host, restarted.port)
            await assert_reads_back(conn, 7, acked, size=8192)
            more = await add_until_refused(conn, 7, acked[-1] + 1, 8192, 20)
            assert len(more) == 20
            conn.close()


@pytest.mark.expect_error_log(
    r"is out of space", r"is full: usage", r"flush failed in checkpoint", r"checkpoint \d+ failed"
)
async def test_a_full_ledger_disk_turns_the_bookie_read_only_and_loses_nothing_acked(
    tmp_path: Path, metastore: ServerProcess, registry: MetadataStore
) -> None:
    """Goal: ENOSPC on the only ledger dir (entry logs, index) marks it full: the bookie turns
    read-only at once and serves reads; no acked entry is lost or corrupt; after space is freed
    a restart reads every acked entry and takes adds. Method: the ledger dir on a 4 MiB tmpfs;
    16 KiB adds until refused; all read back; stop, grow, restart, read all, add more."""
    with small_filesystem(tmp_path / "ledger-fs", "4m") as ledger_fs:
        settings = {**FAST_FLUSH, "dbStorage_writeCacheMaxSizeMb": 1, "logSizeLimit": 1 << 20}
        bookie = bookie_process(tmp_path, metastore.url, ledgers=(ledger_fs / "ledgers",), settings=settings)
        async with started(bookie):
            conn = await connect(RawClient, bookie.host, bookie.port)
            acked = await add_until_refused(conn, 9, 0, 16384, 2000)
            assert 0 < len(acked) < 2000, "the ledger disk must fill up"
            with pytest.raises(BookieReadOnlyError):
                await add_entry(conn, 9, acked[-1] + 1, entry_payload(9, acked[-1] + 1, size=16384))

            async def read_only() -> bool:
                return await registrations(registry, bookie.address) == {READONLY}

            await wait_for(read_only, 10, message="not registered read-only")
            await assert_reads_back(conn, 9, acked, size=16384)
            conn.close()
        grow(ledger_fs)
        restarted = bookie_process(
            tmp_path, metastore.url, port=bookie.port, ledgers=(ledger_fs / "ledgers",), settings=settings
        )
        async with started(restarted):
            conn = await connect(RawClient, restarted.host, restarted.port)
            await assert_reads_back(conn, 9, acked, size=16384)
            more = await add_until_refused(conn, 9, acked[-1] + 1, 16384, 20)
            assert len(more) == 20
            conn.close()
