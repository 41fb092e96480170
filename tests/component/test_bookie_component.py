"""One bookie in-process on 127.0.0.1:0 with a memory:// metadata store, driven by a raw
client connection: adds, range reads, fencing, LAC, info, registration, HTTP, restart."""

from __future__ import annotations

import asyncio
import errno
import json
import shutil
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from minipulsar.bookie.bookie_server import BookieServer
from minipulsar.bookie.registration import registration_path
from minipulsar.errors import (
    BookieReadOnlyError,
    InvalidCommandError,
    LedgerFencedError,
    NoSuchEntryError,
    NoSuchLedgerError,
    TooManyRequestsError,
    UnknownServerError,
)
from minipulsar.metadata import open_metadata_store
from minipulsar.net import connect
from minipulsar.protocol.commands import AddEntry, BookieInfo, ReadEntry, ReadLac
from tests.support.bookie_service import service_config
from tests.support.entries import entry_payload
from tests.support.process import wait_for
from tests.support.raw_client import RawClient, add_entry, read_entries


@pytest_asyncio.fixture
async def service(tmp_path: Path, store_url: str) -> AsyncIterator[BookieServer]:
    service = BookieServer(service_config(tmp_path, store_url))
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


@pytest_asyncio.fixture
async def client(service: BookieServer) -> AsyncIterator[RawClient]:
    conn = await connect(RawClient, service.host, service.port, role="test")
    try:
        yield conn
    finally:
        conn.close()


async def test_adds_are_acknowledged_and_ranges_read_back(client: RawClient) -> None:
    responses = await asyncio.gather(*(add_entry(client, 1, i, entry_payload(1, i), lac=i - 1) for i in range(20)))
    assert [(r.ledger_id, r.entry_id) for r in responses] == [(1, i) for i in range(20)]
    assert await read_entries(client, 1, 0, 20) == [(i, entry_payload(1, i)) for i in range(20)]
    assert await read_entries(client, 1, 5, 3) == [(i, entry_payload(1, i)) for i in range(5, 8)]
    assert await read_entries(client, 1, 18, 10) == [
        (18, entry_payload(1, 18)),
        (19, entry_payload(1, 19)),
    ]  # stops at the end
    response = await client.request(ReadEntry, ledger_id=1, first_entry_id=0, count=1)
    assert response.lac == 18


async def test_a_range_stops_at_a_gap(client: RawClient) -> None:
    for entry_id in (0, 1, 3):
        await add_entry(client, 2, entry_id, entry_payload(2, entry_id))
    assert [e for e, _ in await read_entries(client, 2, 0, 10)] == [0, 1]


async def test_missing_entries_and_ledgers_are_typed_errors(client: RawClient) -> None:
    await add_entry(client, 3, 0, b"x")
    with pytest.raises(NoSuchEntryError):
        await read_entries(client, 3, 1)
    with pytest.raises(NoSuchLedgerError):
        await read_entries(client, 404, 0)
    with pytest.raises(NoSuchLedgerError):
        await client.request(ReadLac, ledger_id=404)


async def test_max_bytes_limits_a_read_but_returns_at_least_one_entry(client: RawClient) -> None:
    for entry_id in range(10):
        await add_entry(client, 4, entry_id, entry_payload(4, entry_id, size=1000))
    assert len(await read_entries(client, 4, 0, 10, max_bytes=2500)) == 2
    assert len(await read_entries(client, 4, 0, 10, max_bytes=1)) == 1
    assert len(await read_entries(client, 4, 0, 10, max_bytes=0)) == 10


async def test_duplicate_adds_are_idempotent(client: RawClient) -> None:
    await add_entry(client, 5, 0, b"same")
    await add_entry(client, 5, 0, b"same")
    assert await read_entries(client, 5, 0, 5) == [(0, b"same")]


async def test_read_lac_reports_the_highest_piggybacked_lac_and_last_entry(client: RawClient) -> None:
    for entry_id, lac in [(0, -1), (1, 0), (2, 1), (3, 1)]:
        await add_entry(client, 6, entry_id, b"e", lac=lac)
    response = await client.request(ReadLac, ledger_id=6)
    assert (response.lac, response.last_entry_id) == (1, 3)


