"""A real bookie process under load: its load report on the binary port (BOOKIE_INFO) and over
HTTP (``GET /api/v1/bookie/info``), the read thread pool pushing back a heavy reader, and the
non-storage metrics on ``/metrics``."""

from __future__ import annotations

import asyncio

from minipulsar.errors import TooManyRequestsError
from minipulsar.net import connect
from minipulsar.protocol.commands import AddEntry, BookieInfo, ReadEntry
from tests.support.fixtures import bookie_fixture
from tests.support.process import ServerProcess, wait_for
from tests.support.raw_client import RawClient
from tests.support.web import get_json, metric_value, metrics_text, web_url

LOAD_KEYS = {
    "journalWriteBytesPerSecond",
    "journalDiskWriteBytesPerSecond",
    "journalDiskId",
    "journalSyncLatencyMsAvg",
    "journalSyncLatencyMsP99",
    "journalIoUtil",
    "ledgerIoUtil",
    "cpuUsedRate",
    "loadWindowSeconds",
    "ledgerDirsUsedFraction",
    "ledgerDirsFreeBytes",
    "ledgerDirsTotalBytes",
    "ledgerDirsUsage",
    "writableLedgerDirs",
    "pendingAdds",
    "pendingReads",
    "readPoolPending",
    "readOnly",
    "state",
}
bookie = bookie_fixture(settings={"numReadWorkerThreads": 2, "maxPendingReadRequestsPerThread": 100})
METRIC_NAMES = (
    "bookkeeper_server_ADD_ENTRY_REQUEST_bucket",
    "bookkeeper_server_READ_ENTRY_REQUEST_bucket",
    "bookkeeper_server_BookieReadThreadPool_queue_0",
    "bookkeeper_server_BookieReadThreadPool_max_queue_size",
    "bookkeeper_server_BookieReadThreadPool_task_queued_bucket",
    "bookkeeper_server_READ_ENTRY_REJECTED",
    "bookie_SERVER_STATUS",
    "bookie_ledger_writable_dirs",
)


async def test_bookie_info_reports_journal_throughput_fsync_latency_disk_and_state(bookie: ServerProcess) -> None:
    """Goal: the figures load-aware placement needs, over the last seconds, on both endpoints.
    Method: keep adding 64 KiB entries (journalSyncData on) until BOOKIE_INFO shows a write
    rate and an fsync latency; then compare with the HTTP report."""
    conn = await connect(RawClient, bookie.host, bookie.port)
    payload = bytes(64 * 1024)
    entry_ids = iter(range(1_000_000))

    async def busy_report() -> bool:
        await asyncio.gather(
            *(conn.request(AddEntry, ledger_id=7, entry_id=next(entry_ids), payload=payload) for _ in range(20))
        )
        info = (await conn.request(BookieInfo)).info
        return info["journalWriteBytesPerSecond"] > 0 and info["journalSyncLatencyMsAvg"] is not None

    await wait_for(busy_report, timeout_s=20, interval_s=0.05)
    response = await conn.request(BookieInfo)
    info = response.info
    assert info.keys() >= LOAD_KEYS
    assert info["journalSyncLatencyMsP99"] >= info["journalSyncLatencyMsAvg"] > 0
    assert 0 <= info["ledgerDirsUsedFraction"] <= 1 and info["readOnly"] is False and info["state"] == "writable"
    assert 0 < response.free_disk_bytes == info["ledgerDirsFreeBytes"] <= response.total_disk_bytes
    assert info["pendingAdds"] >= 0 and info["readPoolPending"] == 0
    over_http = await asyncio.to_thread(get_json, f"{web_url(bookie)}/api/v1/bookie/info")
    assert over_http.keys() >= LOAD_KEYS and over_http["bookieId"] == info["bookieId"]
    assert over_http["freeSpace"] == over_http["ledgerDirsFreeBytes"] and over_http["state"] == "writable"
    conn.close()


async def test_a_heavy_reader_gets_too_many_requests_while_adds_complete(bookie: ServerProcess) -> None:
    """Goal: a catch-up reader that floods one read thread is refused at the door
    (maxPendingReadRequestsPerThread=100), and adds on another connection are not held up.
    Method: pipeline 400 range reads of one ledger (all on one read thread) beside 300 adds
    to another ledger; some reads fail with TooManyRequests, the rest return entries, every
    add is acknowledged, and READ_ENTRY_REJECTED counts the refusals."""
    writer = await connect(RawClient, bookie.host, bookie.port)
    reader = await connect(RawClient, bookie.host, bookie.port)
    await asyncio.gather(*(writer.request(AddEntry, ledger_id=1, entry_id=i, payload=bytes(100)) for i in range(50)))
    rejected_before = await metric_value(bookie, "bookkeeper_server_READ_ENTRY_REJECTED")
    reads = [reader.request(ReadEntry, ledger_id=1, first_entry_id=i % 50, count=10) for i in range(400)]
    adds = [writer.request(AddEntry, ledger_id=2, entry_id=i, payload=bytes(1000)) for i in range(300)]
    read_results, add_results = await asyncio.gather(
        asyncio.gather(*reads, return_exceptions=True), asyncio.gather(*adds, return_exceptions=True)
    )
    refused = [r for r in read_results if isinstance(r, TooManyRequestsError)]
    served = [r for r in read_results if not isinstance(r, BaseException)]
    assert refused and served and len(refused) + len(served) == 400, {type(r) for r in read_results}
    assert all(r.entries and r.entries[0][1] == bytes(100) for r in served)
    assert [r.entry_id for r in add_results] == list(range(300)), "every add is acknowledged"
    assert await metric_value(bookie, "bookkeeper_server_READ_ENTRY_REJECTED") == rejected_before + len(refused)
    writer.close()
    reader.close()


async def test_metrics_use_bookkeepers_names(bookie: ServerProcess) -> None:
    text = await asyncio.to_thread(metrics_text, bookie)
    names = {line.split("{")[0].split()[0] for line in text.splitlines() if line and not line.startswith("#")}
    missing = [name for name in METRIC_NAMES if name not in names]
    assert not missing, f"missing on /metrics: {missing}"
    assert "bookkeeper_server_BookieReadThreadPool_max_queue_size 100.0" in text
