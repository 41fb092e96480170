"""Will a bench run's writes fit on its mounts? Checked before any server starts.

A bench that fills a disk does not fail cleanly: the bookies cross ``diskUsageThreshold``
(BookKeeper's 0.95), turn read-only, and every later figure is of a broker retrying. So each
entry point (``python -m bench``, ``bench/bookie_bench.py``, the peers) first lists what it
will write — :class:`Write`: a directory, an estimate in bytes, what for — and
:func:`check_space` compares the sum per device (journal and ledger dirs on one disk add up)
with the room that device has: the bytes free to this user (``statvfs`` ``f_bavail``), and
never more than what keeps its usage under ``diskUsageThreshold``. Short of room, it raises
:class:`NotEnoughSpace` (a ``SystemExit`` whose message names the mount, the estimate, the
room and what would shrink the run).

The estimates are upper bounds of the form rate × seconds × size × copies × :data:`MARGIN`:
for a run paced at a rate, that rate; for one as fast as acknowledged, :func:`full_speed_bytes_per_s`
— what the load can reach at most, capped by the probed sequential write rate of the device.
Copies: every message byte reaches Qw bookies, and each writes it twice (journal, entry log).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

GB = 1_000_000_000
MARGIN = 1.2
"""Estimates are multiplied by this (file system metadata, index files, logs, rounding)."""
DISK_USAGE_THRESHOLD = 0.95
"""BookKeeper's ``diskUsageThreshold`` default: above it a bookie's ledger dir turns read-only."""
BATCHED_MSG_PER_S_MAX = 300_000
"""Batched messages/s one producer can reach here at most (above issue 19's 250k target)."""
UNBATCHED_MSG_PER_S_MAX = 60_000
"""Unbatched messages (one entry each) per second at most (above the 40k target)."""
PAYLOAD_MB_PER_S_MAX = 400.0
"""Message payload MB/s a run can reach at most whatever the disk (~1.5× the 64 KiB figure)."""


class NotEnoughSpace(SystemExit):
    """The run would not fit: its message says where, by how much, and what to change."""


@dataclass(frozen=True, slots=True)
class Write:
    directory: Path
    """Where the bytes go (need not exist yet: its nearest existing parent names the mount)."""
    bytes: float
    what: str


def full_speed_bytes_per_s(size_bytes: int, batching: bool, copies: int, device_mb_per_s: float | None = None) -> float:
    """Bytes/s one producer as fast as acknowledged can make the bookies write, at most:
    payload bounded by :data:`BATCHED_MSG_PER_S_MAX` / :data:`UNBATCHED_MSG_PER_S_MAX` and
    :data:`PAYLOAD_MB_PER_S_MAX`, times ``copies``; never more than ``device_mb_per_s``
    (the mount's probed sequential rate), when known."""
    msg_per_s = BATCHED_MSG_PER_S_MAX if batching else UNBATCHED_MSG_PER_S_MAX
    written = min(msg_per_s * size_bytes, PAYLOAD_MB_PER_S_MAX * 1e6) * copies
    if device_mb_per_s:
        written = min(written, device_mb_per_s * 1e6)
    return written


def mount_of(path: Path) -> Path:
    """``path`` or its nearest existing parent (what ``statvfs`` and ``st_dev`` are asked about)."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def room_bytes(path: Path, usage_threshold: float = DISK_USAGE_THRESHOLD) -> int:
    """Bytes that can still be written under ``path``'s mount before its usage passes
    ``usage_threshold`` (and never more than are free to this user)."""
    st = os.statvfs(mount_of(path))
    total, used = st.f_blocks * st.f_frsize, (st.f_blocks - st.f_bfree) * st.f_frsize
    return max(0, min(st.f_bavail * st.f_frsize, int(usage_threshold * total) - used))


def check_space(writes: Iterable[Write], hint: str, margin: float = MARGIN) -> list[str]:
    """One line per device: what the run will write there and the room it has.

    Raises:
        NotEnoughSpace: some device has less room than its writes × ``margin``; ``hint``
            (what would shrink the run) ends the message.
    """
    by_device: dict[int, list[Write]] = {}
    for write in writes:
        by_device.setdefault(os.stat(mount_of(write.directory)).st_dev, []).append(write)
    lines, short = [], []
    for group in by_device.values():
        needed = sum(w.bytes for w in group) * margin
        room = room_bytes(group[0].directory)
        parts = ", ".join(f"{w.what} {w.bytes / GB:.1f} GB" for w in group)
        line = (
            f"{mount_of(group[0].directory)}: needs ~{needed / GB:.1f} GB ({parts}; ×{margin:g} margin), "
            f"room {room / GB:.1f} GB below {DISK_USAGE_THRESHOLD:g} usage"
        )
        lines.append(line)
        if needed > room:
            short.append(line)
    if short:
        raise NotEnoughSpace(
            "bench: not enough disk space for this run, stopping before any server starts:\n  "
            + "\n  ".join(short)
            + f"\n{hint}"
        )
    return lines


BOOKIE_DEVICE_MB_PER_S_MAX = 1000.0
"""What one bookie writes to its disks per second at most, journal and entry log together
(bookie_bench.py's 64 KiB adds reached ~700 MB/s of device writes here)."""


def bookie_bench_writes(
    journal_dir: Path,
    ledger_dir: Path,
    sizes: dict[str, int],
    seconds: float,
    modes: int,
    rate_per_s: float,
    ceiling_file_bytes: int,
    catch_up_entries: int | None,
) -> list[Write]:
    """bench/bookie_bench.py's writes: per journalSyncData mode (``modes``) one bookie, one run
    of ``seconds`` per entry size, each byte in its journal and its entry log; the ceilings'
    preallocated files; in catch-up mode the backlog and its two 1 KiB writer runs."""

    def run_bytes(size: int) -> float:
        rate = rate_per_s or BATCHED_MSG_PER_S_MAX
        return min(rate * size, BOOKIE_DEVICE_MB_PER_S_MAX * 1e6 / 2) * seconds

    if catch_up_entries is not None:
        payload = catch_up_entries * 1024 + 2 * run_bytes(1024)
    else:
        payload = modes * sum(run_bytes(size) for size in sizes.values())
    return [
        Write(journal_dir, payload + 2 * ceiling_file_bytes, "journals and ceiling files"),
        Write(ledger_dir, payload + ceiling_file_bytes, "entry logs"),
    ]