async def test_fencing_refuses_adds_but_not_recovery_adds(client: RawClient) -> None:
    await add_entry(client, 7, 0, b"a")
    await add_entry(client, 7, 1, b"b", lac=0)
    response = await client.request(ReadLac, ledger_id=7, fence=True)
    assert (response.lac, response.last_entry_id) == (0, 1)
    with pytest.raises(LedgerFencedError):
        await add_entry(client, 7, 2, b"c", lac=1)
    await add_entry(client, 7, 2, b"c", lac=1, recovery=True)
    assert [e for e, _ in await read_entries(client, 7, 0, 10)] == [0, 1, 2]


async def test_a_fencing_read_fences_the_ledger(client: RawClient) -> None:
    await add_entry(client, 8, 0, b"a")
    assert await read_entries(client, 8, 0, 1, fence=True) == [(0, b"a")]
    with pytest.raises(LedgerFencedError):
        await add_entry(client, 8, 1, b"b")


async def test_fencing_an_unknown_ledger_creates_it_fenced(client: RawClient) -> None:
    response = await client.request(ReadLac, ledger_id=9, fence=True)
    assert (response.lac, response.last_entry_id) == (-1, -1)
    with pytest.raises(LedgerFencedError):
        await add_entry(client, 9, 0, b"a")
    with pytest.raises(NoSuchEntryError):
        await read_entries(client, 9, 0, fence=True)


async def test_a_fence_waits_for_the_adds_admitted_before_it(client: RawClient) -> None:
    """Goal: a fencing READ_LAC sent right behind pipelined adds reports every one of them, and
    an add sent right after it is refused. Method: send all three kinds without waiting."""
    adds = [client.request(AddEntry, ledger_id=10, entry_id=i, payload=b"p", lac=i - 1) for i in range(50)]
    fence = client.request(ReadLac, ledger_id=10, fence=True)
    late = client.request(AddEntry, ledger_id=10, entry_id=50, payload=b"p", lac=49)
    response = await fence
    assert response.last_entry_id == 49 and response.lac == 48
    assert [r.entry_id for r in await asyncio.gather(*adds)] == list(range(50))
    with pytest.raises(LedgerFencedError):
        await late


async def test_out_of_range_ids_are_invalid_commands(client: RawClient) -> None:
    with pytest.raises(InvalidCommandError):
        await add_entry(client, -1, 0, b"x")
    with pytest.raises(InvalidCommandError):
        await add_entry(client, 1, 1 << 63, b"x")
    with pytest.raises(InvalidCommandError):
        await read_entries(client, 1, 0, count=0)


async def test_bookie_info_reports_disk_space(client: RawClient, service: BookieServer) -> None:
    await add_entry(client, 11, 0, b"x")
    response = await client.request(BookieInfo)
    assert 0 < response.free_disk_bytes <= response.total_disk_bytes
    assert response.info["bookieId"] == service.bookie_id
    assert response.info["entries"] >= 1


async def test_registration_is_an_ephemeral_key_with_the_bookie_info(service: BookieServer, store_url: str) -> None:
    observer = await open_metadata_store(store_url)
    try:
        assert service.bookie_id in await observer.children("/ledgers/available")
        got = await observer.get(registration_path(service.bookie_id))
        info = json.loads(got.value)
        assert info["httpPort"] == service.http_port and info["rack"] == "/default-rack"
        assert got.stat.ephemeral
        await service.stop()
        assert service.bookie_id not in await observer.children("/ledgers/available")
    finally:
        await observer.close()


async def test_registration_comes_back_after_the_session_is_lost(service: BookieServer, store_url: str) -> None:
    observer = await open_metadata_store(store_url)
    path = registration_path(service.bookie_id)
    try:
        service.store.expire_session()
        await wait_for(lambda: observer.exists(path), 10, message="registration not re-created")
    finally:
        await observer.close()


async def test_http_serves_metrics_and_bookie_info(client: RawClient, service: BookieServer) -> None:
    await add_entry(client, 12, 0, b"x" * 10)
    await read_entries(client, 12, 0)
    base = f"http://{service.host}:{service.http_port}"
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/metrics") as response:
            text = await response.text()
        async with http.get(f"{base}/api/v1/bookie/info") as response:
            info = await response.json()
    for name in (
        "bookkeeper_server_ADD_ENTRY_REQUEST_count",
        "bookkeeper_server_READ_ENTRY_REQUEST_count",
        "bookie_journal_JOURNAL_SYNC_count",
        "bookie_journal_JOURNAL_ADD_ENTRY_count",
        "bookie_WRITE_BYTES",
        "bookie_READ_BYTES",
        "bookie_SERVER_STATUS 1.0",
    ):
        assert name in text, name
    assert info["bookieId"] == service.bookie_id and 0 < info["freeSpace"] <= info["totalSpace"]


