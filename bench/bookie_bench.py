"""Bookie add throughput against its ceilings: pulsar-perf's ``managed-ledger`` idea, no broker.

A real metastore and a real bookie process (``python -m minipulsar bookie``, journal on
``--journal-dir``, ledgers on ``--ledger-dir``); one pipelined writer keeps ``--window``
ADD_ENTRY requests in flight on one connection and measures adds/s, MB/s and the add latency
(p50/p99/p999, HdrHistogram) for 1 KiB and 64 KiB entries with ``journalSyncData`` on and off.
In the same run, on the same journal disk, two ceilings:

- **disk**: a plain Python loop in a thread appending groups of records (one ``pwrite`` of
  ``--disk-group-bytes``, BookKeeper's ``journalBufferedWritesThreshold``) to a preallocated,
  zero-filled file, one ``fdatasync`` per group: the fsync'd MB/s the disk gives Python;
- **hop**: ``../shared/tools/hop_ceiling.py run --server journal``: the barest asyncio server
  that only journals (group commit, fdatasync) and acks: the add rate Python can reach at all.

With 64 KiB, two extra figures: the shared-disk ceiling and the bookie's own I/O pattern at
full speed (:mod:`bench.ceilings`), to tell a disk-bound figure from a pipeline-bound one.

Sketch (2 cores, 1 KiB adds, 1000 in flight): the hop ceiling is ~220k acked msgs/s, ~4.5 µs
of server CPU per message; a bookie at ratio 0.5 has ~9 µs per add for framing, validation,
journal record, group commit, storage insert and the answer. A 1 ms group wait at 100k adds/s
is ~100 adds (100 KiB) per fdatasync. 64 KiB adds at 0.6 of a ~1.4 GB/s disk ceiling are
~13k adds/s: every payload byte is received, copied out of the frame buffer, written and
synced, so ~4 copies of 840 MB/s must fit in the bookie's core.

``--catch-up-reader``: write ``--reader-entries`` entries to a ledger, then run the 1 KiB
writer (sync on) alone and then beside a reader that reads that ledger back in READ_ENTRY
ranges as fast as it can; report the add p99 of both (BIGO's "reads push back writes").

    .venv/bin/python bench/bookie_bench.py --journal-dir /mnt/fast/j --ledger-dir /mnt/big/l --json out.json
    .venv/bin/python bench/bookie_bench.py --catch-up-reader --json catchup.json

Progress goes to stderr; stdout gets the summary and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import capacity
from bench.ceilings import (
    fsync_append_ceiling,
    hop_ceiling,
    io_pattern_ceiling,
    run_in_thread,
    shared_disk_ceiling,
)
from bench.common import (
    MB,
    ROOT,
    BookieDirs,
    LatencyHistogram,
    add_common_arguments,
    bench_dirs,
    bookie_process,
    emit_result,
    environment,
    fmt,
    metastore_process,
    process_cpu_s,
    progress,
    ratio,
    running,
)
from bench.suite.diskstats import FlushWindow
from minipulsar.errors import MiniPulsarError, TooManyRequestsError
from minipulsar.net import Connection, connect
from minipulsar.net.loop import run
from minipulsar.protocol.codec import encode_add_entry
from minipulsar.protocol.commands import AddEntry, AddEntryResponse, Error, ReadEntry
from minipulsar.protocol.schema import Command
from tests.support.process import ServerProcess

KIB = 1024
MIB = 1024 * KIB
SIZES = {"1k": 1 * KIB, "64k": 64 * KIB}
HOP_CEILING = ROOT.parent / "shared" / "tools" / "hop_ceiling.py"
"""``../shared/tools/hop_ceiling.py``: beside the project on every developer machine and in CI."""
ID_BASE = 1 << 30
"""Our add ids start here: far above the RequestTable's (CONNECT), so the two never meet and
responses to our adds come to :meth:`AddWriter.command_received` without a future each."""
DRAIN_TIMEOUT_S = 60.0


# -- the writer ------------------------------------------------------------------------------


class AddEntryTemplate:
    """ADD_ENTRY frames as the broker's bookie client sends them, without an ``AddEntry``:
    :func:`minipulsar.protocol.codec.encode_add_entry`, one ``struct.pack`` of the fixed
    layout the bookie's decoder reads with ``struct`` (the payload, last, follows unchanged),
    so a frame is ``[head(id, entry_id, lac), payload]``. As ``hop_ceiling.py``'s "cheap"
    client, it keeps the bench's own process from being the bottleneck (the codec path
    costs the client ~1.5 µs per add more; ``--client codec`` uses it, and its frames take
    the bookie's msgpack path).
    """

    __slots__ = ("_ledger_id", "_payload")

    def __init__(self, ledger_id: int, payload: bytes) -> None:
        self._ledger_id, self._payload = ledger_id, payload

    def head(self, request_id: int, entry_id: int, lac: int) -> bytes:
        """Length prefix and map up to the payload's bytes."""
        return encode_add_entry(request_id, self._ledger_id, entry_id, lac, False, b"", b"", self._payload)


