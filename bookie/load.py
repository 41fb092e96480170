"""The bookie's load report: what BOOKIE_INFO and ``GET /api/v1/bookie/info`` say about how busy it is.

Load-aware ensemble placement (BookKeeper BP-65) polls every bookie for this and
skips the hot ones, so the figures describe the last few seconds, not the process lifetime:

- ``journalWriteBytesPerSecond``: journal bytes this bookie wrote;
- ``journalDiskWriteBytesPerSecond``: bytes written to the disk holding the journal by every
  writer of that disk — the neighbour bookies sharing it (BIGO: three bookies per journal
  disk), other processes — which is what BIGO balances (BP-65's ``writeBytePerSecond``):
  "sectors written" x 512 of the whole disk's ``/sys/dev/block/M:m/stat`` (a partition counts
  as its disk; a loop-mounted filesystem's disk is its loop device), the busiest disk when
  the journal dirs are on several. With a SIMULATED shared journal device
  (``minipulsarSimulatedDiskModel`` ``journal_device=``) that device's byte counter instead,
  even when a block device exists: the model puts the journal on the modelled device, so the
  real disk's counter would say nothing about it. None when unknown (tmpfs, overlay, not
  Linux): the broker then weighs ``journalWriteBytesPerSecond``;
- ``journalDiskId``: which disk that is, ``M:m`` (or ``simulated:<path>``), so that the bookies
  sharing one can be told apart; None when unknown;
- ``journalSyncLatencyMsAvg`` / ``journalSyncLatencyMsP99``: fsyncs of journal groups in the
  window (None when there were none, e.g. with ``journalSyncData=false``); the p99 is the
  upper bound of the histogram bucket it falls in;
- ``addEntryLatencyMsAvg`` / ``addEntryLatencyMsP99``: successful adds in the window, request
  received to response sent (``bookkeeper_server_ADD_ENTRY_REQUEST{success="true"}``), the same way;
- ``journalIoUtil`` / ``ledgerIoUtil``: percent of the window the busiest journal / ledger
  disk was doing I/O (``io_ticks`` of ``/sys/dev/block/M:m/stat``, as ``iostat``'s %util);
  -1 when unknown (not Linux, or a filesystem with no block device), as in BP-65;
- ``cpuUsedRate``: this process's CPU time over wall time, percent of one core;
- ``ledgerDirsUsedFraction``, ``ledgerDirsFreeBytes``, ``ledgerDirsTotalBytes``, per-dir
  ``ledgerDirsUsage`` and ``writableLedgerDirs``: from the disk monitor's last check;
- ``pendingAdds``, ``pendingReads``, ``readPoolPending``: requests in the bookie right now;
- ``readOnly`` and ``state`` (``writable`` / ``readonly``), and ``readOnlyReasons``
  (:mod:`bookie.state_manager`).

Invariants:
- :meth:`BookieLoad.report` does no I/O (it runs on the loop for every BOOKIE_INFO);
- a sampler (:class:`~minipulsar.supervision.Periodic`) takes one :class:`LoadSample` per
  ``SAMPLE_INTERVAL_S`` in a thread and keeps the last ``WINDOW_S`` of them; a failed sample
  is logged and the next one taken on time;
- rates are differences between the newest and the oldest sample (so the report lags by up
  to one interval).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from prometheus_client import Histogram

from minipulsar.bookie import metrics
from minipulsar.bookie.disk_monitor import LedgerDirsMonitor, filesystem_space, total_used_fraction
from minipulsar.bookie.read_pool import ReadThreadPool
from minipulsar.bookie.state_manager import BookieStateManager
from minipulsar.supervision import Periodic

log = logging.getLogger(__name__)

SAMPLE_INTERVAL_S = 1.0
WINDOW_S = 5.0
"""Rates cover about this long: long enough to smooth group-commit bursts, short enough to
show a bookie that just became hot (BP-65 polls every few seconds)."""
IO_TICKS_FIELD = 9
"""``io_ticks`` (ms spent doing I/O) is the 10th field of a block device's ``stat`` file."""
SECTORS_WRITTEN_FIELD = 6
"""``write sectors`` is the 7th field (Documentation/block/stat.rst)."""
SECTOR_BYTES = 512
"""The kernel counts those sectors in 512-byte units whatever the device's own sector size."""