async def test_entries_and_fences_survive_a_restart(tmp_path: Path, store_url: str) -> None:
    config = service_config(tmp_path, store_url)
    service = BookieServer(config)
    await service.start()
    conn = await connect(RawClient, service.host, service.port)
    await asyncio.gather(*(add_entry(conn, 13, i, entry_payload(13, i), lac=i - 1) for i in range(30)))
    await conn.request(ReadLac, ledger_id=13, fence=True)
    conn.close()
    await service.stop()

    service = BookieServer(config)
    await service.start()
    conn = await connect(RawClient, service.host, service.port)
    try:
        assert await read_entries(conn, 13, 0, 30) == [(i, entry_payload(13, i)) for i in range(30)]
        response = await conn.request(ReadLac, ledger_id=13)
        assert (response.lac, response.last_entry_id) == (28, 29)
        with pytest.raises(LedgerFencedError):
            await add_entry(conn, 13, 30, b"late")
    finally:
        conn.close()
        await service.stop()


async def test_a_full_journal_slows_adds_down_and_drops_none(tmp_path: Path, store_url: str) -> None:
    """Goal: past journalQueueSize the bookie stops reading and answers every add eventually."""
    service = BookieServer(service_config(tmp_path, store_url, journalQueueSize="3", journalMaxGroupWaitMSec="2"))
    await service.start()
    conn = await connect(RawClient, service.host, service.port)
    try:
        responses = await asyncio.gather(*(add_entry(conn, 14, i, entry_payload(14, i)) for i in range(300)))
        assert sorted(r.entry_id for r in responses) == list(range(300))
        assert len(await read_entries(conn, 14, 0, 300)) == 300
    finally:
        conn.close()
        await service.stop()


def fail_journal_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every journal write from now on fails as on a full journal disk."""
    from minipulsar.bookie.journal import segment as journal_segment

    def no_space(self, buffers, size=-1) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal_segment.SegmentWriter, "append", no_space)
    monkeypatch.setattr(journal_segment.SegmentWriter, "append_synced", no_space)


@pytest.mark.expect_error_log(
    r"write failed, refusing further adds", r"journal \d+ \(.*\) failed", r"shutting the bookie down"
)
@pytest.mark.parametrize("read_only_mode", ["true", "false"])
async def test_a_failed_journal_makes_the_bookie_leave_the_cluster(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch, read_only_mode: str
) -> None:
    """Goal: BookKeeper's behaviour, whatever readOnlyModeEnabled says: a journal that can no
    longer write takes the bookie out of the cluster rather than leaving it up refusing
    everything. Method: the journal's writes fail from some add on: that add fails (never
    acknowledged), the registration is deleted (writable and read-only paths) before the bookie
    has stopped, the stop event is set with the failure recorded (the CLI exits 5 then), and
    the entries acknowledged before are still read until the stop."""
    stop = asyncio.Event()
    service = BookieServer(service_config(tmp_path, store_url, readOnlyModeEnabled=read_only_mode), stop=stop)
    await service.start()
    conn = await connect(RawClient, service.host, service.port)
    observer = await open_metadata_store(store_url)
    try:
        for entry_id in range(3):
            await add_entry(conn, 15, entry_id, entry_payload(15, entry_id))
        fail_journal_writes(monkeypatch)
        with pytest.raises(UnknownServerError, match="No space left"):
            await add_entry(conn, 15, 3, entry_payload(15, 3))
        await asyncio.wait_for(stop.wait(), 10)
        assert service.failure is not None and "journal 0 failed" in service.failure
        await wait_for(lambda: _not_registered(observer, service.bookie_id), 10, message="registration not deleted")
        assert await read_entries(conn, 15, 0, 10) == [(i, entry_payload(15, i)) for i in range(3)]
        assert not service.state.read_only  # it leaves; it does not linger read-only
    finally:
        await observer.close()
        conn.close()
        await service.stop()


async def _not_registered(observer, bookie_id: str) -> bool:
    return not any([await observer.exists(registration_path(bookie_id, read_only=ro)) for ro in (False, True)])


def fail_flushes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every flush of a write-cache half from now on fails as on a full ledger disk."""
    from minipulsar.bookie.storage import single_directory

    def no_space(self, batch) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(single_directory.SingleDirectoryDbLedgerStorage, "flush", no_space)


