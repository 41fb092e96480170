"""SIMULATED-HDD disks: plain directories, and the bookie-side model of an HDD.

Where loop devices and blkio throttles cannot be had (not root), each disk is a directory
and every bookie is told to model its disks (``minipulsarSimulatedDiskModel``, see
minipulsar/bookie/disk_model.py): an HDD's fsync latency and bandwidth on journal syncs and
entry-log flushes. Bookies sharing a journal disk name one device file (``journal_device=``),
so their syncs queue for one modelled device and its write counter is the disk's. Reads are
not modelled: the reports say SIMULATED-HDD for that reason.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from minipulsar.lab.disk_api import Disk
from minipulsar.lab.plain_disks import PlainDisk, PlainDiskSet

MODEL = "hdd:fsync_ms=8,mb_s=8"
"""The emulated profile's HDD (:data:`minipulsar.lab.emulated_disks.HDD`) as the bookie's model."""


DEVICE_FILE = "device.dev"


class SimulatedDisk(PlainDisk):
    """A directory whose journal writes the bookies book on its device file (written bytes: its counter)."""

    @property
    def device_file(self) -> Path:
        return self.root / DEVICE_FILE

    def written_bytes(self) -> float | None:
        try:
            with open(self.device_file, "rb") as device:
                counter = device.read(8)
        except FileNotFoundError:
            return 0.0
        return float(int.from_bytes(counter, "little")) if len(counter) == 8 else 0.0

    def read_bytes(self) -> float | None:
        return None


class SimulatedDiskSet(PlainDiskSet):
    disk_type = SimulatedDisk

    def __init__(self, journal_root: Path, ledger_root: Path, label: str, model: str) -> None:
        super().__init__(journal_root, ledger_root, label)
        self.model = model

    def bookie_settings(self, journal: Disk, ledger: Disk) -> Mapping[str, object]:
        device = self.disk(journal.name, "journal").root / DEVICE_FILE
        return {"minipulsarSimulatedDiskModel": f"{self.model},journal_device={device.resolve()}"}


@dataclass(frozen=True)
class SimulatedDisks:
    @property
    def label(self) -> str:
        return f"SIMULATED-HDD (modelled in each bookie: {MODEL}, shared journal disks by a device file; no reads)"

    @contextlib.asynccontextmanager
    async def disk_set(
        self, root: Path, variant: str, write_mb_s: float | None = None, write_iops: int | None = None
    ) -> AsyncIterator[SimulatedDiskSet]:
        model = MODEL if write_mb_s is None else f"{MODEL.split(',mb_s=')[0]},mb_s={write_mb_s:g}"
        yield SimulatedDiskSet(root / "journal", root / "ledger", self.label, model)
