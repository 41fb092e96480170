"""Bookies sharing one journal disk (BIGO: three bookies per journal disk): each one's load
report shows the DISK's write throughput, its neighbours' writes included, so that load-aware
placement sees a bookie on a saturated disk as loaded even when its own journal is quiet.

Two ways to share a disk: a real one (a loop-mounted ext4, needs root), and the SIMULATED
shared device of the disk model (``journal_device=``), whose bandwidth cap holds for the sum
of the processes writing to it."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path

import pytest

from minipulsar.bookie.disk_model import shared_device
from minipulsar.bookkeeper.bookie_load_poller import load_report
from minipulsar.net import connect
from minipulsar.protocol.commands import AddEntry, BookieInfo
from tests.support.jepsen.disks import LoopDisk, loop_disks_missing
from tests.support.process import started, wait_for
from tests.support.raw_client import RawClient
from tests.support.servers import bookie_process, metastore_process

MB = 1_000_000


@pytest.fixture
def loop_disk(tmp_path: Path) -> Iterator[LoopDisk]:
    """One loop-mounted ext4 for the journals of both bookies."""
    if (missing := loop_disks_missing()) is not None:
        pytest.skip(missing)
    disk = LoopDisk(tmp_path / "journal-disk.img", tmp_path / "journal-disk").mount()
    try:
        yield disk
    finally:
        disk.unmount()


@contextlib.asynccontextmanager
async def neighbours(
    root: Path, journal_root: Path, settings: Mapping[str, object] | None = None
) -> AsyncIterator[tuple[RawClient, RawClient]]:
    """Two bookies whose journals are under ``journal_root`` (ledgers each under ``root``);
    yields a connection to each."""
    metastore = metastore_process(root)
    async with started(metastore):
        bookies = [
            bookie_process(
                root,
                metastore.url,
                journals=[journal_root / f"bookie-{i}"],
                ledgers=[f"bookie-{i}/ledgers"],
                settings=settings,
                name=f"bookie-{i}",
            )
            for i in range(2)
        ]
        async with started(*bookies):
            busy, quiet = [await connect(RawClient, b.host, b.port) for b in bookies]
            try:
                yield busy, quiet
            finally:
                busy.close()
                quiet.close()


async def quiet_bookie_sees_its_neighbour(busy: RawClient, quiet: RawClient) -> dict:
    """Add 64 KiB entries to ``busy`` only until ``quiet``'s report shows at least 1 MB/s on
    its journal disk; returns that report."""
    entry_ids = iter(range(1_000_000))

    async def disk_busy() -> bool:
        await asyncio.gather(
            *(
                busy.request(AddEntry, ledger_id=7, entry_id=next(entry_ids), payload=bytes(64 * 1024))
                for _ in range(20)
            )
        )
        info = (await quiet.request(BookieInfo)).info
        return (info["journalDiskWriteBytesPerSecond"] or 0.0) >= MB

    await wait_for(disk_busy, timeout_s=30, interval_s=0.05)
    return (await quiet.request(BookieInfo)).info


async def test_a_quiet_bookie_on_a_loop_disk_its_neighbour_fills_reports_the_disk_busy(
    tmp_path: Path, loop_disk: LoopDisk
) -> None:
    """Goal: the journal-disk figure comes from the block device (``/sys/dev/block/7:N/stat``
    of a loop device) and counts every writer of it. Method: two bookies' journals on one
    loop-mounted ext4; adds to one only; the other's report shows its disk busy, its own
    journal idle, and both name the loop device."""
    async with neighbours(tmp_path, loop_disk.mount_point) as (busy, quiet):
        info = await quiet_bookie_sees_its_neighbour(busy, quiet)
        assert info["journalWriteBytesPerSecond"] == 0.0, "the quiet bookie wrote nothing itself"
        assert info["journalDiskId"] == loop_disk.major_minor
        busy_info = (await busy.request(BookieInfo)).info
        assert busy_info["journalDiskId"] == loop_disk.major_minor and busy_info["journalWriteBytesPerSecond"] > 0
        report = load_report(await quiet.request(BookieInfo), received_at_s=0.0)
        assert report.journal_load_bytes_per_s >= MB > report.journal_write_bytes_per_s


async def test_a_quiet_bookie_on_a_simulated_shared_journal_device_reports_the_device_busy(tmp_path: Path) -> None:
    """Goal: without root, the SIMULATED shared journal device stands for the disk: its byte
    counter, written by every bookie process naming the file, is the journal-disk figure.
    Method: as with the loop disk, both bookies on ``journal_device=<tmp>/journal-disk.dev``."""
    device = tmp_path / "journal-disk.dev"
    settings = {"minipulsarSimulatedDiskModel": f"ssd:journal_device={device}"}
    async with neighbours(tmp_path, tmp_path / "journals", settings) as (busy, quiet):
        info = await quiet_bookie_sees_its_neighbour(busy, quiet)
        assert info["journalWriteBytesPerSecond"] == 0.0, "the quiet bookie wrote nothing itself"
        assert info["journalDiskId"] == (await busy.request(BookieInfo)).info["journalDiskId"] == f"simulated:{device}"


WRITER = """
import sys, time
from pathlib import Path
from minipulsar.bookie.disk_model import DiskModel, DiskModelSpec
model = DiskModel(DiskModelSpec.parse(sys.argv[1]))
print("ready", flush=True)
sys.stdin.readline()
started = time.monotonic()
for _ in range(20):
    model.wrote("/journal/current", 1_000_000, False, journal=True)
print(started, time.monotonic(), flush=True)
"""


def test_the_bandwidth_cap_of_a_shared_device_holds_for_the_sum_of_the_processes(tmp_path: Path) -> None:
    """Goal: BIGO's neighbours share ONE disk's bandwidth. Method: two processes, started
    together, each write 20 x 1 MB to one device file at 50 MB/s (0.4 s alone); they overlap,
    and the last finishes at least 0.8 s (40 MB at 50 MB/s) after the first started."""
    spec = f"hdd:fsync_ms=0,mb_s=50,journal_device={tmp_path / 'journal-disk.dev'}"
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, spec], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        for writer in writers:
            assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        for writer in writers:
            assert writer.stdin is not None
            writer.stdin.write("go\n")
            writer.stdin.flush()
        spans = [tuple(map(float, writer.communicate(timeout=30)[0].split())) for writer in writers]
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
                writer.wait()
    assert all(writer.returncode == 0 for writer in writers)
    assert max(start for start, _ in spans) < min(end for _, end in spans), f"the writers overlapped: {spans}"
    assert max(end for _, end in spans) - min(start for start, _ in spans) >= 0.8 * 0.99, spans
    assert shared_device(tmp_path / "journal-disk.dev").written_bytes() == 40 * MB
