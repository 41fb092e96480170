"""REAL disks: directories on mounts the user named, as they are (no throttle, no model).

``--journal-dir`` holds every journal disk, ``--ledger-dir`` every ledger disk: a "disk" is
then a sub-directory, and disks of one role share the mount's device (the label says so).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from minipulsar.lab.disk_api import Disk, DiskRole

SECTOR_BYTES = 512


def block_stat(path: Path) -> list[int] | None:
    """The fields of ``/sys/dev/block/M:m/stat`` of the device holding ``path`` (None: no such file)."""
    try:
        device = os.stat(path).st_dev
        text = Path(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}/stat").read_text()
        return [int(field) for field in text.split()]
    except (OSError, ValueError):
        return None


def describe_mount(path: Path) -> str:
    """``/mnt/hdd (ext4 on /dev/sdb1)`` from /proc/mounts, or the bare path when unknown."""
    best = ("", "", "")
    try:
        resolved = str(path.resolve())
        for line in Path("/proc/mounts").read_text().splitlines():
            device, mount_point, fstype, *_ = line.split()
            if (resolved == mount_point or resolved.startswith(mount_point.rstrip("/") + "/")) and len(
                mount_point
            ) > len(best[1]):
                best = (device, mount_point, fstype)
    except OSError:
        pass
    return f"{path} ({best[2]} on {best[0]})" if best[0] else str(path)


@dataclass
class PlainDisk:
    name: str
    role: DiskRole
    root: Path

    def directory(self, owner: str) -> Path:
        path = self.root / owner
        path.mkdir(parents=True, exist_ok=True)
        return path

    def written_bytes(self) -> float | None:
        fields = block_stat(self.root)
        return None if fields is None else float(fields[6] * SECTOR_BYTES)

    def read_bytes(self) -> float | None:
        fields = block_stat(self.root)
        return None if fields is None else float(fields[2] * SECTOR_BYTES)


class PlainDiskSet:
    def __init__(self, journal_root: Path, ledger_root: Path, label: str) -> None:
        self.label = label
        self._roots = {"journal": journal_root, "ledger": ledger_root}
        self._disks: dict[str, PlainDisk] = {}

    disk_type: type[PlainDisk] = PlainDisk

    def disk(self, name: str, role: DiskRole) -> PlainDisk:
        if name not in self._disks:
            root = self._roots[role] / name
            root.mkdir(parents=True, exist_ok=True)
            self._disks[name] = self.disk_type(name, role, root)
        return self._disks[name]

    def bookie_settings(self, journal: Disk, ledger: Disk) -> Mapping[str, object]:
        return {}

    def drop_caches(self) -> None:
        pass


@dataclass(frozen=True)
class RealDisks:
    """The user's mounts; each variant works in a fresh ``<mount>/minipulsar-lab-<variant>-*``, removed after."""

    journal_mount: Path
    ledger_mount: Path

    @property
    def label(self) -> str:
        return (
            f"REAL journal {describe_mount(self.journal_mount)}, ledgers {describe_mount(self.ledger_mount)}"
            " (disks of one role share the mount)"
        )

    @contextlib.asynccontextmanager
    async def disk_set(
        self, root: Path, variant: str, write_mb_s: float | None = None, write_iops: int | None = None
    ) -> AsyncIterator[PlainDiskSet]:
        roots = [Path(tempfile.mkdtemp(prefix=f"minipulsar-lab-{variant}-", dir=self.journal_mount))]
        roots.append(
            roots[0]
            if self.ledger_mount == self.journal_mount
            else Path(tempfile.mkdtemp(prefix=f"minipulsar-lab-{variant}-", dir=self.ledger_mount))
        )
        try:
            yield PlainDiskSet(roots[0] / "journal", roots[1] / "ledger", self.label)
        finally:
            for path in roots:
                shutil.rmtree(path, ignore_errors=True)
