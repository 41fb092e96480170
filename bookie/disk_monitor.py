"""Disk space of the ledger dirs, and whether any of them can take new entries.

BookKeeper's ``LedgerDirsMonitor``: every ``diskCheckInterval`` the used fraction of each ledger
dir is read (``statvfs``: 1 - available / total, as Java's ``getUsableSpace`` counts it). The
rules (:func:`check_dirs`, pure):

- a writable dir above ``diskUsageThreshold`` becomes *full* (above ``diskUsageWarnThreshold``
  it is only logged as almost full);
- while at least one dir is writable, a full dir comes back as soon as its own usage is at or
  below ``diskUsageThreshold``;
- once every dir is full, none comes back until the *total* usage (each filesystem counted
  once) is below ``diskUsageLwmThreshold``. That gap is the hysteresis: a read-only bookie
  does not flap back to writable (and move its registration) on every small deletion.

The monitor only reports, to the :class:`~bookie.storage.ledger_dirs_manager.LedgerDirsManager`
it shares with the ledger storage: that one also holds the dirs a flush found out of space
(full until a check here finds them below the threshold) and the failed dirs (not read here
any more), and tells its listener when no dir is writable any more, or one is again (the
bookie then turns read-only, or writable: :mod:`bookie.state_manager`; with
``readOnlyModeEnabled=false`` the owner shuts the bookie down).

Each dir's last reading is also its ``bookie_ledger_dir_<path>_usage`` gauge
(:func:`bookie.metrics.ledger_dir_usage_name`; :meth:`LedgerDirsMonitor.used_fractions`).

Tests drive a real process through ``minipulsarDiskUsageOverrideFile`` (TEST ONLY): when set
and readable, that file's number is every dir's used fraction; free bytes are derived from it
and the filesystem's real size, so load reports stay consistent.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from minipulsar.bookie import metrics
from minipulsar.bookie.storage.ledger_dirs_manager import LedgerDirsManager
from minipulsar.config import BookieConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DirUsage:
    directory: Path
    used_fraction: float
    """1 - free_bytes / total_bytes, in [0, 1]."""
    free_bytes: int
    """Bytes available to the bookie (``f_bavail``, not counting root's reserve)."""
    total_bytes: int
    device: int
    """``st_dev`` of the filesystem: dirs on one filesystem are counted once in totals."""


@dataclass(frozen=True, slots=True)
class Thresholds:
    full: float
    """diskUsageThreshold"""
    warn: float
    """diskUsageWarnThreshold"""
    lwm: float
    """diskUsageLwmThreshold"""

    @classmethod
    def from_config(cls, config: BookieConfig) -> Thresholds:
        return cls(config.disk_usage_threshold, config.disk_usage_warn_threshold, config.disk_usage_lwm_threshold)


def filesystem_space(usages: Sequence[DirUsage]) -> tuple[int, int]:
    """(free, total) bytes over the filesystems holding the dirs, each counted once."""
    by_device = {usage.device: usage for usage in usages}
    return (
        sum(usage.free_bytes for usage in by_device.values()),
        sum(usage.total_bytes for usage in by_device.values()),
    )


def total_used_fraction(usages: Sequence[DirUsage]) -> float:
    """Used fraction over every filesystem holding a ledger dir, each counted once."""
    free, total = filesystem_space(usages)
    if total == 0:
        return max((usage.used_fraction for usage in usages), default=0.0)
    return 1 - free / total


def check_dirs(usages: Sequence[DirUsage], full: frozenset[Path], thresholds: Thresholds) -> frozenset[Path]:
    """The full dirs after one check (see the module docstring for the rules)."""
    now_full = set(full)
    for usage in usages:
        if usage.directory not in full and usage.used_fraction > thresholds.full:
            now_full.add(usage.directory)
    if len(now_full) < len(usages) or total_used_fraction(usages) < thresholds.lwm:
        now_full -= {usage.directory for usage in usages if usage.used_fraction <= thresholds.full}
    return frozenset(now_full)


def read_usages(dirs: Sequence[Path], override_file: str | None = None) -> list[DirUsage]:
    """Each dir's usage from ``statvfs`` (or the test override). Blocking: call off the loop.

    Raises:
        OSError: a dir cannot be examined.
    """
    override = _read_override(override_file) if override_file else None
    usages = []
    for directory in dirs:
        stat = os.statvfs(directory)
        total = stat.f_blocks * stat.f_frsize
        free = stat.f_bavail * stat.f_frsize
        if override is not None:
            free = int(total * (1 - override))
        used = override if override is not None else (1 - free / total if total else 0.0)
        usages.append(DirUsage(directory, used, free, total, os.stat(directory).st_dev))
    return usages


def _read_override(path: str) -> float | None:
    try:
        value = float(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None  # absent or half-written: fall back to statvfs for this round
    return min(max(value, 0.0), 1.0)


WritableListener = Callable[[bool], None]
"""Told ``True`` / ``False`` on the loop when the bookie gains its first / loses its last writable dir."""


class LedgerDirsMonitor:
    def __init__(
        self,
        config: BookieConfig,
        listener: WritableListener | None = None,
        dirs_manager: LedgerDirsManager | None = None,
    ) -> None:
        """``dirs_manager``: where the full dirs go (the ledger storage's, which also knows the
        failed ones); ``listener``: set as its listener when given."""
        self.dirs_manager = dirs_manager if dirs_manager is not None else LedgerDirsManager(config.ledger_dirs)
        if listener is not None:
            self.dirs_manager.listener = listener
        self.dirs = list(self.dirs_manager.dirs)
        self.thresholds = Thresholds.from_config(config)
        self.interval_s = config.disk_check_interval_ms / 1000
        self.override_file = config.disk_usage_override_file
        self.usages: list[DirUsage] = []
        """The last reading, one per ledger dir not failed (empty before the first check)."""
        self._task: asyncio.Task[None] | None = None
        self._check_now: asyncio.Task[None] | None = None
        metrics.DISK_MONITORS.add(self)

    def used_fractions(self) -> dict[Path, float]:
        """Every ledger dir's used fraction at the last check, in config order: 0.0 before
        the first check and for a dir that failed (no longer read)."""
        read = {usage.directory: usage.used_fraction for usage in self.usages}
        return {directory: read.get(directory, 0.0) for directory in self.dirs}

    @property
    def full_dirs(self) -> frozenset[Path]:
        return self.dirs_manager.full

    @property
    def writable(self) -> bool:
        """At least one ledger dir can take new entries (neither full nor failed)."""
        return self.dirs_manager.writable

    async def start(self) -> None:
        """Check once now (the bookie registers in the state this finds), then every interval."""
        await self.check()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ledger-dirs-monitor")

    async def close(self) -> None:
        tasks = [task for task in (self._task, self._check_now) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self._check_logged()  # a dir vanished or its disk failed: the last state stays

    def check_soon(self) -> None:
        """Check now, in the background, unless a check is already running (a ledger dir just
        ran out of space: waiting for the next round would let adds pile up meanwhile)."""
        if self._check_now is not None and not self._check_now.done():
            return
        self._check_now = asyncio.get_running_loop().create_task(self._check_logged(), name="ledger-dirs-check")

    async def _check_logged(self) -> None:
        try:
            await self.check()
        except OSError as exc:
            log.error("checking the ledger dirs failed: %s", exc)

    async def check(self) -> None:
        """Read the usage of every dir not failed, apply the thresholds, and hand the full ones
        to the dirs manager (which tells its listener of a change)."""
        manager = self.dirs_manager
        usages = await asyncio.to_thread(read_usages, manager.healthy_dirs, self.override_file)
        usages = [usage for usage in usages if usage.directory not in manager.failed]  # failed meanwhile
        full = check_dirs(usages, self.full_dirs & {usage.directory for usage in usages}, self.thresholds)
        self._log_changes(usages, full)
        self.usages = usages
        manager.set_full(full)

    def _log_changes(self, usages: list[DirUsage], full: frozenset[Path]) -> None:
        previous = {usage.directory: usage.used_fraction for usage in self.usages}
        for usage in usages:
            if usage.directory in full and usage.directory not in self.full_dirs:
                log.error(
                    "ledger dir %s is full: usage %.3f > diskUsageThreshold %.2f",
                    usage.directory,
                    usage.used_fraction,
                    self.thresholds.full,
                )
            elif usage.directory in self.full_dirs and usage.directory not in full:
                log.info("ledger dir %s is writable again: usage %.3f", usage.directory, usage.used_fraction)
            elif (
                usage.directory not in full
                and usage.used_fraction > self.thresholds.warn
                and previous.get(usage.directory, 0.0) <= self.thresholds.warn
            ):
                log.warning(
                    "ledger dir %s is almost full: usage %.3f > diskUsageWarnThreshold %.2f",
                    usage.directory,
                    usage.used_fraction,
                    self.thresholds.warn,
                )
