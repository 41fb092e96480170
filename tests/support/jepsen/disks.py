"""Disks a nemesis can fill or slow: a small loop-mounted ext4 per faulty bookie's ledger dir,
and cgroup v1 blkio throttling of its loop device.

- Needs root, ``losetup``, ``mkfs.ext4`` and ``mount``; :func:`loop_disks_missing` says what is
  missing (the harness then leaves the disk faults out, and says so).
- :class:`LoopDisk` is mounted before its bookie starts, so the bookie never sees the directory
  change under it; ``fill`` leaves ``free_bytes`` free (a bookie past its disk-usage threshold
  turns read-only; what it still has to flush mostly fits), ``drain`` removes the filler.
- :class:`BlkioThrottle` moves one process into a cgroup whose writes to the device are limited
  to ``bytes_per_s`` (buffered writes are charged when they are synced: the journal and entry
  log flushes are what slows); ``release`` moves it back and removes the cgroup.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["BLKIO_ROOT", "BlkioThrottle", "LoopDisk", "blkio_missing", "loop_disks_missing"]

BLKIO_ROOT = Path("/sys/fs/cgroup/blkio")
FILLER = ".nemesis-filler"
TOOLS = ("losetup", "mkfs.ext4", "mount", "umount")


def loop_disks_missing() -> str | None:
    """Why loop-mounted disks cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "loop-mounted disks need root"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"loop-mounted disks need {', '.join(missing)}"
    if not Path("/dev/loop-control").exists():
        return "no /dev/loop-control: this kernel has no loop devices"
    return None


def blkio_missing() -> str | None:
    if os.geteuid() != 0:
        return "blkio throttling needs root"
    if not (BLKIO_ROOT / "blkio.throttle.write_bps_device").exists():
        return f"no cgroup v1 blkio throttling at {BLKIO_ROOT}"
    return None


def _run(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, timeout=60).stdout.strip()


class LoopDisk:
    """An ext4 of ``size_mb`` in ``image`` mounted at ``mount_point``."""

    def __init__(self, image: Path, mount_point: Path, size_mb: int = 64) -> None:
        self.image, self.mount_point, self.size_mb = image, mount_point, size_mb
        self.device = ""

    def mount(self) -> LoopDisk:
        self.image.parent.mkdir(parents=True, exist_ok=True)
        with open(self.image, "wb") as image:
            image.truncate(self.size_mb * 1024 * 1024)
        self.device = _run("losetup", "--find", "--show", str(self.image))
        _run("mkfs.ext4", "-q", "-F", "-m", "0", self.device)
        self.mount_point.mkdir(parents=True, exist_ok=True)
        _run("mount", self.device, str(self.mount_point))
        return self

    def unmount(self) -> None:
        if not self.device:
            return
        with contextlib.suppress(subprocess.CalledProcessError):
            _run("umount", "--lazy", str(self.mount_point))
        with contextlib.suppress(subprocess.CalledProcessError):
            _run("losetup", "--detach", self.device)
        self.device = ""
        self.image.unlink(missing_ok=True)

    @property
    def major_minor(self) -> str:
        device = os.stat(self.device).st_rdev
        return f"{os.major(device)}:{os.minor(device)}"

    def fill(self, free_bytes: int = 8 * 1024 * 1024) -> None:
        """Write a filler file until only ``free_bytes`` are left (or the disk is full)."""
        stats = os.statvfs(self.mount_point)
        size = max(0, stats.f_bavail * stats.f_frsize - free_bytes)
        with contextlib.suppress(OSError), open(self.mount_point / FILLER, "wb") as filler:
            os.posix_fallocate(filler.fileno(), 0, size)

    def drain(self) -> None:
        (self.mount_point / FILLER).unlink(missing_ok=True)


class BlkioThrottle:
    def __init__(self, name: str, major_minor: str, bytes_per_s: int) -> None:
        self.path = BLKIO_ROOT / name
        self.major_minor, self.bytes_per_s = major_minor, bytes_per_s

    def apply(self, pid: int) -> None:
        self.path.mkdir(exist_ok=True)
        for key in ("write_bps_device", "read_bps_device"):
            (self.path / f"blkio.throttle.{key}").write_text(f"{self.major_minor} {self.bytes_per_s}\n")
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def release(self) -> None:
        if not self.path.exists():
            return
        for pid in (self.path / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):  # it may have exited meanwhile
                (BLKIO_ROOT / "cgroup.procs").write_text(f"{pid}\n")
        with contextlib.suppress(OSError):
            self.path.rmdir()