class DiskWriteCounter(Protocol):
    """A device's running total of bytes written (the SIMULATED shared journal device)."""

    disk_id: str

    def written_bytes(self) -> int:
        """Blocking (may take a file lock)."""
        ...


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    count: float
    sum: float
    buckets: tuple[tuple[float, float], ...]
    """(upper bound, cumulative count), ascending."""


@dataclass(frozen=True, slots=True)
class LoadSample:
    at_s: float
    journal_write_bytes: float
    journal_sync: HistogramSnapshot
    cpu_s: float
    io_ticks_ms: dict[int, float]
    """``st_dev`` → io_ticks, for the devices whose counters could be read."""
    add_entry: HistogramSnapshot = HistogramSnapshot(0.0, 0.0, ())
    """Successful adds (``bookkeeper_server_ADD_ENTRY_REQUEST{success="true"}``)."""
    journal_disk_written_bytes: Mapping[str, float] = field(default_factory=dict)
    """Journal disk id → bytes written to it so far, for the disks whose counter could be read."""


def snapshot(histogram: Histogram | metrics.FastHistogram, **labels: str) -> HistogramSnapshot:
    """The histogram's series whose labels include ``labels`` (a histogram with one series: no labels)."""
    count = total = 0.0
    buckets = []
    for family in histogram.collect():
        for sample in family.samples:
            if any(sample.labels.get(name) != value for name, value in labels.items()):
                continue
            if sample.name.endswith("_bucket"):
                buckets.append((float(sample.labels["le"]), sample.value))
            elif sample.name.endswith("_count"):
                count = sample.value
            elif sample.name.endswith("_sum"):
                total = sample.value
    return HistogramSnapshot(count, total, tuple(sorted(buckets)))


def latency_in_window(old: HistogramSnapshot, new: HistogramSnapshot) -> tuple[float | None, float | None]:
    """(average, p99) of the observations made between two snapshots; (None, None) if none."""
    count = new.count - old.count
    if count <= 0:
        return None, None
    old_buckets = dict(old.buckets)
    finite = [bound for bound, _ in new.buckets if bound != math.inf]
    p99 = None
    for bound, cumulative in new.buckets:
        if cumulative - old_buckets.get(bound, 0.0) >= 0.99 * count:
            # Past the last finite bucket: report that bound (JSON has no infinity).
            p99 = bound if bound != math.inf or not finite else finite[-1]
            break
    return (new.sum - old.sum) / count, p99


def device_of(directory: str | Path) -> int | None:
    try:
        return os.stat(directory).st_dev
    except OSError:
        return None


def read_io_ticks(devices: set[int]) -> dict[int, float]:
    """io_ticks (ms) of each device's block device, leaving out those with no counters. Blocking."""
    ticks = {}
    for device in devices:
        try:
            text = Path(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}/stat").read_text()
            ticks[device] = float(text.split()[IO_TICKS_FIELD])
        except (OSError, ValueError, IndexError):
            continue
    return ticks


def block_disk_of(device: int) -> str | None:
    """``M:m`` of the whole disk holding ``st_dev`` ``device`` (a partition's parent disk), or
    None when it is no block device with counters (tmpfs, overlay, not Linux). Blocking."""
    node = Path(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}")
    try:
        if (node / "partition").exists():
            return (node.resolve().parent / "dev").read_text().strip()
        return f"{os.major(device)}:{os.minor(device)}" if (node / "stat").exists() else None
    except OSError:
        return None


def read_disk_written_bytes(disks: Iterable[str]) -> dict[str, float]:
    """Bytes written so far to each ``M:m`` disk, leaving out those with no counters. Blocking."""
    written = {}
    for disk in disks:
        try:
            text = Path(f"/sys/dev/block/{disk}/stat").read_text()
            written[disk] = float(text.split()[SECTORS_WRITTEN_FIELD]) * SECTOR_BYTES
        except (OSError, ValueError, IndexError):
            continue
    return written


