"""The ledger directories (``ledgerDirectories``) and their disk usage.

Each holds, under ``current/``, the bookie's cookie (``VERSION``), the entry logs, the index
(``index.db``) and the checkpoint mark (``lastMark``) of the ledgers placed there. Disk
figures come from ``statvfs``, counting each filesystem once even when several ledger dirs
share it. Blocking: call off the event loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from minipulsar.durable_file import make_dirs

CURRENT_DIR = "current"
"""BookKeeper keeps a bookie's files in ``<dir>/current``; so do we."""


@dataclass(frozen=True, slots=True)
class DiskUsage:
    free_bytes: int
    total_bytes: int


class LedgerDirs:
    def __init__(self, dirs: list[str] | tuple[str, ...]) -> None:
        self.dirs = [Path(d) for d in dirs]

    @property
    def current_dirs(self) -> list[Path]:
        return [d / CURRENT_DIR for d in self.dirs]

    def create(self) -> None:
        for current in self.current_dirs:
            make_dirs(current)

    def disk_usage(self) -> DiskUsage:
        free = total = 0
        seen: set[int] = set()
        for directory in self.dirs:
            device = os.stat(directory).st_dev
            if device in seen:
                continue
            seen.add(device)
            stat = os.statvfs(directory)
            free += stat.f_bavail * stat.f_frsize
            total += stat.f_blocks * stat.f_frsize
        return DiskUsage(free, total)