class AddWriter(Connection):
    """Keeps ``window`` ADD_ENTRY requests in flight on one ledger (optionally at ``rate_per_s``).

    Invariant: ``len(_sent_at)`` is the number of adds in flight; each add is answered once
    (AddEntryResponse or ERROR), and its latency is recorded only while ``measuring``.
    """

    def __init__(
        self,
        ledger_id: int,
        payload: bytes,
        window: int,
        *,
        rate_per_s: float = 0,
        entries_max: int | None = None,
        cheap: bool = True,
    ) -> None:
        super().__init__()
        self.ledger_id, self.payload, self.window = ledger_id, payload, window
        self._template = AddEntryTemplate(ledger_id, payload) if cheap else None
        self.rate_per_s, self.entries_max = rate_per_s, entries_max
        self.histogram = LatencyHistogram()
        self.measuring = False
        self.acked = 0
        """Adds acknowledged while measuring."""
        self.errors = 0
        self.last_error = ""
        self.lac = -1
        self._sent_at: dict[int, int] = {}
        self._next_id = ID_BASE
        self._next_entry = 0
        self._sending = False
        self._started_ns = 0
        self._timer: asyncio.TimerHandle | None = None
        self.drained: asyncio.Future[None] = self._loop.create_future()

    @property
    def entries_sent(self) -> int:
        return self._next_entry

    @property
    def in_flight(self) -> int:
        return len(self._sent_at)

    def begin(self) -> None:
        self._sending = True
        self._started_ns = time.perf_counter_ns()
        self._pump()

    def stop(self) -> asyncio.Future[None]:
        """Send no more; the future resolves once every add in flight is answered."""
        self._sending = False
        if self._timer is not None:
            self._timer.cancel()
        self._check_drained()
        return self.drained

    def _pump(self) -> None:
        if not self._sending or not self.is_open:
            return
        allowed = self.window - len(self._sent_at)
        if self.entries_max is not None:
            allowed = min(allowed, self.entries_max - self._next_entry)
            if allowed <= 0 and self._next_entry >= self.entries_max:
                self._sending = False
                self._check_drained()
                return
        if self.rate_per_s:
            due = int(self.rate_per_s * (time.perf_counter_ns() - self._started_ns) / 1e9) - self._next_entry
            allowed = min(allowed, due)
            if self._timer is None:
                self._timer = self._loop.call_later(0.001, self._tick)
        for _ in range(allowed):
            self._send_add()

    def _tick(self) -> None:
        self._timer = None
        self._pump()

    def _send_add(self) -> None:
        request_id, entry_id = self._next_id, self._next_entry
        self._next_id += 1
        self._next_entry += 1
        self._sent_at[request_id] = time.perf_counter_ns()
        if self._template is not None:
            self.writer.write(self._template.head(request_id, entry_id, self.lac), self.payload)
        else:
            self.send(
                AddEntry(id=request_id, ledger_id=self.ledger_id, entry_id=entry_id, payload=self.payload, lac=self.lac)
            )

    def command_received(self, command: Command) -> None:
        kind = type(command)
        if kind is AddEntryResponse:
            sent_ns = self._sent_at.pop(command.id, None)
            if sent_ns is None:
                return
            if command.entry_id > self.lac:
                self.lac = command.entry_id
            if self.measuring:
                self.acked += 1
                self.histogram.record_us((time.perf_counter_ns() - sent_ns) // 1000)
        elif kind is Error:
            self._sent_at.pop(command.id, None)
            self.errors += 1
            self.last_error = f"{command.code}: {command.message}"
        if self._sending:
            self._pump()  # the sends of one read leave together (CoalescingWriter)
        else:
            self._check_drained()

    def _check_drained(self) -> None:
        if not self._sending and not self._sent_at and not self.drained.done():
            self.drained.set_result(None)

    def closed(self, reason: MiniPulsarError) -> None:
        if self._sent_at:
            self.errors += len(self._sent_at)
            self.last_error = str(reason)
            self._sent_at.clear()
        self._sending = False
        if not self.drained.done():
            self.drained.set_result(None)


# -- the catch-up reader ---------------------------------------------------------------------


class CatchUpReader(Connection):
    """Reads ``[0, last_entry_id]`` of one ledger in ``batch``-entry ranges, ``window`` requests
    in flight, over and over, as fast as the bookie answers. TooManyRequests is retried."""

    def __init__(self, ledger_id: int, last_entry_id: int, batch: int, window: int) -> None:
        super().__init__()
        self.ledger_id, self.last_entry_id, self.batch, self.window = ledger_id, last_entry_id, batch, window
        self.measuring = False
        self.entries = self.bytes = self.requests = self.throttled = self.errors = 0
        self.last_error = ""
        self.histogram = LatencyHistogram()
        self._next_first = 0
        self._in_flight = 0
        self._reading = False

    def command_received(self, command: Command) -> None:  # every answer completes a request
        pass

    def begin(self) -> None:
        self._reading = True
        for _ in range(self.window):
            self._read_next()

    def stop(self) -> None:
        self._reading = False

    def _read_next(self, first: int | None = None) -> None:
        if not self._reading or not self.is_open:
            return
        if first is None:
            first = self._next_first
            self._next_first = first + self.batch if first + self.batch <= self.last_entry_id else 0
        count = min(self.batch, self.last_entry_id - first + 1)
        self._in_flight += 1
        started = time.perf_counter_ns()
        future = self.request(ReadEntry, ledger_id=self.ledger_id, first_entry_id=first, count=count)
        future.add_done_callback(lambda f: self._answered(f, first, started))

    def _answered(self, future: asyncio.Future, first: int, started_ns: int) -> None:
        self._in_flight -= 1
        error = future.exception()
        if isinstance(error, TooManyRequestsError):
            self.throttled += 1
            self._loop.call_later(0.001, self._read_next, first)
            return
        if error is not None:
            self.errors += 1
            self.last_error = str(error)
            self._loop.call_later(0.01, self._read_next)
            return
        response = future.result()
        if self.measuring:
            self.requests += 1
            self.entries += len(response.entries)
            self.bytes += sum(len(payload) for _, payload in response.entries)
            self.histogram.record_us((time.perf_counter_ns() - started_ns) // 1000)
        self._read_next()


# -- runs against the bookie ------------------------------------------------------------------


def effective_window(args: argparse.Namespace, size: int) -> int:
    """``--window``, capped so that no more than ``--window-bytes-max`` payload is in flight."""
    return max(1, min(args.window, args.window_bytes_max // size))


async def open_writer(bookie: ServerProcess, ledger_id: int, size: int, window: int, **kwargs: Any) -> AddWriter:
    payload = os.urandom(size)
    return await connect(
        lambda: AddWriter(ledger_id, payload, window, **kwargs), bookie.host, bookie.port, role="bench"
    )


async def measure_writer(
    writer: AddWriter, bookie: ServerProcess, label: str, args: argparse.Namespace, disk_dirs: tuple[Path, ...] = ()
) -> dict[str, Any]:
    """Warm up, measure ``--secs`` with a progress line per interval, then drain the window.
    ``disk_dirs``: what the devices under them wrote meanwhile is reported (``devices``)."""
    writer.begin()
    await asyncio.sleep(args.warmup)
    writer.measuring = True
    disks = device_windows(disk_dirs)
    started, bookie_cpu0, own_cpu0 = time.perf_counter(), process_cpu_s(bookie.proc.pid), _own_cpu_s()
    deadline, last_acked, last_t, mark = started + args.secs, 0, started, writer.histogram.mark()
    while (now := time.perf_counter()) < deadline and writer.is_open:
        await asyncio.sleep(min(args.progress_interval, deadline - now))
        t, acked = time.perf_counter(), writer.acked
        progress(
            f"{label}: {(acked - last_acked) / (t - last_t):>10,.0f} adds/s "
            f"{(acked - last_acked) * len(writer.payload) / (t - last_t) / MB:>8.1f} MB/s  "
            f"p99 {fmt(writer.histogram.percentile_since_ms(mark, 99), '.2f')} ms"
        )
        last_acked, last_t, mark = acked, t, writer.histogram.mark()
    writer.measuring = False
    elapsed_s = time.perf_counter() - started
    bookie_cpu = (process_cpu_s(bookie.proc.pid) - bookie_cpu0) / elapsed_s * 100
    own_cpu = (_own_cpu_s() - own_cpu0) / elapsed_s * 100
    devices = {window.device: window.stop() for window in disks}
    try:
        await asyncio.wait_for(writer.stop(), DRAIN_TIMEOUT_S)
    except TimeoutError:
        raise SystemExit(
            f"{label}: {writer.in_flight} adds still unanswered {DRAIN_TIMEOUT_S:.0f}s after the "
            f"run (see the bookie's log, {bookie.log_path.name})"
        ) from None
    result = {
        "label": label,
        "entry_bytes": len(writer.payload),
        "window": writer.window,
        "adds_per_s": writer.acked / elapsed_s,
        "mb_per_s": writer.acked * len(writer.payload) / elapsed_s / MB,
        **writer.histogram.summary_ms(),
        "adds": writer.acked,
        "errors": writer.errors,
        "bookie_cpu_pct": bookie_cpu,
        "client_cpu_pct": own_cpu,
        "secs": elapsed_s,
        "devices": devices,
    }
    if writer.errors:
        result["last_error"] = writer.last_error
        progress(f"{label}: {writer.errors} adds failed, last: {writer.last_error}")
    return result


def device_windows(directories: tuple[Path, ...]) -> list[FlushWindow]:
    """One started :class:`FlushWindow` per block device under ``directories`` (journal and
    ledger dirs on one disk count once)."""
    windows: dict[str | None, FlushWindow] = {}
    for directory in directories:
        window = FlushWindow(directory).start()
        if window.device is not None:
            windows.setdefault(window.device, window)
    return list(windows.values())


def _own_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


async def writer_runs(
    bookie: ServerProcess, sync: bool, first_ledger_id: int, args: argparse.Namespace, dirs: BookieDirs
) -> list[dict[str, Any]]:
    results = []
    for index, (name, size) in enumerate(SIZES.items()):
        if name not in args.sizes:
            continue
        writer = await open_writer(
            bookie,
            first_ledger_id + index,
            size,
            effective_window(args, size),
            rate_per_s=args.rate,
            cheap=args.client == "cheap",
        )
        try:
            result = await measure_writer(
                writer, bookie, f"bookie {name} sync={'on' if sync else 'off'}", args, (dirs.journal, dirs.ledgers)
            )
        finally:
            writer.close()
        result["sync"] = sync
        results.append(result)
    return results


async def prewrite(bookie: ServerProcess, ledger_id: int, entries: int, size: int, window: int) -> None:
    """Write ``entries`` entries to ``ledger_id`` (the catch-up reader's backlog)."""
    writer = await open_writer(bookie, ledger_id, size, window, entries_max=entries)
    started = time.perf_counter()
    writer.begin()
    while not writer.drained.done():
        await asyncio.wait([writer.drained], timeout=1.0)
        progress(f"pre-writing ledger {ledger_id}: {writer.entries_sent:,}/{entries:,} entries")
    writer.close()
    if writer.errors:
        raise RuntimeError(f"pre-writing failed: {writer.errors} errors, last: {writer.last_error}")
    progress(f"pre-wrote {entries:,} entries of {size} bytes in {time.perf_counter() - started:.1f}s")


async def catch_up_runs(bookie: ServerProcess, args: argparse.Namespace) -> dict[str, Any]:
    size, window = SIZES["1k"], effective_window(args, SIZES["1k"])
    backlog_ledger = 1000
    await prewrite(bookie, backlog_ledger, args.reader_entries, size, window)
    writer = await open_writer(bookie, 1001, size, window, rate_per_s=args.rate, cheap=args.client == "cheap")
    try:
        alone = await measure_writer(writer, bookie, "writer alone", args)
    finally:
        writer.close()
    reader = await connect(
        lambda: CatchUpReader(backlog_ledger, args.reader_entries - 1, args.read_batch, args.read_window),
        bookie.host,
        bookie.port,
        role="bench",
    )
    writer = await open_writer(bookie, 1002, size, window, rate_per_s=args.rate, cheap=args.client == "cheap")
    try:
        reader.begin()
        read_started = time.perf_counter()
        reader.measuring = True
        with_reader = await measure_writer(writer, bookie, "writer + catch-up reader", args)
        reader.measuring = False
        read_s = time.perf_counter() - read_started
    finally:
        reader.stop()
        writer.close()
        reader.close()
    reads = {
        "read_entries_per_s": reader.entries / read_s,
        "read_mb_per_s": reader.bytes / read_s / MB,
        "read_requests_per_s": reader.requests / read_s,
        "read_batch": args.read_batch,
        "read_window": args.read_window,
        "read_throttled": reader.throttled,
        "read_errors": reader.errors,
        **{f"read_{k}": v for k, v in reader.histogram.summary_ms().items()},
    }
    if reader.errors:
        reads["read_last_error"] = reader.last_error
    return {"alone": alone, "with_reader": with_reader, "reads": reads}


# -- ceilings ----------------------------------------------------------------------------------


def ceiling_runs(journal_root: Path, ledger_root: Path, args: argparse.Namespace) -> dict[str, Any]:
    ceilings: dict[str, Any] = {}
    if args.no_ceilings:
        progress("ceilings skipped (--no-ceilings): no ratios in this run")
        return {"disk_1k": {}, "disk_64k": {}, "hop": {"skipped": "--no-ceilings"}}
    for name, size in SIZES.items():
        progress(f"disk ceiling {name}: groups of {args.disk_group_bytes // size} x {size} B, fdatasync each")
        ceilings[f"disk_{name}"] = result = run_in_thread(
            fsync_append_ceiling, journal_root, size, args.disk_group_bytes, args.secs, args.disk_file_mb << 20
        )
        progress(
            f"disk ceiling {name}: {result['mb_per_s']:,.0f} MB/s, {result['records_per_s']:,.0f} records/s, "
            f"{result['groups_per_s']:,.0f} fdatasync/s"
        )
    if "64k" in args.sizes:
        progress("shared-disk ceiling 64k: the same loop beside a second writer of as many bytes (extra figure)")
        ceilings["shared_disk_64k"] = result = run_in_thread(
            shared_disk_ceiling, journal_root, SIZES["64k"], args.disk_group_bytes, args.secs, args.disk_file_mb << 20
        )
        progress(
            f"shared-disk ceiling 64k: {result['mb_per_s']:,.0f} MB/s journaled "
            f"(+{result['second_writer_mb_per_s']:,.0f} MB/s by the second writer)"
        )
        progress(
            "I/O-pattern ceiling 64k: the bookie's direct writes, back to back, in its journal and ledger dirs "
            "(extra figure)"
        )
        ceilings["io_pattern_64k"] = result = run_in_thread(
            io_pattern_ceiling, journal_root, ledger_root, args.secs, 4 * MIB, MIB, 2, args.disk_file_mb << 20
        )
        if "skipped" in result:
            progress(f"I/O-pattern ceiling 64k skipped: {result['skipped']}")
        else:
            progress(
                f"I/O-pattern ceiling 64k: {result['mb_per_s']:,.0f} MB/s (journal "
                f"{result['journal_mb_per_s']:,.0f}, entry logs {result['entry_log_mb_per_s']:,.0f})"
            )
    tool = Path(args.hop_ceiling)
    if not tool.exists():
        progress(f"hop ceiling skipped: {tool} not found (../shared is not beside the project)")
        ceilings["hop"] = {"skipped": f"{tool} not found"}
        return ceilings
    progress(
        f"hop ceiling: {tool.name} run --server journal --window {args.window} (~{args.secs + args.warmup + 1:.0f}s)"
    )
    ceilings["hop"] = result = hop_ceiling(tool, journal_root, args.window, args.secs, args.warmup)
    progress(
        f"hop ceiling: {fmt(result.get('msgs_per_s'))} msgs/s, p99 {fmt(result.get('p99_ms'), '.2f')} ms, "
        f"{fmt(result.get('msgs_per_group'))} msgs per fdatasync"
    )
    return ceilings


# -- the two modes --------------------------------------------------------------------------


def bookie_settings(sync: bool, args: argparse.Namespace) -> dict[str, Any]:
    # Steady state within a short run: a bookie writes every journal segment over a trimmed one
    # (journalReuseFiles) except its first few. With BookKeeper's 2 GiB segments a run of a few
    # seconds would measure only those first, freshly allocated segments.
    settings: dict[str, Any] = {
        "journalSyncData": sync,
        "zkTimeout": 10_000,
        "journalMaxSizeMB": args.journal_segment_mb,
    }
    for item in args.bookie_set:
        key, _, value = item.partition("=")
        settings[key.strip()] = value.strip()
    return settings


def throughput_mode(args: argparse.Namespace) -> dict[str, Any]:
    syncs = {"on": [True], "off": [False], "both": [True, False]}[args.sync]
    with bench_dirs(args.journal_dir, args.ledger_dir, args.keep) as (journal_root, ledger_root, logs):
        ceilings = ceiling_runs(journal_root, ledger_root, args)
        runs: list[dict[str, Any]] = []
        metastore = metastore_process(logs / "metastore-data", logs)
        with running(metastore):
            for sync in syncs:
                tag = "sync-on" if sync else "sync-off"
                dirs = BookieDirs(journal_root / tag, ledger_root / tag, logs)
                bookie = bookie_process(dirs, f"metastore://{metastore.address}", bookie_settings(sync, args), tag)
                progress(
                    f"starting a bookie with journalSyncData={str(sync).lower()} "
                    f"(journal {dirs.journal}, ledgers {dirs.ledgers})"
                )
                with running(bookie):
                    runs += run(writer_runs(bookie, sync, 10 if sync else 20, args, dirs))
                if sync and ceilings.get("disk_64k") and "64k" in args.sizes:
                    ceilings["disk_64k_after"] = disk_ceiling_again(journal_root, args)
        two_devices = separate_devices(journal_root, ledger_root)
    return throughput_result(ceilings, runs, args, two_devices)


def separate_devices(journal_root: Path, ledger_root: Path) -> bool:
    """Whether the journal and the ledger dirs are on different devices (``st_dev``): then the
    journal's disk writes only the journal, and ``ratio_64k_two_devices`` is the figure."""
    return os.stat(journal_root).st_dev != os.stat(ledger_root).st_dev


def disk_ceiling_again(journal_root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The 64 KiB disk ceiling once more, right after the bookie's sync-on runs (an extra
    figure): the ceiling drifts on shared VMs, and the two readings show by how much."""
    progress("disk ceiling 64k again, right after the bookie's sync-on runs (extra figure)")
    result = run_in_thread(
        fsync_append_ceiling, journal_root, SIZES["64k"], args.disk_group_bytes, args.secs, args.disk_file_mb << 20
    )
    progress(f"disk ceiling 64k again: {result['mb_per_s']:,.0f} MB/s")
    return result


def throughput_result(
    ceilings: dict[str, Any], runs: list[dict[str, Any]], args: argparse.Namespace, two_devices: bool = False
) -> dict[str, Any]:
    """The figures; ``two_devices``: the ledger dirs are on another device than the journal's
    (``ratio_64k_two_devices`` is written only then)."""

    def pick(name: str, sync: bool) -> dict[str, Any]:
        size = SIZES[name]
        return next((r for r in runs if r["entry_bytes"] == size and r["sync"] is sync), {})

    on_1k, on_64k, off_1k, off_64k = pick("1k", True), pick("64k", True), pick("1k", False), pick("64k", False)
    hop = ceilings.get("hop", {}).get("msgs_per_s")
    disk_64k, disk_1k = ceilings["disk_64k"].get("mb_per_s"), ceilings["disk_1k"].get("mb_per_s")
    shared_64k = ceilings.get("shared_disk_64k", {}).get("mb_per_s")
    pattern_64k = ceilings.get("io_pattern_64k", {}).get("mb_per_s")
    disk_64k_after = ceilings.get("disk_64k_after", {}).get("mb_per_s")
    return {
        "name": "bookie_bench",
        "mode": "throughput",
        "adds_per_s_1k": on_1k.get("adds_per_s"),
        "hop_ceiling_per_s_1k": hop,
        "ratio_1k": ratio(on_1k.get("adds_per_s"), hop),
        "mb_per_s_64k": on_64k.get("mb_per_s"),
        "disk_fsync_mb_per_s_64k": disk_64k,
        "ratio_64k": ratio(on_64k.get("mb_per_s"), disk_64k),
        "mb_per_s_1k": on_1k.get("mb_per_s"),
        "adds_per_s_64k": on_64k.get("adds_per_s"),
        "add_p99_ms_1k": on_1k.get("p99_ms"),
        "add_p99_ms_64k": on_64k.get("p99_ms"),
        "disk_fsync_mb_per_s_1k": disk_1k,
        "disk_fsync_records_per_s_1k": ceilings["disk_1k"].get("records_per_s"),
        "adds_per_s_1k_nosync": off_1k.get("adds_per_s"),
        "mb_per_s_64k_nosync": off_64k.get("mb_per_s"),
        "ratio_1k_nosync": ratio(off_1k.get("adds_per_s"), hop),
        "ratio_64k_nosync": ratio(off_64k.get("mb_per_s"), disk_64k),
        "shared_disk_fsync_mb_per_s_64k": shared_64k,
        "ratio_64k_shared_disk": ratio(on_64k.get("mb_per_s"), shared_64k),
        "two_devices": two_devices,
        **({"ratio_64k_two_devices": ratio(on_64k.get("mb_per_s"), disk_64k)} if two_devices else {}),
        "io_pattern_mb_per_s_64k": pattern_64k,
        "ratio_64k_io_pattern": ratio(on_64k.get("mb_per_s"), pattern_64k),
        "device_write_mb_per_s_64k": journal_device_write(on_64k),
        "disk_fsync_mb_per_s_64k_after": disk_64k_after,
        "ratio_64k_after": ratio(on_64k.get("mb_per_s"), disk_64k_after),
        "ceilings": ceilings,
        "runs": runs,
        "params": _params(args),
        **environment(),
    }


def journal_device_write(run: dict[str, Any]) -> float | None:
    """MB/s the journal's device wrote during ``run`` (its journal, and its entry logs when the
    ledger dirs share it): the first device measured is the journal's."""
    devices = list(run.get("devices", {}).values())
    return devices[0].get("device_write_mb_per_s") if devices else None


def catch_up_mode(args: argparse.Namespace) -> dict[str, Any]:
    with bench_dirs(args.journal_dir, args.ledger_dir, args.keep) as (journal_root, ledger_root, logs):
        metastore = metastore_process(logs / "metastore-data", logs)
        dirs = BookieDirs(journal_root / "catch-up", ledger_root / "catch-up", logs)
        with running(metastore):
            bookie = bookie_process(dirs, f"metastore://{metastore.address}", bookie_settings(True, args), "catch-up")
            with running(bookie):
                outcome = run(catch_up_runs(bookie, args))
    alone, together = outcome["alone"], outcome["with_reader"]
    return {
        "name": "bookie_bench",
        "mode": "catch-up-reader",
        "add_p99_ms_alone": alone.get("p99_ms"),
        "add_p99_ms_with_reader": together.get("p99_ms"),
        "add_p99_ratio": ratio(together.get("p99_ms"), alone.get("p99_ms")),
        "adds_per_s_alone": alone.get("adds_per_s"),
        "adds_per_s_with_reader": together.get("adds_per_s"),
        **outcome["reads"],
        "runs": [alone, together],
        "params": _params(args),
        **environment(),
    }


def _params(args: argparse.Namespace) -> dict[str, Any]:
    return {key: value for key, value in vars(args).items() if key not in ("json",)}


# -- output ------------------------------------------------------------------------------------


def print_throughput(result: dict[str, Any]) -> None:
    print(
        f"{'run':<24} {'window':>6} {'adds/s':>10} {'MB/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'p999 ms':>8} "
        f"{'bookie CPU%':>11} {'errors':>6}"
    )
    for r in result["runs"]:
        print(
            f"{r['label']:<24} {r['window']:>6} {r['adds_per_s']:>10,.0f} {r['mb_per_s']:>8.1f} "
            f"{fmt(r['p50_ms'], '.2f'):>8} {fmt(r['p99_ms'], '.2f'):>8} {fmt(r['p999_ms'], '.2f'):>8} "
            f"{r['bookie_cpu_pct']:>11.0f} {r['errors']:>6}"
        )
    ceilings = result["ceilings"]
    for name in SIZES:
        d = ceilings[f"disk_{name}"]
        if not d:
            continue
        print(
            f"disk ceiling {name:<4}: {d['mb_per_s']:>8,.0f} MB/s {d['records_per_s']:>11,.0f} records/s "
            f"({d['records_per_group']} per fdatasync, {d['groups_per_s']:,.0f} fdatasync/s)"
        )
    hop = ceilings["hop"]
    if "skipped" in hop:
        print(f"hop ceiling    : skipped ({hop['skipped']})")
    else:
        print(
            f"hop ceiling 1k : {fmt(hop.get('msgs_per_s')):>8} msgs/s, p99 {fmt(hop.get('p99_ms'), '.2f')} ms, "
            f"server CPU {fmt(hop.get('server_cpu_pct'))}%, {fmt(hop.get('msgs_per_group'))} msgs per fdatasync"
        )
    print(
        f"ratio_1k  = adds/s 1k sync on / hop ceiling  = {fmt(result['adds_per_s_1k'])} / "
        f"{fmt(result['hop_ceiling_per_s_1k'])} = {fmt(result['ratio_1k'], '.2f')}  (target >= 0.5)"
    )
    print(
        f"ratio_64k = MB/s 64k sync on / disk fsync MB/s = {fmt(result['mb_per_s_64k'], '.1f')} / "
        f"{fmt(result['disk_fsync_mb_per_s_64k'], '.1f')} = {fmt(result['ratio_64k'], '.2f')}"
    )
    if result.get("shared_disk_fsync_mb_per_s_64k"):
        print(
            f"ratio_64k_shared_disk = MB/s 64k sync on / journal MB/s beside a second writer = "
            f"{fmt(result['mb_per_s_64k'], '.1f')} / {fmt(result['shared_disk_fsync_mb_per_s_64k'], '.1f')} = "
            f"{fmt(result['ratio_64k_shared_disk'], '.2f')}  (target >= 0.8 with journal and ledgers on one disk"
            f"{'; this run has two devices' if result['two_devices'] else ''})"
        )
    if result["two_devices"]:
        print(
            f"ratio_64k_two_devices = MB/s 64k sync on / the journal device's disk fsync MB/s = "
            f"{fmt(result['mb_per_s_64k'], '.1f')} / {fmt(result['disk_fsync_mb_per_s_64k'], '.1f')} = "
            f"{fmt(result.get('ratio_64k_two_devices'), '.2f')}  (target >= 0.6: ledgers on another device)"
        )
    if result.get("disk_fsync_mb_per_s_64k_after"):
        print(
            f"  extra: ratio_64k_after = the same over the disk fsync ceiling measured again right after = "
            f"{fmt(result['mb_per_s_64k'], '.1f')} / {fmt(result['disk_fsync_mb_per_s_64k_after'], '.1f')} = "
            f"{fmt(result['ratio_64k_after'], '.2f')}  (the ceiling's drift within this run)"
        )
    if result.get("io_pattern_mb_per_s_64k"):
        print(
            f"  extra: ratio_64k_io_pattern = MB/s 64k sync on / the bookie's own direct-I/O pattern at full speed = "
            f"{fmt(result['mb_per_s_64k'], '.1f')} / {fmt(result['io_pattern_mb_per_s_64k'], '.1f')} = "
            f"{fmt(result['ratio_64k_io_pattern'], '.2f')}  (its journal and ledger dirs, where they are)"
        )
    if result.get("device_write_mb_per_s_64k"):
        print(
            f"  the journal's disk wrote {fmt(result['device_write_mb_per_s_64k'], ',.0f')} MB/s during 64k sync on "
            f"(journal, and entry logs when they share it) = "
            f"{fmt(ratio(result['device_write_mb_per_s_64k'], result['disk_fsync_mb_per_s_64k']), '.2f')} "
            f"x the disk fsync ceiling"
        )
    print(
        f"sync off: ratio_1k {fmt(result['ratio_1k_nosync'], '.2f')}, "
        f"ratio_64k {fmt(result['ratio_64k_nosync'], '.2f')}"
    )


def print_catch_up(result: dict[str, Any]) -> None:
    for r in result["runs"]:
        print(
            f"{r['label']:<26} {r['adds_per_s']:>10,.0f} adds/s  p50 {fmt(r['p50_ms'], '.2f')} ms  "
            f"p99 {fmt(r['p99_ms'], '.2f')} ms  p999 {fmt(r['p999_ms'], '.2f')} ms  errors {r['errors']}"
        )
    print(
        f"catch-up reader: {result['read_entries_per_s']:,.0f} entries/s, {result['read_mb_per_s']:.1f} MB/s, "
        f"read p99 {fmt(result['read_p99_ms'], '.2f')} ms, {result['read_throttled']} throttled, "
        f"{result['read_errors']} errors"
    )
    print(
        f"add p99 with reader / alone = {fmt(result['add_p99_ms_with_reader'], '.2f')} / "
        f"{fmt(result['add_p99_ms_alone'], '.2f')} ms = {fmt(result['add_p99_ratio'], '.2f')}x"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_common_arguments(parser)
    parser.add_argument("--journal-dir", help="where the journals (and both ceilings) go; default: a temp dir")
    parser.add_argument("--ledger-dir", help="where the ledger dirs go; default: a temp dir")
    parser.add_argument("--window", type=int, default=1000, help="adds in flight (default 1000)")
    parser.add_argument(
        "--window-bytes-max",
        type=int,
        default=8 << 20,
        metavar="BYTES",
        help="cap on payload bytes in flight: 64 KiB adds get a smaller window (default 8 MiB)",
    )
    parser.add_argument(
        "--client",
        choices=["cheap", "codec"],
        default="cheap",
        help="cheap: ADD_ENTRY frames as the broker sends them (encode_add_entry); "
        "codec: AddEntry commands through the codec",
    )
    parser.add_argument("--rate", type=float, default=0, help="adds/s per writer; 0 = as fast as acked (default)")
    parser.add_argument(
        "--sync", choices=["on", "off", "both"], default="both", help="journalSyncData settings to run (default both)"
    )
    parser.add_argument(
        "--sizes",
        type=lambda text: text.split(","),
        default=list(SIZES),
        metavar="1k,64k",
        help="entry sizes to run against the bookie (default both)",
    )
    parser.add_argument(
        "--bookie-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra bookkeeper.conf setting for the bookie (repeatable)",
    )
    parser.add_argument(
        "--journal-segment-mb",
        type=int,
        default=256,
        metavar="MB",
        help="journalMaxSizeMB of the bookie (default 256: segments are reused within the "
        "warm-up, as in a bookie that has run for a while; --bookie-set overrides it)",
    )
    parser.add_argument(
        "--disk-group-bytes",
        type=int,
        default=512 * 1024,
        metavar="BYTES",
        help="disk ceiling: bytes per fdatasync (default 512 KiB = journalBufferedWritesThreshold)",
    )
    parser.add_argument("--disk-file-mb", type=int, default=256, help="disk ceiling: preallocated file size (MiB)")
    parser.add_argument(
        "--hop-ceiling",
        default=str(HOP_CEILING),
        metavar="PATH",
        help="path of hop_ceiling.py (default ../shared/tools/hop_ceiling.py)",
    )
    parser.add_argument("--no-ceilings", action="store_true", help="skip both ceilings (quick A/B runs)")
    parser.add_argument(
        "--catch-up-reader",
        action="store_true",
        help="instead: add p99 with and without a catch-up reader beside the writer",
    )
    parser.add_argument(
        "--reader-entries",
        type=int,
        default=100_000,
        help="catch-up mode: 1 KiB entries written first for the reader (default 100000)",
    )
    parser.add_argument("--read-batch", type=int, default=100, help="catch-up mode: entries per READ_ENTRY")
    parser.add_argument("--read-window", type=int, default=4, help="catch-up mode: READ_ENTRY requests in flight")
    parser.add_argument("--keep", action="store_true", help="keep the bench's dirs and logs (printed at the end)")
    return parser.parse_args(argv)


def check_space(args: argparse.Namespace) -> None:
    """Refuse a run its mounts cannot hold (bench/capacity.py), before anything is written."""
    temp = Path(tempfile.gettempdir())
    writes = capacity.bookie_bench_writes(
        Path(args.journal_dir) if args.journal_dir else temp,
        Path(args.ledger_dir) if args.ledger_dir else temp,
        {name: size for name, size in SIZES.items() if name in args.sizes},
        args.secs + args.warmup,
        2 if args.sync == "both" else 1,
        args.rate,
        0 if args.no_ceilings else args.disk_file_mb << 20,
        args.reader_entries if args.catch_up_reader else None,
    )
    for line in capacity.check_space(writes, "Shorten the run (--secs, --sizes, --sync) or pick a bigger mount."):
        progress(f"space: {line}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # as Ctrl-C: every finally stops its servers
    check_space(args)
    if args.catch_up_reader:
        result = catch_up_mode(args)
        print_catch_up(result)
    else:
        result = throughput_mode(args)
        print_throughput(result)
    emit_result(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
