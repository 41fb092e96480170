"""Device flushes and bytes written per second, from /proc/diskstats: did a "durable" setting
really flush, and how much did the disk write while a figure was measured?

The logic is ``../shared/tools/devflush.py``'s (the project's shared tools, beside the
repository), copied so the suite runs without that folder: the device backing a path is found
by its major:minor in /proc/diskstats, and fields 19–20 of its line (Linux 5.5+) count the
FLUSH requests completed and the ms spent on them — what fsync/fdatasync turn into at the
block layer — and field 10 the 512-byte sectors written. System-wide for that device:
background commits (ext4's jbd2, ~0 when idle) and anything else running on the machine are
counted too.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

SECTOR_BYTES = 512
"""/proc/diskstats counts 512-byte sectors whatever the device's block size."""


def device_name(path: Path) -> str | None:
    """The /proc/diskstats name of the block device backing ``path`` (None if not found)."""
    st = os.stat(path)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    with open("/proc/diskstats") as stats:
        for line in stats:
            fields = line.split()
            if int(fields[0]) == major and int(fields[1]) == minor:
                return fields[2]
    return None


def read_flushes(device: str | None) -> tuple[int, int] | None:
    """(flushes completed, ms spent flushing) of ``device``; None if the kernel lacks the fields."""
    fields = _fields(device)
    if fields is None or len(fields) < 20:
        return None
    return int(fields[18]), int(fields[19])


def read_bytes_written(device: str | None) -> int | None:
    """Bytes ``device`` has written since boot; None if not found."""
    fields = _fields(device)
    return None if fields is None else int(fields[9]) * SECTOR_BYTES


def _fields(device: str | None) -> list[str] | None:
    if device is None:
        return None
    with open("/proc/diskstats") as stats:
        for line in stats:
            fields = line.split()
            if fields[2] == device:
                return fields
    return None


@dataclass
class FlushWindow:
    """Flushes and bytes written of one device between :meth:`start` and :meth:`stop`."""

    path: Path
    device: str | None = None
    _start: tuple[int, int] | None = None
    _start_written: int | None = None
    _started_s: float = 0.0

    def start(self) -> FlushWindow:
        self.device = device_name(self.path)
        self._start = read_flushes(self.device)
        self._start_written = read_bytes_written(self.device)
        self._started_s = time.monotonic()
        return self

    def stop(self) -> dict[str, float | str | None]:
        """``device``, ``device_flushes_per_s``, ``device_flush_ms_per_s``,
        ``device_written_bytes`` and ``device_write_mb_per_s`` (MB = 10^6 bytes; None or left
        out where /proc/diskstats cannot tell)."""
        end, written = read_flushes(self.device), read_bytes_written(self.device)
        elapsed_s = max(time.monotonic() - self._started_s, 1e-9)
        result: dict[str, float | str | None] = {"device": self.device, "device_flushes_per_s": None}
        if self._start is not None and end is not None:
            result["device_flushes_per_s"] = (end[0] - self._start[0]) / elapsed_s
            result["device_flush_ms_per_s"] = (end[1] - self._start[1]) / elapsed_s
        if self._start_written is not None and written is not None:
            result["device_written_bytes"] = written - self._start_written
            result["device_write_mb_per_s"] = (written - self._start_written) / elapsed_s / 1e6
        return result