def busiest_disk_rate(old: LoadSample, new: LoadSample) -> tuple[str | None, float | None]:
    """(disk id, bytes/s) of the journal disk written fastest between the two samples;
    (None, None) when no disk's counter is in both. A counter that went back (a device
    re-created) counts as 0."""
    elapsed_s = new.at_s - old.at_s
    before, after = old.journal_disk_written_bytes, new.journal_disk_written_bytes
    rates = {disk: max(0.0, after[disk] - before[disk]) / elapsed_s for disk in after if disk in before}
    if not rates or elapsed_s <= 0:
        return None, None
    disk = max(rates, key=rates.__getitem__)
    return disk, round(rates[disk], 1)


def io_util_percent(old: LoadSample, new: LoadSample, devices: Sequence[int | None]) -> float:
    """The busiest of ``devices`` between the two samples, in percent; -1 when unknown."""
    elapsed_ms = (new.at_s - old.at_s) * 1000
    utils = [
        min(100.0, (new.io_ticks_ms[d] - old.io_ticks_ms[d]) / elapsed_ms * 100)
        for d in devices
        if d in new.io_ticks_ms and d in old.io_ticks_ms
    ]
    return round(max(utils), 1) if utils and elapsed_ms > 0 else -1.0


class BookieLoad:
    def __init__(
        self,
        journal_dirs: Sequence[str],
        ledger_dirs: Sequence[str],
        disk_monitor: LedgerDirsMonitor,
        state: BookieStateManager,
        read_pool: ReadThreadPool | None,
        sample_interval_s: float = SAMPLE_INTERVAL_S,
        window_s: float = WINDOW_S,
        journal_device: DiskWriteCounter | None = None,
    ) -> None:
        """``journal_device``: the SIMULATED shared journal device, whose counter then stands
        for the journal disk's (module docstring); None: the block devices of the journal dirs."""
        self.disk_monitor = disk_monitor
        self.state = state
        self.read_pool = read_pool
        self.sample_interval_s = sample_interval_s
        self._journal_dirs, self._ledger_dirs = list(journal_dirs), list(ledger_dirs)
        self._journal_devices: list[int | None] = []
        self._ledger_devices: list[int | None] = []
        self._journal_device = journal_device
        self._journal_disks: list[str] = []
        """The ids of the journal dirs' disks, distinct (resolved by the first sample)."""
        self._samples: deque[LoadSample] = deque(maxlen=round(window_s / sample_interval_s) + 1)
        self._sampler = Periodic("bookie-load-sampler", sample_interval_s, self._sample_once, logger=log)
        """A failed sample (a bug) is logged and the next one taken on time: the report never freezes."""

    async def start(self) -> None:
        """Take the first sample now (the dirs exist by then), then one per interval."""
        self._samples.append(await asyncio.to_thread(self._first_sample))
        self._sampler.start()

    async def close(self) -> None:
        await self._sampler.stop()

    def _first_sample(self) -> LoadSample:
        self._journal_devices = [device_of(d) for d in self._journal_dirs]
        self._ledger_devices = [device_of(d) for d in self._ledger_dirs]
        self._journal_disks = self._find_journal_disks()
        return self.sample()

    def _find_journal_disks(self) -> list[str]:
        if self._journal_device is not None:
            return [self._journal_device.disk_id]
        disks = (block_disk_of(d) for d in self._journal_devices if d is not None)
        return list(dict.fromkeys(d for d in disks if d is not None))

    def _read_journal_disks(self) -> dict[str, float]:
        if self._journal_device is None:
            return read_disk_written_bytes(self._journal_disks)
        return {self._journal_device.disk_id: float(self._journal_device.written_bytes())}

    async def _sample_once(self) -> None:
        self._samples.append(await asyncio.to_thread(self.sample))

    def sample(self) -> LoadSample:
        """Read the counters now (blocking: the block devices' stat files, the shared device's lock)."""
        devices = {d for d in (*self._journal_devices, *self._ledger_devices) if d is not None}
        return LoadSample(
            at_s=time.monotonic(),
            journal_write_bytes=next(iter(metrics.JOURNAL_WRITE_BYTES.collect())).samples[0].value,
            journal_sync=snapshot(metrics.JOURNAL_SYNC),
            add_entry=snapshot(metrics.ADD_ENTRY_REQUEST, success="true"),
            cpu_s=time.process_time(),
            io_ticks_ms=read_io_ticks(devices),
            journal_disk_written_bytes=self._read_journal_disks(),
        )

    def report(self) -> dict:
        """The load report (see the module docstring for each key). No I/O."""
        return {**self._rates(), **self._disk(), **self._pending()}

    def _rates(self) -> dict:
        if len(self._samples) < 2:
            return {
                "journalWriteBytesPerSecond": 0.0,
                "journalDiskWriteBytesPerSecond": 0.0 if self._journal_disks else None,
                "journalDiskId": self._journal_disks[0] if self._journal_disks else None,
                "journalSyncLatencyMsAvg": None,
                "journalSyncLatencyMsP99": None,
                "addEntryLatencyMsAvg": None,
                "addEntryLatencyMsP99": None,
                "journalIoUtil": -1.0,
                "ledgerIoUtil": -1.0,
                "cpuUsedRate": 0.0,
                "loadWindowSeconds": 0.0,
            }
        old, new = self._samples[0], self._samples[-1]
        elapsed_s = new.at_s - old.at_s
        sync_avg, sync_p99 = latency_in_window(old.journal_sync, new.journal_sync)
        add_avg, add_p99 = latency_in_window(old.add_entry, new.add_entry)
        journal_disk, journal_disk_rate = busiest_disk_rate(old, new)
        return {
            "journalWriteBytesPerSecond": round((new.journal_write_bytes - old.journal_write_bytes) / elapsed_s, 1),
            "journalDiskWriteBytesPerSecond": journal_disk_rate,
            "journalDiskId": journal_disk,
            "journalSyncLatencyMsAvg": None if sync_avg is None else round(sync_avg, 3),
            "journalSyncLatencyMsP99": sync_p99,
            "addEntryLatencyMsAvg": None if add_avg is None else round(add_avg, 3),
            "addEntryLatencyMsP99": add_p99,
            "journalIoUtil": io_util_percent(old, new, self._journal_devices),
            "ledgerIoUtil": io_util_percent(old, new, self._ledger_devices),
            "cpuUsedRate": round((new.cpu_s - old.cpu_s) / elapsed_s * 100, 1),
            "loadWindowSeconds": round(elapsed_s, 3),
        }

    def _disk(self) -> dict:
        usages = self.disk_monitor.usages
        free, total = filesystem_space(usages)
        return {
            "ledgerDirsUsedFraction": round(total_used_fraction(usages), 4),
            "ledgerDirsFreeBytes": free,
            "ledgerDirsTotalBytes": total,
            "ledgerDirsUsage": [
                {
                    "dir": str(usage.directory),
                    "usedFraction": round(usage.used_fraction, 4),
                    "freeBytes": usage.free_bytes,
                    "full": usage.directory in self.disk_monitor.full_dirs,
                }
                for usage in usages
            ],
            "writableLedgerDirs": sum(self.disk_monitor.dirs_manager.writable_flags),
            "readOnly": self.state.read_only,
            "state": "readonly" if self.state.read_only else "writable",
            "readOnlyReasons": list(self.state.causes),
        }

    def _pending(self) -> dict:
        return {
            "pendingAdds": metrics.TOTALS.adds_in_progress,
            "pendingReads": metrics.TOTALS.reads_in_progress,
            "readPoolPending": 0 if self.read_pool is None else self.read_pool.pending_total,
        }

    def disk_space(self) -> tuple[int, int]:
        """(free, total) bytes over the ledger dirs' filesystems, from the last disk check."""
        return filesystem_space(self.disk_monitor.usages)
