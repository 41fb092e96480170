"""The fault harness's fault kinds do what they say, each on a one-bookie cluster:

- a partition cuts a bookie off — its port answers nothing, its registration goes with its
  metadata session — and healing brings it back;
- a full loop-mounted ledger disk turns its bookie read-only, an emptied one writable again;
- blkio throttling slows a process's direct writes to the loop device.

The disk kinds need root and loop devices (and blkio): they skip, saying why, where missing.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest

from minipulsar.metadata import open_metadata_store
from tests.support.jepsen.disks import BlkioThrottle, LoopDisk, blkio_missing, loop_disks_missing
from tests.support.jepsen.faults import DiskFull, Partition
from tests.support.jepsen.profiles import Profile
from tests.support.jepsen.run import jepsen_cluster
from tests.support.metadata import key_absent
from tests.support.process import wait_for

ONE_BOOKIE = Profile("one-bookie", bookies=1, brokers=0, quorum=(1, 1, 1), disk_bookies=(0,))
SESSION_S = 15.0
"""Time for a registration to go (session expiry) or come back (reconnect, re-register)."""


async def answers(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """Whether a connection to host:port gets any bytes back for a garbage frame."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except (OSError, TimeoutError):
        return False
    try:
        writer.write(b"\x00\x00\x00\x01\x00")
        await writer.drain()
        await asyncio.wait_for(reader.read(1), timeout_s)  # a byte, or the end: either is an answer
        return True
    except (OSError, TimeoutError):
        return False
    finally:
        writer.transport.abort()


async def test_a_partition_cuts_a_bookie_off_and_healing_brings_it_back(tmp_path: Path) -> None:
    async with jepsen_cluster(tmp_path, ONE_BOOKIE, with_disks=False) as cluster:
        bookie = cluster.bookies[0]
        registration = f"/ledgers/available/{bookie.address}"
        store = await open_metadata_store(cluster.metadata_url)
        try:
            assert await store.exists(registration)
            await Partition().begin(cluster, "bookie-0")
            assert not await answers(bookie.host, bookie.port), "a cut bookie answers nothing"
            await wait_for(lambda: key_absent(store, registration), SESSION_S, 0.2, "the registration outlived the cut")
            await Partition().end(cluster, "bookie-0")
            await wait_for(lambda: store.exists(registration), SESSION_S, 0.2, "the bookie did not register again")
            assert await answers(bookie.host, bookie.port)
        finally:
            await store.close()


@pytest.mark.skipif(loop_disks_missing() is not None, reason=str(loop_disks_missing()))
@pytest.mark.expect_error_log(r"is full: usage", r"No space left on device")
async def test_a_full_ledger_disk_turns_its_bookie_read_only_until_emptied(tmp_path: Path) -> None:
    async with jepsen_cluster(tmp_path, ONE_BOOKIE, with_disks=True) as cluster:
        readonly = f"/ledgers/available/readonly/{cluster.bookies[0].address}"
        store = await open_metadata_store(cluster.metadata_url)
        try:
            await DiskFull().begin(cluster, "bookie-0")
            await wait_for(lambda: store.exists(readonly), SESSION_S, 0.2, "a full disk left the bookie writable")
            await DiskFull().end(cluster, "bookie-0")
            await wait_for(lambda: key_absent(store, readonly), SESSION_S, 0.2, "an emptied disk left it read-only")
        finally:
            await store.close()


@pytest.mark.skipif(
    (loop_disks_missing() or blkio_missing()) is not None, reason=str(loop_disks_missing() or blkio_missing())
)
def test_blkio_throttling_slows_direct_writes_to_the_loop_disk(tmp_path: Path) -> None:
    disk = LoopDisk(tmp_path / "disk.img", tmp_path / "mnt", 16).mount()
    throttle = BlkioThrottle(f"minipulsar-test-{time.monotonic_ns()}", disk.major_minor, 256 * 1024)
    try:
        dd = subprocess.Popen(
            ["sh", "-c", f"read go; exec dd if=/dev/zero of={disk.mount_point}/f bs=64k count=16 oflag=direct"],
            stdin=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert dd.stdin is not None
        throttle.apply(dd.pid)
        started = time.monotonic()
        dd.stdin.write(b"go\n")
        dd.stdin.close()
        assert dd.wait(60) == 0
        assert time.monotonic() - started > 2.0, "1 MiB at 256 KiB/s takes about 4 s"
    finally:
        throttle.release()
        disk.unmount()
