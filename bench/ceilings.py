"""The two ceilings a bookie's add rate is measured against, on the journal's own disk.

- :func:`fsync_append_ceiling`: the fsync'd append rate a plain Python loop gets (one
  ``pwrite`` + one ``fdatasync`` per group of records, on a preallocated file, in a thread);
- :func:`hop_ceiling`: ``../shared/tools/hop_ceiling.py``'s bare asyncio group-commit server,
  run as a subprocess, its table row parsed;
- :func:`shared_disk_ceiling` (extra, not one of the issue's two): the same fsync'd append
  loop beside a second writer that appends as many bytes again to another file and syncs
  them — what a bookie whose journal and ledger dirs share one disk can get at most;
- :func:`io_pattern_ceiling` (extra): the bookie's own write pattern, direct I/O, issued back
  to back by threads that do nothing else — journal groups synced in one write each, entry-log
  chunks from two writers — in the journal and ledger dirs: what the disks give that pattern.
"""

from __future__ import annotations

import math
import mmap
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import MB, ROOT
from minipulsar.durable_file import sync_data

MiB = 1024 * 1024


def fsync_append_ceiling(
    directory: Path, record_bytes: int, group_bytes: int, secs: float, file_bytes: int
) -> dict[str, Any]:
    """Append groups of records with one ``pwrite`` + one ``fdatasync`` each, for ``secs``.

    The file is zero-filled and synced first (BookKeeper's ``journalPreAllocSizeMB``: syncing
    preallocated space only flushes data); the writes wrap around inside it. Blocking: run it
    in a thread, as the journal does.
    """
    records = max(1, group_bytes // record_bytes)
    group = os.urandom(record_bytes) * records
    file_bytes = max(file_bytes, 4 * len(group))
    path = directory / f"fsync-ceiling-{os.getpid()}.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        zeros = bytes(1024 * 1024)
        for offset in range(0, file_bytes, len(zeros)):
            os.pwrite(fd, zeros, offset)
        os.fsync(fd)
        groups, offset, sync_s = 0, 0, 0.0
        started = time.perf_counter()
        deadline = started + secs
        while time.perf_counter() < deadline:
            if offset + len(group) > file_bytes:
                offset = 0
            os.pwrite(fd, group, offset)
            before_sync = time.perf_counter()
            sync_data(fd)
            sync_s += time.perf_counter() - before_sync
            offset += len(group)
            groups += 1
        elapsed_s = time.perf_counter() - started
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return {
        "record_bytes": record_bytes,
        "records_per_group": records,
        "records_per_s": groups * records / elapsed_s,
        "mb_per_s": groups * len(group) / elapsed_s / MB,
        "groups_per_s": groups / elapsed_s,
        "fdatasync_ms_avg": sync_s / groups * 1000 if groups else None,
    }


def shared_disk_ceiling(
    directory: Path,
    record_bytes: int,
    group_bytes: int,
    secs: float,
    file_bytes: int,
    copy_chunk_bytes: int = 1024 * 1024,
    copy_sync_bytes: int = 32 * 1024 * 1024,
) -> dict[str, Any]:
    """:func:`fsync_append_ceiling`'s loop (the "journal") beside a thread appending the same
    bytes to a second file in ``copy_chunk_bytes`` writes, synced every ``copy_sync_bytes``
    (the "entry log", never ahead of the journal): every byte written twice to one disk, as a
    bookie with both dirs there does. ``mb_per_s`` is the journal's rate."""
    records = max(1, group_bytes // record_bytes)
    group = os.urandom(record_bytes) * records
    chunk = os.urandom(copy_chunk_bytes)
    file_bytes = max(file_bytes, 4 * len(group), 4 * len(chunk))
    paths = [directory / f"shared-ceiling-{name}-{os.getpid()}.bin" for name in ("journal", "log")]
    fds = [os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644) for path in paths]
    done = {"journal": 0, "log": 0}
    stop = threading.Event()

    def copy_loop() -> None:
        offset = synced_at = 0
        while not stop.is_set():
            if done["log"] + len(chunk) > done["journal"]:
                time.sleep(0.0002)
                continue
            if offset + len(chunk) > file_bytes:
                offset = 0
            os.pwrite(fds[1], chunk, offset)
            offset += len(chunk)
            done["log"] += len(chunk)
            if done["log"] - synced_at >= copy_sync_bytes:
                sync_data(fds[1])
                synced_at = done["log"]

    try:
        zeros = bytes(1024 * 1024)
        for fd in fds:
            for offset in range(0, file_bytes, len(zeros)):
                os.pwrite(fd, zeros, offset)
            os.fsync(fd)
        copier = threading.Thread(target=copy_loop, name="shared-ceiling-log")
        copier.start()
        groups, offset = 0, 0
        started = time.perf_counter()
        deadline = started + secs
        try:
            while time.perf_counter() < deadline:
                if offset + len(group) > file_bytes:
                    offset = 0
                os.pwrite(fds[0], group, offset)
                sync_data(fds[0])
                offset += len(group)
                done["journal"] += len(group)
                groups += 1
        finally:
            stop.set()
            copier.join()
        elapsed_s = time.perf_counter() - started
    finally:
        for fd in fds:
            os.close(fd)
        for path in paths:
            path.unlink(missing_ok=True)
    return {
        "record_bytes": record_bytes,
        "records_per_group": records,
        "mb_per_s": done["journal"] / elapsed_s / MB,
        "second_writer_mb_per_s": done["log"] / elapsed_s / MB,
        "groups_per_s": groups / elapsed_s,
    }


def io_pattern_ceiling(
    journal_dir: Path,
    ledger_dir: Path,
    secs: float,
    journal_write_bytes: int = 4 * MiB,
    log_chunk_bytes: int = MiB,
    log_writers: int = 2,
    file_bytes: int = 256 * MiB,
) -> dict[str, Any]:
    """The bookie's 64 KiB write pattern with no Python pipeline in front of it: one thread
    writes journal groups of ``journal_write_bytes`` with ``O_DIRECT`` + ``RWF_DSYNC`` (write
    and sync in one call, as the journal does) over a preallocated file, back to back, while
    ``log_writers`` threads append ``log_chunk_bytes`` ``O_DIRECT`` writes to entry logs that
    grow (new files, as the flush writes), never more than the journal wrote (an entry is
    journaled before it is flushed). ``mb_per_s``: the payload rate such a bookie could reach
    at most, min(journal, entry logs). ``{"skipped": why}`` where a dir refuses ``O_DIRECT``."""
    o_direct, rwf_dsync = getattr(os, "O_DIRECT", 0), getattr(os, "RWF_DSYNC", 0)
    file_bytes = max(file_bytes, journal_write_bytes, log_chunk_bytes)
    if not o_direct or not rwf_dsync:
        return {"skipped": "no O_DIRECT / RWF_DSYNC here"}
    journal_path = journal_dir / f"pattern-journal-{os.getpid()}.bin"
    log_paths = [ledger_dir / f"pattern-log-{i}-{os.getpid()}.bin" for i in range(log_writers)]
    done = {"journal": 0, "log": 0}
    lock, stop = threading.Lock(), threading.Event()
    errors: list[BaseException] = []

    def direct_fd(path: Path) -> int:
        return os.open(path, os.O_WRONLY | o_direct)

    def log_loop(path: Path) -> None:
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
            fd, chunk = direct_fd(path), mmap.mmap(-1, log_chunk_bytes)
            chunk.write(os.urandom(log_chunk_bytes))
            offset = 0
            try:
                while not stop.is_set():
                    with lock:
                        allowed = done["log"] + log_chunk_bytes <= done["journal"]
                        if allowed:
                            done["log"] += log_chunk_bytes
                    if not allowed:
                        time.sleep(0.0002)
                        continue
                    if offset + log_chunk_bytes > file_bytes:  # the next entry log: a new file
                        os.ftruncate(fd, 0)
                        offset = 0
                    os.pwritev(fd, [chunk], offset)
                    offset += log_chunk_bytes
            finally:
                os.close(fd)
        except BaseException as exc:  # noqa: BLE001 -- handed to the caller, which re-raises it
            errors.append(exc)
            stop.set()

    try:
        prealloc = os.open(journal_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            zeros = bytes(MiB)
            for offset in range(0, file_bytes, MiB):
                os.pwrite(prealloc, zeros, offset)
            os.fsync(prealloc)
        finally:
            os.close(prealloc)
        try:
            fd = direct_fd(journal_path)
        except OSError as exc:
            return {"skipped": f"{journal_dir}: no O_DIRECT ({exc.strerror})"}
        group = mmap.mmap(-1, journal_write_bytes)
        group.write(os.urandom(journal_write_bytes))
        writers = [threading.Thread(target=log_loop, args=(path,), name="pattern-log") for path in log_paths]
        for writer in writers:
            writer.start()
        started = time.perf_counter()
        try:
            offset = 0
            while time.perf_counter() - started < secs and not stop.is_set():
                if offset + journal_write_bytes > file_bytes:
                    offset = 0
                os.pwritev(fd, [group], offset, rwf_dsync)
                offset += journal_write_bytes
                with lock:
                    done["journal"] += journal_write_bytes
        finally:
            stop.set()
            for writer in writers:
                writer.join()
            os.close(fd)
        elapsed_s = time.perf_counter() - started
    finally:
        for path in (journal_path, *log_paths):
            path.unlink(missing_ok=True)
    if errors:
        raise errors[0]
    journal_mb_s, log_mb_s = done["journal"] / elapsed_s / MB, done["log"] / elapsed_s / MB
    return {
        "mb_per_s": min(journal_mb_s, log_mb_s),
        "journal_mb_per_s": journal_mb_s,
        "entry_log_mb_per_s": log_mb_s,
        "journal_write_bytes": journal_write_bytes,
        "log_chunk_bytes": log_chunk_bytes,
        "log_writers": log_writers,
    }


def run_in_thread(function: Any, *args: Any) -> Any:
    """Run ``function(*args)`` on its own thread and return its result (or raise its error)."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function(*args)
        except BaseException as exc:  # noqa: BLE001 -- re-raised on the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="fsync-ceiling")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


HOP_COLUMNS = {
    "frames/s": "frames_per_s",
    "msgs/s": "msgs_per_s",
    "MB/s": "mb_per_s",
    "p50ms": "p50_ms",
    "p99ms": "p99_ms",
    "srvCPU%": "server_cpu_pct",
    "cliCPU%": "client_cpu_pct",
    "msg/grp": "msgs_per_group",
    "flush/s": "device_flushes_per_s",
}


def hop_ceiling(tool: Path, directory: Path, window: int, secs: float, warmup: float) -> dict[str, Any]:
    """Run ``hop_ceiling.py run --server journal`` and parse its table row."""
    command = [
        sys.executable,
        str(tool),
        "run",
        "--server",
        "journal",
        "--mode",
        "single",
        "--window",
        str(window),
        "--dir",
        str(directory),
        "--secs",
        str(secs),
        "--warmup",
        str(warmup),
    ]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=secs + warmup + 120, cwd=ROOT)
    if completed.returncode != 0:
        raise RuntimeError(f"hop_ceiling.py failed ({completed.returncode}): {completed.stderr.strip()[-500:]}")
    return parse_hop_table(completed.stdout) | {"command": " ".join(command)}


def parse_hop_table(text: str) -> dict[str, Any]:
    """The figures of the row under ``hop_ceiling.py``'s header line (``loop malloc ...``)."""
    lines = [line for line in text.splitlines() if line.strip()]
    for index, line in enumerate(lines[:-1]):
        header = line.split()
        if header[:2] == ["loop", "malloc"]:
            row = lines[index + 1].split()
            if len(row) != len(header):
                break
            values = dict(zip(header, row))
            return {key: _number(values[column]) for column, key in HOP_COLUMNS.items() if column in values}
    raise ValueError(f"no result row in hop_ceiling.py output:\n{text[-1000:]}")


def _number(text: str) -> float | None:
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return None if math.isnan(value) else value
