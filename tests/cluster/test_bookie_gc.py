"""Garbage collection in a real bookie process against a real metastore: after most ledgers'
metadata is deleted, a forced GC (``PUT /api/v1/bookie/gc``) shrinks
the ledger dirs, the live ledgers read back byte-identical — also after a SIGKILL — and reads
running all through the compaction never fail.

Every ledger gets a real metadata key ``/ledgers/L{id}`` in the broker's JSON format before its
first entry, as the broker's BookKeeper client does. Entry logs are small (``logSizeLimit`` 64
KiB: many logs), read-ahead is off (every read goes to the index and an entry log, the path
that races with compaction) and compaction is throttled so that it lasts long enough for the
concurrent reader to cross it many times.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import pytest

from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata
from minipulsar.errors import MiniPulsarError, NoSuchLedgerError
from minipulsar.ledger_paths import ledger_path
from minipulsar.metadata import MetadataStore
from minipulsar.net import connect
from minipulsar.protocol.commands import AddEntry, ReadEntry
from tests.support.entries import payload_of_varied_size
from tests.support.process import ServerProcess, started, wait_for
from tests.support.raw_client import RawClient
from tests.support.servers import bookie_process
from tests.support.web import metric_value

LEDGERS = range(1, 41)
LIVE = [ledger_id for ledger_id in LEDGERS if ledger_id % 8 in (0, 1)]
"""A quarter of the ledgers, in both ledger dirs (ledger L lives in dir L mod 2)."""
ENTRIES = 50
WINDOW = 64
READ_BATCH = 10


LEDGER_DIRS = ("ledgers-a", "ledgers-b")
GC_BOOKIE = {
    "logSizeLimit": 65536,
    "flushInterval": 100,
    "dbStorage_writeCacheMaxSizeMb": 1,
    "dbStorage_readAheadCacheBatchSize": 0,
    "compactionRateByEntries": 500,
}
"""Small entry logs, no read-ahead, a throttled compaction (see the module docstring)."""
PAYLOAD_SIZES = (200, 1000, 2000, 4000)


def gc_payload(ledger_id: int, entry_id: int) -> bytes:
    return payload_of_varied_size(ledger_id, entry_id, PAYLOAD_SIZES)


def ledger_dirs_bytes(root: Path) -> int:
    return sum(path.stat().st_size for d in LEDGER_DIRS for path in (root / d).rglob("*") if path.is_file())


async def write_ledgers(conn: RawClient, store: MetadataStore, bookie: ServerProcess) -> None:
    for ledger_id in LEDGERS:
        metadata = LedgerMetadata(ledger_id, 1, 1, 1, ((0, (bookie.address,)),))
        await store.put(ledger_path(ledger_id), metadata.to_bytes(), -1)
    window = asyncio.Semaphore(WINDOW)

    async def add(ledger_id: int, entry_id: int) -> None:
        async with window:
            await conn.request(
                AddEntry,
                ledger_id=ledger_id,
                entry_id=entry_id,
                lac=entry_id - 1,
                payload=gc_payload(ledger_id, entry_id),
            )

    await asyncio.gather(*(add(ledger_id, entry_id) for entry_id in range(ENTRIES) for ledger_id in LEDGERS))


async def read_ledger(conn: RawClient, ledger_id: int) -> list[bytes]:
    payloads: list[bytes] = []
    while len(payloads) < ENTRIES:
        response = await conn.request(ReadEntry, ledger_id=ledger_id, first_entry_id=len(payloads), count=READ_BATCH)
        payloads.extend(payload for _, payload in response.entries)
    return payloads


async def assert_live_ledgers_intact(conn: RawClient) -> None:
    for ledger_id in LIVE:
        assert await read_ledger(conn, ledger_id) == [gc_payload(ledger_id, e) for e in range(ENTRIES)], ledger_id


class ConcurrentReader:
    """Reads the live ledgers in a loop, checking every byte, until stopped."""

    def __init__(self, conn: RawClient) -> None:
        self.conn = conn
        self.read_times: list[float] = []
        self.failures: list[str] = []
        self._stop = asyncio.Event()

    async def run(self) -> None:
        while not self._stop.is_set():
            for ledger_id in LIVE:
                try:
                    if await read_ledger(self.conn, ledger_id) != [gc_payload(ledger_id, e) for e in range(ENTRIES)]:
                        self.failures.append(f"ledger {ledger_id}: different bytes")
                except MiniPulsarError as exc:
                    self.failures.append(f"ledger {ledger_id}: {exc!r}")
                self.read_times.append(time.monotonic())

    def stop(self) -> None:
        self._stop.set()


async def test_gc_shrinks_the_ledger_dirs_and_live_ledgers_stay_readable_throughout(
    tmp_path: Path, metastore: ServerProcess, store: MetadataStore
) -> None:
    bookie = bookie_process(tmp_path, metastore.url, ledgers=LEDGER_DIRS, settings=GC_BOOKIE)
    async with started(bookie):
        conn = await connect(RawClient, bookie.host, bookie.port)
        await write_ledgers(conn, store, bookie)
        await wait_for(lambda: _write_cache_empty(bookie), timeout_s=10, message="the write cache never drained")
        before = ledger_dirs_bytes(tmp_path)
        logs_before = len(list(tmp_path.rglob("*.log")))
        assert logs_before >= 30, "small entry logs: many of them"

        for ledger_id in LEDGERS:
            if ledger_id not in LIVE:
                await store.delete(ledger_path(ledger_id))
        reader = ConcurrentReader(await connect(RawClient, bookie.host, bookie.port))
        reading = asyncio.create_task(reader.run())
        await wait_for(lambda: len(reader.read_times) > len(LIVE), timeout_s=10, message="reader not reading")
        gc_started = time.monotonic()
        async with aiohttp.ClientSession() as http:
            async with http.put(f"http://{bookie.host}:{bookie.http_port}/api/v1/bookie/gc") as response:
                assert response.status == 200, await response.text()
                result = await response.json()
        gc_done = time.monotonic()
        reader.stop()
        await reading

        assert result["deleted_ledgers"] == len(LEDGERS) - len(LIVE) and not result["errors"], result
        assert result["compaction"] == "major" and result["compacted_entry_logs"] > 0, result
        assert reader.failures == []
        during = [t for t in reader.read_times if gc_started <= t <= gc_done]
        assert len(during) >= 5, f"only {len(during)} ledger reads overlapped the {gc_done - gc_started:.2f}s GC"
        after = ledger_dirs_bytes(tmp_path)
        assert after < before * 0.5, f"ledger dirs {before} -> {after} bytes: {_files(tmp_path)}"
        assert len(list(tmp_path.rglob("*.log"))) < logs_before / 2
        await assert_live_ledgers_intact(conn)
        with pytest.raises(NoSuchLedgerError):
            await conn.request(ReadEntry, ledger_id=2, first_entry_id=0, count=1)
        assert await metric_value(bookie, "bookie_gc_DELETED_LEDGER_TOTAL") == len(LEDGERS) - len(LIVE)
        assert await metric_value(bookie, "bookie_gc_MAJOR_COMPACTION_TOTAL") == 1
        assert await metric_value(bookie, "bookie_gc_RECLAIMED_COMPACTION_SPACE_BYTES") > 0
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://{bookie.host}:{bookie.http_port}/api/v1/bookie/gc") as response:
                assert await response.json() == {"is_in_force_gc": False}
            gc_url = f"http://{bookie.host}:{bookie.http_port}/api/v1/bookie/gc"
            async with http.put(gc_url, json={"forceMajor": "false", "forceMinor": "false"}) as response:
                assert response.status == 200 and (await response.json())["compaction"] != "major"
            async with http.put(gc_url, json={"forceMajor": "maybe"}) as response:
                assert response.status == 400 and "forceMajor" in (await response.json())["error"]
        conn.close()
        reader.conn.close()

        bookie.kill()
        restarted = bookie_process(tmp_path, metastore.url, port=bookie.port, ledgers=LEDGER_DIRS, settings=GC_BOOKIE)
        async with started(restarted):
            conn = await connect(RawClient, restarted.host, restarted.port)
            await assert_live_ledgers_intact(conn)
            conn.close()


async def _write_cache_empty(bookie: ServerProcess) -> bool:
    return await metric_value(bookie, "bookie_write_cache_count") == 0


def _files(root: Path) -> str:
    return ", ".join(
        f"{p.relative_to(root)}={p.stat().st_size}"
        for p in sorted(root.rglob("*"))
        if p.is_file() and "ledgers" in str(p)
    )