async def _add_all(conn: RawClient, ledger_id: int, entry_ids: range, size: int) -> dict[int, object]:
    """Send the adds together; every one must be answered (acked or refused) within 30 s."""
    outcomes = await asyncio.wait_for(
        asyncio.gather(
            *(add_entry(conn, ledger_id, i, entry_payload(ledger_id, i, size=size)) for i in entry_ids),
            return_exceptions=True,
        ),
        30,
    )
    return dict(zip(entry_ids, outcomes))


async def _assert_reads_back(conn: RawClient, ledger_id: int, entry_ids: list[int], size: int) -> None:
    for entry_id in entry_ids:
        assert await read_entries(conn, ledger_id, entry_id) == [
            (entry_id, entry_payload(ledger_id, entry_id, size=size))
        ]


@pytest.mark.expect_error_log(
    r"is full: usage", r"is out of space", r"flush failed in checkpoint", r"checkpoint \d+ failed"
)
async def test_a_ledger_dir_out_of_space_turns_the_bookie_read_only_at_once_and_loses_no_acked_add(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: a flush that fails for lack of space makes the disk monitor look at once, not at
    its next round (ten minutes away here): the bookie turns read-only, the adds waiting for
    write-cache room are answered with BookieReadOnly instead of waiting for a flush that
    cannot succeed, and every acknowledged add reads back; once space is back, the bookie is
    writable and the retried flush goes through. Method: a 1 MB write cache, 300 adds of
    10 KB sent together after flushes start failing with ENOSPC and the usage reads 0.99."""
    usage = tmp_path / "usage"
    service = BookieServer(
        service_config(
            tmp_path,
            store_url,
            dbStorage_writeCacheMaxSizeMb="1",
            diskCheckInterval="600000",
            minipulsarDiskUsageOverrideFile=str(usage),
        )
    )
    await service.start()
    conn = await connect(RawClient, service.host, service.port)
    try:
        before = await _add_all(conn, 17, range(5), 10_000)
        assert not any(isinstance(o, BaseException) for o in before.values())
        fail_flushes(monkeypatch)
        usage.write_text("0.99")  # what statvfs says once the disk is full
        outcomes = await _add_all(conn, 17, range(5, 305), 10_000)
        refused = {type(o) for o in outcomes.values() if isinstance(o, BaseException)}
        assert refused == {BookieReadOnlyError}, refused
        assert service.state.read_only
        acked = [*before, *(i for i, o in outcomes.items() if not isinstance(o, BaseException))]
        await _assert_reads_back(conn, 17, acked, 10_000)

        monkeypatch.undo()
        usage.write_text("0.5")
        await service.disk_monitor.check()  # its next round
        assert service.state.read_only, "full until a flush into the dir goes through"
        await service.bookie.storage.checkpoint()  # the failed half, retried
        assert not service.state.read_only
        assert not any(isinstance(o, BaseException) for o in (await _add_all(conn, 18, range(100), 10_000)).values())
        await service.bookie.storage.checkpoint()
        await _assert_reads_back(conn, 17, acked, 10_000)
    finally:
        conn.close()
        await service.stop()


async def test_adds_finding_no_write_cache_room_within_max_throttle_time_are_refused(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: dbStorage_maxThrottleTimeMs bounds the wait for write-cache room: with a flush
    that does not finish (a stalled disk), adds are refused with TooManyRequests (none
    acknowledged is lost) and the bookie serves on; once the flush finishes, adds go through."""
    from minipulsar.bookie.storage import metrics as storage_metrics
    from minipulsar.bookie.storage import single_directory

    service = BookieServer(
        service_config(tmp_path, store_url, dbStorage_writeCacheMaxSizeMb="1", dbStorage_maxThrottleTimeMs="100")
    )
    await service.start()
    conn = await connect(RawClient, service.host, service.port)
    flush = single_directory.SingleDirectoryDbLedgerStorage.flush
    disk_back = threading.Event()

    def stalled_flush(self, batch) -> None:
        disk_back.wait(30)
        flush(self, batch)

    try:
        rejected_before = storage_metrics.REJECTED_WRITE_REQUESTS._value.get()
        monkeypatch.setattr(single_directory.SingleDirectoryDbLedgerStorage, "flush", stalled_flush)
        outcomes = await _add_all(conn, 19, range(120), 10_000)
        refused = {type(o) for o in outcomes.values() if isinstance(o, BaseException)}
        assert refused == {TooManyRequestsError}, refused
        assert storage_metrics.REJECTED_WRITE_REQUESTS._value.get() > rejected_before
        assert not service.state.read_only
        acked = [i for i, o in outcomes.items() if not isinstance(o, BaseException)]
        await _assert_reads_back(conn, 19, acked, 10_000)
        disk_back.set()
        monkeypatch.undo()
        await service.bookie.storage.checkpoint()
        assert not any(isinstance(o, BaseException) for o in (await _add_all(conn, 20, range(40), 10_000)).values())
    finally:
        disk_back.set()
        conn.close()
        await service.stop()


@pytest.mark.expect_error_log(r"is out of space", r"flush failed in checkpoint", r"checkpoint \d+ failed")
async def test_a_ledger_dir_whose_flushes_fail_holds_up_neither_the_other_dir_nor_its_acked_adds(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: with two ledger dirs, one whose flushes fail (ENOSPC, the disk monitor not seeing
    it full) is marked full at once — its ledgers' adds refused with BookieReadOnly naming it —
    and stops neither the adds to the other dir's ledgers nor that dir's flushes, as
    BookKeeper's per-dir storages; the bookie stays writable; the mark stays put (the journal keeps every record the
    failed dir has not flushed) until the failed dir flushes again, no half is written twice,
    and every acked add reads back. Method: a 1 MB write cache over two dirs,
    dbStorage_maxThrottleTimeMs 100, the flushes of ``ledgers-0`` failing; ledger 20 lives
    there, ledger 21 in ``ledgers-1``."""
    from minipulsar.bookie.storage import single_directory

    service = BookieServer(
        service_config(
            tmp_path,
            store_url,
            dbStorage_writeCacheMaxSizeMb="1",
            dbStorage_maxThrottleTimeMs="100",
            ledgerDirectories=f"{tmp_path}/ledgers-0,{tmp_path}/ledgers-1",
        )
    )
    await service.start()
    storage = service.bookie.storage
    conn = await connect(RawClient, service.host, service.port)
    flush = single_directory.SingleDirectoryDbLedgerStorage.flush
    flushed: dict[str, list[object]] = {"ledgers-0": [], "ledgers-1": []}
    """Per dir, the halves flushed (kept alive, so that their ids stay distinct)."""

    def flush_or_fail(self, batch) -> None:
        name = self.directory.parent.name
        if name == "ledgers-0":
            raise OSError(errno.ENOSPC, "No space left on device")
        flush(self, batch)
        flushed[name].append(batch.cache)

    try:
        assert not any(isinstance(o, BaseException) for o in (await _add_all(conn, 20, range(5), 10_000)).values())
        mark = await storage.checkpoint()
        monkeypatch.setattr(single_directory.SingleDirectoryDbLedgerStorage, "flush", flush_or_fail)
        failed_dir = await _add_all(conn, 20, range(5, 105), 10_000)
        other_dir = await _add_all(conn, 21, range(300), 10_000)

        assert not any(isinstance(o, BaseException) for o in other_dir.values())  # 3 MB: many flushes
        assert len(flushed["ledgers-1"]) >= 4
        refused = {type(o) for o in failed_dir.values() if isinstance(o, BaseException)}
        assert refused == {BookieReadOnlyError}, refused
        assert any("ledgers-0 is full" in str(o) for o in failed_dir.values())
        assert service.bookie.dirs_manager.full == {tmp_path / "ledgers-0"}
        assert storage.last_checkpoint == mark
        assert not service.state.read_only
        acked = [*range(5), *(i for i, o in failed_dir.items() if not isinstance(o, BaseException))]
        await _assert_reads_back(conn, 20, acked, 10_000)
        await _assert_reads_back(conn, 21, list(range(300)), 10_000)

        monkeypatch.setattr(
            single_directory.SingleDirectoryDbLedgerStorage,
            "flush",
            lambda self, batch: (flush(self, batch), flushed[self.directory.parent.name].append(batch.cache)),
        )
        assert (await storage.checkpoint()) != mark
        assert storage.last_checkpoint != mark
        assert flushed["ledgers-0"]
        await service.disk_monitor.check()  # its next round: the disk has room
        assert not service.bookie.dirs_manager.full
        after = await _add_all(conn, 20, range(105, 145), 10_000)
        assert not any(isinstance(o, BaseException) for o in after.values())
        for halves in flushed.values():
            assert len(halves) == len(set(map(id, halves))), "a half was flushed twice"
        await _assert_reads_back(conn, 20, acked, 10_000)
        await _assert_reads_back(conn, 21, list(range(300)), 10_000)
    finally:
        conn.close()
        await service.stop()


async def test_a_bookie_whose_dirs_were_wiped_does_not_come_back_under_its_id(
    tmp_path: Path, store_url: str, monkeypatch
) -> None:
    """Goal: the cookie is also in the metadata store (/ledgers/cookies/{id}, as BookKeeper's
    in ZooKeeper): a bookie restarted under the same id on wiped dirs (a new instance) is
    refused — it came back empty, answering NoSuchLedger for ledgers the cluster placed on
    it — until the key is deleted, and it accepts no connection before that check (brokers
    reach it by host:port, registered or not); a plain restart on its own dirs starts.
    Method: in-process bookie on a fixed port; stop, restart; stop, wipe the dirs, restart
    (a connection tried during the check is refused); delete the key, restart."""
    from minipulsar.bookie import bookie_server as service_module
    from minipulsar.bookie.cookie import InvalidCookieError
    from minipulsar.ledger_paths import cookie_path

    real_check = service_module.check_store_cookie
    tried: list[str] = []

    async def connect_first(store, bookie_id, cookie):
        host, port = bookie_id.rsplit(":", 1)
        try:
            _, writer = await asyncio.open_connection(host, int(port))
            writer.close()
            tried.append("accepted")
        except ConnectionRefusedError:
            tried.append("refused")
        return await real_check(store, bookie_id, cookie)

    monkeypatch.setattr(service_module, "check_store_cookie", connect_first)

    first = BookieServer(service_config(tmp_path / "run", store_url))
    await first.start()
    port, bookie_id = first.port, first.bookie_id
    stored = json.loads((await first.store.get(cookie_path(bookie_id))).value)
    await first.stop()
    config = service_config(tmp_path / "run", store_url, bookiePort=str(port))
    again = BookieServer(config)
    await again.start()
    assert json.loads((await again.store.get(cookie_path(bookie_id))).value)["instanceId"] == stored["instanceId"]
    await again.stop()
    shutil.rmtree(tmp_path / "run")
    wiped = BookieServer(config)
    try:
        with pytest.raises(InvalidCookieError, match="cookie mismatch"):
            await wiped.start()
        assert tried == ["refused"] * 3, "no connection is accepted before the metadata store's cookie is checked"
        await wiped.store.delete(cookie_path(bookie_id))
    finally:
        await wiped.stop()
    fresh = BookieServer(config)
    await fresh.start()
    try:
        assert json.loads((await fresh.store.get(cookie_path(bookie_id))).value)["instanceId"] != stored["instanceId"]
    finally:
        await fresh.stop()


async def test_an_ephemeral_port_whose_id_belongs_to_another_bookie_is_exchanged_for_another(
    tmp_path: Path, store_url: str, monkeypatch, caplog
) -> None:
    """Goal: with --port 0, a port the OS hands out that an earlier bookie's id used (its cookie,
    another instance's, in the metadata store) is not a reason to refuse the start: that id is
    left to its bookie and another port is bound. Method: bookie A on port 0, stopped; bookie B
    on other dirs whose first bind is steered to A's port."""
    from minipulsar.ledger_paths import cookie_path
    from minipulsar.net.server import Listener

    first = BookieServer(service_config(tmp_path / "a", store_url))
    await first.start()
    taken_port, taken_id = first.port, first.bookie_id
    await first.stop()
    owner = json.loads(await _store_value(store_url, cookie_path(taken_id)))["instanceId"]

    real_start = Listener.start
    ports_asked: list[int] = []

    async def first_bind_on_the_taken_port(self, host, port, *, serve=True):
        ports_asked.append(port)
        return await real_start(self, host, taken_port if len(ports_asked) == 1 else port, serve=serve)

    monkeypatch.setattr(Listener, "start", first_bind_on_the_taken_port)
    second = BookieServer(service_config(tmp_path / "b", store_url))
    await second.start()
    try:
        assert second.port != taken_port and ports_asked == [0, 0]
        assert json.loads((await second.store.get(cookie_path(taken_id))).value)["instanceId"] == owner
        assert "belongs to another bookie instance" in caplog.text
        conn = await connect(RawClient, second.host, second.port, role="test")
        try:
            await add_entry(conn, 1, 0, b"served")
        finally:
            conn.close()
    finally:
        await second.stop()


async def _store_value(store_url: str, path: str) -> bytes:
    store = await open_metadata_store(store_url)
    try:
        return (await store.get(path)).value
    finally:
        await store.close()


async def test_adds_are_not_held_up_by_reads_waiting_their_turn_on_the_same_connection(
    service: BookieServer, client: RawClient, monkeypatch
) -> None:
    """Goal: a connection with more reads than READS_IN_FLIGHT_MAX outstanding (the rest wait
    their turn) still has its adds read and acknowledged — a broker's adds and reads share its
    connection to a bookie, and a catch-up reader must not hold the writes back. Method: reads
    of one ledger block on a gate; 100 of them, then 20 adds to another ledger on the same
    connection; the adds are acknowledged before the gate opens; then every read is answered."""
    from minipulsar.bookie import metrics as bookie_metrics
    from minipulsar.bookie.server_connection import READS_IN_FLIGHT_MAX
    from minipulsar.bookie.storage.db_ledger_storage import DbLedgerStorage

    gate = threading.Event()
    real_read = DbLedgerStorage.read_entries

    def gated(self, ledger_id, first_entry_id, count, max_bytes):
        if ledger_id == 7:
            gate.wait(30)
        return real_read(self, ledger_id, first_entry_id, count, max_bytes)

    await add_entry(client, 7, 0, entry_payload(7, 0))
    monkeypatch.setattr(DbLedgerStorage, "read_entries", gated)
    try:
        reads = [asyncio.ensure_future(read_entries(client, 7, 0)) for _ in range(READS_IN_FLIGHT_MAX + 36)]
        await wait_for(
            lambda: bookie_metrics.TOTALS.reads_in_progress >= len(reads), 10, message="the reads did not all arrive"
        )  # the adds then come in a later socket read
        adds = await asyncio.wait_for(
            asyncio.gather(*(add_entry(client, 8, i, entry_payload(8, i), lac=i - 1) for i in range(20))), 10
        )
        assert [r.entry_id for r in adds] == list(range(20))
        assert not any(r.done() for r in reads)
    finally:
        gate.set()
    assert all(got == [(0, entry_payload(7, 0))] for got in await asyncio.wait_for(asyncio.gather(*reads), 10))


async def test_the_add_rate_lab_fault_refuses_adds_beyond_its_rate(tmp_path: Path, store_url: str) -> None:
    """Goal: with minipulsarAddErrorAboveAddsPerSecond, a burst beyond one second's worth is
    answered TooManyRequests; adds within the rate, and recovery adds, are acknowledged."""
    service = BookieServer(service_config(tmp_path, store_url, minipulsarAddErrorAboveAddsPerSecond="20"))
    await service.start()
    conn = await connect(RawClient, service.host, service.port)
    try:
        outcomes = await asyncio.gather(
            *(add_entry(conn, 15, i, entry_payload(15, i)) for i in range(100)), return_exceptions=True
        )
        refused = [o for o in outcomes if isinstance(o, BaseException)]
        assert all(isinstance(o, TooManyRequestsError) for o in refused), refused
        assert 20 <= len(outcomes) - len(refused) <= 30  # one second's worth, plus what refilled meanwhile
        assert (await add_entry(conn, 16, 0, b"r", recovery=True)).entry_id == 0
    finally:
        conn.close()
        await service.stop()
