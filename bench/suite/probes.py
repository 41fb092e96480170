"""What each mount can do, measured before the cluster starts: the limits the results are read against.

Per mount (the journal dir and the ledger dir; once when both are on one device):

- ``fsyncs_per_s_4k``: 4 KiB appends, each followed by ``fdatasync``, one at a time — the
  rate a journal without group commit could acknowledge;
- ``seq_write_mb_per_s``: sequential writes in 512 KiB groups (``journalBufferedWritesThreshold``),
  one ``pwrite`` + one ``fdatasync`` each — the fsync'd bandwidth a group-committing journal
  can get at best.

Both use :func:`bench.ceilings.fsync_append_ceiling` (a plain loop on a thread, over a
zero-filled, preallocated file: BookKeeper's ``journalPreAllocSizeMB``, so a sync flushes data,
not the file's size), and count the device's FLUSH requests meanwhile
(:mod:`bench.suite.diskstats`), which shows whether the disk really flushes.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from bench.ceilings import fsync_append_ceiling
from bench.suite.diskstats import FlushWindow

KIB = 1024
SMALL_RECORD_BYTES = 4 * KIB
SEQUENTIAL_GROUP_BYTES = 512 * KIB
SEQUENTIAL_RECORD_BYTES = 64 * KIB
PROBE_FILE_BYTES = 64 * 1024 * KIB


async def probe_mount(directory: Path, secs: float) -> dict[str, Any]:
    """Both figures for the mount holding ``directory`` (created if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    window = FlushWindow(directory).start()
    small = await asyncio.to_thread(
        fsync_append_ceiling, directory, SMALL_RECORD_BYTES, SMALL_RECORD_BYTES, secs, PROBE_FILE_BYTES
    )
    small_flushes = window.stop()
    window = FlushWindow(directory).start()
    sequential = await asyncio.to_thread(
        fsync_append_ceiling, directory, SEQUENTIAL_RECORD_BYTES, SEQUENTIAL_GROUP_BYTES, secs, PROBE_FILE_BYTES
    )
    sequential_flushes = window.stop()
    return {
        "path": str(directory),
        "device": small_flushes["device"],
        "fsyncs_per_s_4k": small["groups_per_s"],
        "fsync_4k_ms_avg": small["fdatasync_ms_avg"],
        "device_flushes_per_s_4k": small_flushes["device_flushes_per_s"],
        "seq_write_mb_per_s": sequential["mb_per_s"],
        "seq_group_bytes": SEQUENTIAL_GROUP_BYTES,
        "seq_fsyncs_per_s": sequential["groups_per_s"],
        "device_flushes_per_s_seq": sequential_flushes["device_flushes_per_s"],
        "secs": secs,
    }


async def idle_flushes_per_s(directory: Path, secs: float = 1.0) -> float | None:
    """The device's flushes/s while the bench does nothing: what else on the machine flushes
    (the per-row figures are system-wide for the device)."""
    window = FlushWindow(directory).start()
    await asyncio.sleep(secs)  # the measurement itself: a quiet second
    flushes_per_s = window.stop()["device_flushes_per_s"]
    assert not isinstance(flushes_per_s, str), flushes_per_s
    return flushes_per_s


async def probe_mounts(journal_dir: Path, ledger_dir: Path, secs: float) -> dict[str, Any]:
    """``{"journal": …, "ledgers": …}``; a mount shared by both is probed once (``same_device``);
    ``idle_journal_device_flushes_per_s``: the journal device's background flush rate."""
    journal_dir.mkdir(parents=True, exist_ok=True)
    idle = await idle_flushes_per_s(journal_dir)
    journal = await probe_mount(journal_dir, secs)
    if _same_device(journal_dir, ledger_dir):
        return {
            "journal": journal,
            "ledgers": dict(journal, path=str(ledger_dir)),
            "same_device": True,
            "idle_journal_device_flushes_per_s": idle,
        }
    return {
        "journal": journal,
        "ledgers": await probe_mount(ledger_dir, secs),
        "same_device": False,
        "idle_journal_device_flushes_per_s": idle,
    }


def simulated_limits(disk_model: str | None) -> dict[str, Any] | None:
    """What a SIMULATED disk model allows, in the probes' terms (None without a model)."""
    if not disk_model:
        return None
    from minipulsar.bookie.disk_model import DiskModelSpec

    spec = DiskModelSpec.parse(disk_model)
    fsync_s = spec.fsync_ms / 1000
    group_s = fsync_s + (SEQUENTIAL_GROUP_BYTES / (spec.mb_s * 1e6) if spec.mb_s else 0.0)
    small_s = fsync_s + (SMALL_RECORD_BYTES / (spec.mb_s * 1e6) if spec.mb_s else 0.0)
    return {
        "label": spec.describe(),
        "fsync_ms": spec.fsync_ms,
        "mb_s": spec.mb_s,
        "fsyncs_per_s_4k": 1 / small_s if small_s else None,
        "seq_write_mb_per_s": SEQUENTIAL_GROUP_BYTES / group_s / 1e6 if group_s else None,
    }


def _same_device(a: Path, b: Path) -> bool:
    a.mkdir(parents=True, exist_ok=True)
    b.mkdir(parents=True, exist_ok=True)
    return os.stat(a).st_dev == os.stat(b).st_dev
