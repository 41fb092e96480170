"""EMULATED-HDD disks: loop devices throttled by cgroup v1 blkio, below the filesystem.

Each disk is a sparse backing file (``minipulsar-lab-<name>.img``), attached with
``losetup --direct-io=on`` (no second page cache under the filesystem), formatted ext4 without
its journal (so one fsync costs about one data write and one flush, as on a raw HDD, not
the ~6 I/Os of a journalled metadata update) and mounted. The root blkio cgroup then
throttles the *loop device*: ``blkio.throttle.{write,read}_{bps,iops}_device``. Every process
writing to it — several bookies sharing a journal disk, their writeback, a catch-up read —
queues in the kernel for the same device budget, so contention is real, not modelled.

The profile is an HDD scaled to what Python bookies on two cores can drive: the bandwidth of
:data:`HDD` is a fifteenth of a 7200 rpm disk's ~120 MB/s (a scenario may size it to its load),
reads are capped at 150 IOPS, a seek each; writes at 1000 IOPS, as a disk's write-back cache
merges a journal's sequential writes, so one fsync (a write and a flush) costs about 2 ms
before any queueing, and the bandwidth, not the count of syncs, is what saturates.

Invariants:
- everything made is undone when the context exits (throttles reset to 0, unmounted, loop
  detached, backing file removed), also when the body raises or is cancelled;
- only loop devices whose backing file this module named are ever touched
  (:func:`cleanup_stale` detaches those a killed run left behind).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from minipulsar.lab.disk_api import DiskRole

log = logging.getLogger(__name__)

BLKIO = Path("/sys/fs/cgroup/blkio")
THROTTLE_FILES = ("write_bps_device", "read_bps_device", "write_iops_device", "read_iops_device")
BACKING_PREFIX = "minipulsar-lab-"
DISK_BYTES = 512 * 1024 * 1024
SECTOR_BYTES = 512
COMMAND_TIMEOUT_S = 60


@dataclass(frozen=True, slots=True)
class HddProfile:
    write_mb_s: float
    read_mb_s: float
    write_iops: int
    read_iops: int

    def describe(self) -> str:
        return (
            f"loop devices throttled by cgroup blkio to {self.write_mb_s:g} MB/s write, {self.read_mb_s:g} MB/s read,"
            f" {self.write_iops} write / {self.read_iops} read IOPS"
        )


HDD = HddProfile(write_mb_s=8.0, read_mb_s=8.0, write_iops=1000, read_iops=150)


def unavailable_reason() -> str | None:
    """Why EMULATED-HDD cannot run here (None: it can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "not root (loop devices and blkio throttles need root)"
    if not (BLKIO / "blkio.throttle.write_bps_device").exists():
        return f"no cgroup v1 blkio throttling at {BLKIO}"
    for tool in ("losetup", "mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


def _run(*command: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if done.returncode != 0:
        raise OSError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def _throttle(device: str, profile: HddProfile | None) -> None:
    values = (
        (0, 0, 0, 0)
        if profile is None
        else (
            int(profile.write_mb_s * 1e6),
            int(profile.read_mb_s * 1e6),
            profile.write_iops,
            profile.read_iops,
        )
    )
    for name, value in zip(THROTTLE_FILES, values):
        (BLKIO / f"blkio.throttle.{name}").write_text(f"{device} {value}\n")


@dataclass
class EmulatedDisk:
    name: str
    role: DiskRole
    image: Path
    mount_point: Path
    loop: str = ""
    device: str = ""
    """``MAJ:MIN`` of the loop device."""

    def attach(self, profile: HddProfile) -> None:
        """Make, format, mount and throttle the disk (blocking). On failure, undoes what it did."""
        try:
            with open(self.image, "wb") as image:
                image.truncate(DISK_BYTES)
            self.loop = _run("losetup", "--find", "--show", "--direct-io=on", str(self.image)).strip()
            self.device = Path(f"/sys/block/{Path(self.loop).name}/dev").read_text().strip()
            _run(
                "mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-E", "lazy_itable_init=0,lazy_journal_init=0", self.loop
            )
            self.mount_point.mkdir(parents=True, exist_ok=True)
            _run("mount", "-o", "noatime", self.loop, str(self.mount_point))
            _throttle(self.device, profile)
        except BaseException:
            self.detach()
            raise

    def detach(self) -> None:
        """Undo :meth:`attach` as far as it got (blocking; never raises for what is already gone)."""
        if self.device:
            with contextlib.suppress(OSError):
                _throttle(self.device, None)
        if self.mount_point.is_mount():
            try:
                _run("umount", str(self.mount_point))
            except OSError:
                _run("umount", "--lazy", str(self.mount_point))
        if self.loop:
            with contextlib.suppress(OSError):
                _run("losetup", "--detach", self.loop)
        self.image.unlink(missing_ok=True)

    def directory(self, owner: str) -> Path:
        path = self.mount_point / owner
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _stat(self) -> list[int] | None:
        try:
            return [int(field) for field in Path(f"/sys/block/{Path(self.loop).name}/stat").read_text().split()]
        except (OSError, ValueError):
            return None

    def written_bytes(self) -> float | None:
        fields = self._stat()
        return None if fields is None else float(fields[6] * SECTOR_BYTES)

    def read_bytes(self) -> float | None:
        fields = self._stat()
        return None if fields is None else float(fields[2] * SECTOR_BYTES)


class EmulatedDiskSet:
    def __init__(self, root: Path, profile: HddProfile) -> None:
        self.root = root
        self.profile = profile
        self.label = f"EMULATED-HDD ({profile.describe()})"
        self.disks: dict[str, EmulatedDisk] = {}

    def disk(self, name: str, role: DiskRole) -> EmulatedDisk:
        if name not in self.disks:
            disk = EmulatedDisk(name, role, self.root / f"{BACKING_PREFIX}{name}.img", self.root / name)
            self.disks[name] = disk  # before attaching: a failed attach is still cleaned up
            disk.attach(self.profile)
        return self.disks[name]

    def bookie_settings(self, journal: object, ledger: object) -> Mapping[str, object]:
        return {}

    def drop_caches(self) -> None:
        """Write dirty pages back and drop the page cache (all of it: the kernel has no per-device knob)."""
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("1\n")

    def close(self) -> None:
        for disk in reversed(list(self.disks.values())):
            disk.detach()


@dataclass(frozen=True)
class EmulatedDisks:
    profile: HddProfile = HDD

    @property
    def label(self) -> str:
        return f"EMULATED-HDD ({self.profile.describe()})"

    @contextlib.asynccontextmanager
    async def disk_set(
        self, root: Path, variant: str, write_mb_s: float | None = None, write_iops: int | None = None
    ) -> AsyncIterator[EmulatedDiskSet]:
        await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
        profile = dataclasses.replace(
            self.profile,
            write_mb_s=self.profile.write_mb_s if write_mb_s is None else write_mb_s,
            write_iops=self.profile.write_iops if write_iops is None else write_iops,
        )
        disks = EmulatedDiskSet(root, profile)
        try:
            yield disks
        finally:
            await asyncio.shield(asyncio.to_thread(disks.close))


def cleanup_stale(work_root: Path) -> list[str]:
    """Detach loop devices backed by this module's images under ``work_root`` whose run is gone
    (the image is deleted, or its directory no longer exists); returns the devices detached."""
    try:
        devices = json.loads(_run("losetup", "--list", "--json", "--output", "NAME,BACK-FILE") or "{}")
    except (OSError, ValueError):
        return []
    detached = []
    for entry in devices.get("loopdevices", []):
        raw = entry.get("back-file") or ""
        backing = raw.removesuffix(" (deleted)")
        ours = Path(backing).name.startswith(BACKING_PREFIX) and backing.startswith(str(work_root))
        if ours and (raw != backing or not Path(backing).exists()):
            for mount in Path("/proc/mounts").read_text().splitlines():
                if mount.split()[0] == entry["name"]:
                    subprocess.run(["umount", "--lazy", mount.split()[1]], capture_output=True, check=False)
            subprocess.run(["losetup", "--detach", entry["name"]], capture_output=True, check=False)
            detached.append(entry["name"])
    return detached
