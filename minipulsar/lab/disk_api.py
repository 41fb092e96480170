"""What a scenario asks of its disks, whatever backs them (:mod:`minipulsar.lab.disks`).

A scenario names the disks its topology needs (``journal-0``, ``ledger-3``) and places each
bookie's journal and ledger directories on them; several bookies may share one disk (BIGO's
three bookies per journal HDD). The provider decides what a disk is:

- ``EMULATED-HDD``: a loop device throttled by cgroup blkio, so contention is the kernel's;
- ``SIMULATED-HDD``: a plain directory plus the bookie setting that models the disk in the
  bookie process (``minipulsarSimulatedDiskModel``), shared across processes by a device file;
- ``REAL``: a sub-directory of a mount the user named (``--journal-dir``/``--ledger-dir``).

Invariants: a :class:`DiskSet` removes everything it made when its context exits;
:attr:`DiskSet.label` says which of the three it is, in words a report can quote.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, Protocol

DiskRole = Literal["journal", "ledger"]


class Disk(Protocol):
    name: str
    role: DiskRole

    def directory(self, owner: str) -> Path:
        """A fresh directory on this disk for ``owner`` (``bookie-2``), created."""
        ...

    def written_bytes(self) -> float | None:
        """Bytes written to the device since it was made (None: this kind of disk cannot say)."""
        ...

    def read_bytes(self) -> float | None: ...


class DiskSet(Protocol):
    label: str

    def disk(self, name: str, role: DiskRole) -> Disk:
        """The disk ``name``, made on first use (later calls return the same one)."""
        ...

    def bookie_settings(self, journal: Disk, ledger: Disk) -> Mapping[str, object]:
        """Settings a bookie with its journal on ``journal`` and ledgers on ``ledger`` needs
        (the SIMULATED model's spec; nothing for the others)."""
        ...

    def drop_caches(self) -> None:
        """Forget cached pages of these disks' files, so the next read reaches the device (best effort)."""
        ...


class DiskProvider(Protocol):
    def disk_set(
        self, root: Path, variant: str, write_mb_s: float | None = None, write_iops: int | None = None
    ) -> contextlib.AbstractAsyncContextManager[DiskSet]:
        """Disks for ``variant`` under ``root``; ``write_mb_s``/``write_iops`` override the HDD
        profile's (a scenario sizes its disks to its load; REAL disks are what they are)."""
        ...
