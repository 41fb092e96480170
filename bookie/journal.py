"""The journal: a write-ahead log with group commit, one writer thread per journal directory.

The event loop queues records (:meth:`Journal.try_add_entry`, :meth:`Journal.add_fence`); the
writer thread drains the queue, asks :class:`GroupCommitPolicy` whether to flush, and writes
the whole group with one ``pwrite`` and one ``fdatasync`` (``journalSyncData``). It then
completes every record of the group — its future, or its callback on the hot add path —
with ONE ``loop.call_soon_threadsafe``.

Invariants:
- a record completes only after its group was written and, with ``journalSyncData``,
  synced: an add is acknowledged only once durable; records complete in queue order;
- records of one journal reach the disk in the order they were queued;
- admission is bounded (``journalQueueSize`` records, ``journalMaxMemorySizeMb`` bytes, from
  queued until durable): past the bound :meth:`try_add_entry` returns None and callers await
  :meth:`wait_for_capacity` (FIFO) — adds are slowed down, never dropped;
- a failed write or sync fails the group and every later add: the file position is no
  longer trustworthy, so the journal stops accepting instead of guessing;
- segments roll at ``journalMaxSizeMB`` after a group, never inside one;
- :attr:`Journal.applied_mark` is the end of the last group whose records were all completed
  on the loop (for adds: put into the ledger storage). It is what a checkpoint captures; the
  segments wholly before a persisted checkpoint are deleted (:meth:`Journal.trim`), and a
  restart replays only from it (:meth:`Journal.replay`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bookie import metrics
from bookie.group_commit import FlushReason, GroupCommitPolicy
from bookie.journal_format import (
    INT64_MAX,
    RECORD_HEADER_SIZE,
    EntryLocation,
    JournalRecord,
    LogMark,
    RecordType,
    ScanEnd,
    ScannedRecord,
    encode_record,
)
from bookie.journal_segment import (
    SegmentScan,
    SegmentWriter,
    delete_segments_before,
    list_segments,
    replay_directory,
    scan_segment,
    segment_path,
)
from bookie.storage.checkpoint import Checkpoint
from minipulsar.config import BookieConfig
from minipulsar.errors import MiniPulsarError, ServiceNotReadyError, UnknownServerError

log = logging.getLogger(__name__)

MIB = 1024 * 1024

ReplayVisitor = Callable[[JournalRecord, EntryLocation, bytes], None]
"""Called once per valid record during replay: the record, where its payload is, the payload."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalSettings:
    policy: GroupCommitPolicy = field(default_factory=GroupCommitPolicy)
    sync_data: bool = True
    """journalSyncData: fdatasync each group before acknowledging it."""
    max_segment_bytes: int = 2048 * MIB
    """journalMaxSizeMB: roll to a new segment past this size."""
    prealloc_bytes: int = 16 * MIB
    """journalPreAllocSizeMB: zero-fill segments ahead of the writes in steps of this size."""
    queue_entries_max: int = 10_000
    """journalQueueSize (BookKeeper: 10 000)."""
    queue_bytes_max: int = 64 * MIB
    """journalMaxMemorySizeMb: bytes queued and not yet durable."""

    @classmethod
    def from_config(cls, config: BookieConfig) -> JournalSettings:
        return cls(
            policy=GroupCommitPolicy(
                max_group_wait_s=config.journal_max_group_wait_ms / 1000,
                buffered_writes_threshold_bytes=config.journal_buffered_writes_threshold,
                buffered_entries_threshold=config.journal_buffered_entries_threshold,
                flush_when_queue_empty=config.journal_flush_when_queue_empty,
                adaptive_group_writes=config.journal_adaptive_group_writes,
            ),
            sync_data=config.journal_sync_data,
            max_segment_bytes=config.journal_max_size_mb * MIB,
            prealloc_bytes=config.journal_prealloc_size_mb * MIB,
            queue_entries_max=config.journal_queue_size,
            queue_bytes_max=config.journal_max_memory_size_mb * MIB,
        )


@dataclass(slots=True)
class JournalStats:
    """Counters of one journal (written by its thread; read for tests and load reports)."""

    groups: int = 0
    records: int = 0
    bytes_written: int = 0
    syncs: int = 0
    rolls: int = 0
    flushes: dict[FlushReason, int] = field(default_factory=lambda: dict.fromkeys(FlushReason, 0))
    group_sizes: list[int] = field(default_factory=list)
    """Size of the last groups (bounded), for tests and diagnostics."""


@dataclass(slots=True)
class ReplayResult:
    segments: int = 0
    records: int = 0
    lost_tail: bool = False
    """The last segment ended with a torn or corrupt record (discarded)."""
    end_mark: LogMark | None = None
    """The end of the last valid record replayed (or the start mark when nothing followed it)."""


OnDurable = Callable[[EntryLocation | None, BaseException | None], None] | asyncio.Future
"""How a queued record is completed: a callback ``(location, None)`` / ``(None, error)``, or a
future resolved with the location (or failed with the error)."""


def _complete(on_durable: OnDurable, location: EntryLocation | None, error: BaseException | None) -> None:
    if isinstance(on_durable, asyncio.Future):
        if on_durable.done():
            return
        if error is None:
            on_durable.set_result(location)
        else:
            on_durable.set_exception(error)
    else:
        on_durable(location, error)


class _Pending:
    """One record queued on the loop and written by the thread."""

    __slots__ = ("record", "payload", "on_durable", "enqueued_at", "size")

    def __init__(self, record: JournalRecord, payload: bytes, on_durable: OnDurable) -> None:
        self.record = record
        self.payload = payload
        self.on_durable = on_durable
        self.enqueued_at = time.monotonic()
        self.size = RECORD_HEADER_SIZE + len(payload)


_STOP = object()
_GROUP_SIZES_KEPT = 1000


class Journal:
    """One journal directory: its segments, its queue and its writer thread."""

    def __init__(self, directory: str | Path, index: int = 0, settings: JournalSettings | None = None) -> None:
        self.directory = Path(directory)
        self.index = index
        self.settings = settings or JournalSettings()
        self.stats = JournalStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._queued_entries = 0
        self._queued_bytes = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Future[None] | None = None
        self._writer: SegmentWriter | None = None
        self._last_scan: SegmentScan | None = None
        self._failure: MiniPulsarError | None = None
        self._closing = False
        self.applied_mark: LogMark | None = None
        """End of the last group completed on the loop (see the module docstring)."""

    # -- start: replay, then open the segment to append to -------------------------------------

    def replay(self, visit: ReplayVisitor, start: LogMark | None = None) -> ReplayResult:
        """Replay every valid record from ``start`` (a checkpoint's mark; None: from the first
        segment), oldest first, and set :attr:`applied_mark` to where the replay ended.
        Blocking: run it on a worker thread, before :meth:`start`."""
        self.directory.mkdir(parents=True, exist_ok=True)
        index = self.index

        def on_record(segment_id: int, item: ScannedRecord) -> None:
            visit(item.record, EntryLocation(index, segment_id, item.payload_offset, len(item.payload)),
                  item.payload)

        scans = replay_directory(self.directory, on_record, start)
        self._last_scan = scans[-1] if scans else None
        lost_tail = bool(scans) and scans[-1].end is not ScanEnd.CLEAN
        end_mark = start
        for scan in scans:
            if scan.header_ok:
                end_mark = LogMark(scan.segment_id, scan.end_offset)
        self.applied_mark = end_mark
        return ReplayResult(len(scans), sum(s.records for s in scans), lost_tail, end_mark)

    def trim(self, mark: LogMark | None) -> list[int]:
        """Delete the segments wholly before ``mark`` (a persisted checkpoint's); blocking.

        Safe beside the writer thread: it only ever appends to the newest segment, which is
        at or after any mark."""
        if mark is None:
            return []
        deleted = delete_segments_before(self.directory, mark.segment_id)
        if deleted:
            log.info("journal %s: deleted %d segment(s) before checkpoint %s", self.directory, len(deleted), mark)
        return deleted

    async def start(self) -> None:
        """Open (or create) the segment to append to and start the writer thread."""
        assert self._thread is None, "journal already started"
        self._loop = asyncio.get_running_loop()
        self._stopped = self._loop.create_future()
        started: asyncio.Future[None] = self._loop.create_future()
        self._thread = threading.Thread(target=self._run, args=(started,), daemon=True,
                                        name=f"journal-{self.index}")
        self._thread.start()
        await started

    def _open_writer(self) -> SegmentWriter:
        self.directory.mkdir(parents=True, exist_ok=True)
        settings = self.settings
        segment_ids = list_segments(self.directory)
        # Never append below the replay's end: records there would sit before a checkpoint
        # mark and be skipped by the next replay (only reachable if segments were removed
        # by hand, but then new ones start after the mark).
        floor = self.applied_mark.segment_id if self.applied_mark is not None else 0
        if not segment_ids or segment_ids[-1] < floor:
            return self._create_segment(max(floor, segment_ids[-1] if segment_ids else 0) + 1)
        last = segment_ids[-1]
        scan = self._last_scan
        if scan is None or scan.segment_id != last:
            scan = scan_segment(segment_path(self.directory, last), last, lambda _: None)
        if not scan.header_ok:
            # Created but never made durable with a header: it holds no record.
            os.unlink(segment_path(self.directory, last))
            return self._create_segment(last)
        if scan.end_offset >= settings.max_segment_bytes:
            return self._create_segment(last + 1)
        return SegmentWriter.reopen(self.directory, scan, settings.prealloc_bytes)

    def _create_segment(self, segment_id: int) -> SegmentWriter:
        started = time.monotonic()
        writer = SegmentWriter.create(self.directory, segment_id, self.settings.prealloc_bytes)
        metrics.JOURNAL_CREATION_LATENCY.observe((time.monotonic() - started) * 1000)
        return writer

    # -- the loop side ---------------------------------------------------------------------------

    @property
    def has_capacity(self) -> bool:
        settings = self.settings
        return (self._queued_entries < settings.queue_entries_max
                and self._queued_bytes < settings.queue_bytes_max)

    @property
    def queued_entries(self) -> int:
        return self._queued_entries

    def try_add_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes,
                      on_durable: OnDurable) -> bool:
        """Queue an ADD record; ``on_durable(location, None)`` runs on the loop once it is durable
        (``on_durable(None, error)`` if it cannot be). The hot path: no future, no task.

        Returns False when the queue is at its bound (or others are already waiting): await
        :meth:`wait_for_capacity`, then :meth:`admit_entry`.
        """
        if self._waiters or not self.has_capacity:
            return False
        self._enqueue(JournalRecord(RecordType.ADD_ENTRY, ledger_id, entry_id, lac), payload, on_durable)
        return True

    def admit_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes, on_durable: OnDurable) -> None:
        """Queue an ADD record regardless of the bound: only right after :meth:`wait_for_capacity`
        returned, with no ``await`` in between (that return is the caller's turn)."""
        self._enqueue(JournalRecord(RecordType.ADD_ENTRY, ledger_id, entry_id, lac), payload, on_durable)

    async def add_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes) -> EntryLocation:
        """Queue an ADD record, waiting for room first; returns once it is durable."""
        assert self._loop is not None, "journal not started"
        future: asyncio.Future[EntryLocation] = self._loop.create_future()
        if not self.try_add_entry(ledger_id, entry_id, lac, payload, future):
            await self.wait_for_capacity()
            self.admit_entry(ledger_id, entry_id, lac, payload, future)
        return await future

    def add_fence(self, ledger_id: int) -> asyncio.Future:
        """Queue a FENCE record; the future resolves once it is durable. Never refused for lack
        of room: fencing is rare and tiny, and ledger recovery must not wait behind adds."""
        assert self._loop is not None, "journal not started"
        future: asyncio.Future[EntryLocation] = self._loop.create_future()
        self._enqueue(JournalRecord(RecordType.FENCE, ledger_id, -1, -1), b"", future)
        return future

    async def wait_for_capacity(self) -> None:
        """Return once the queue has room and every earlier waiter has been served.

        The caller must then queue its record at once (:meth:`admit_entry`); the next waiter
        is admitted after that, in a later callback.
        """
        assert self._loop is not None
        if self._failure is not None or self._closing:
            return
        waiter = self._loop.create_future()
        self._waiters.append(waiter)
        self._wake_waiters()  # the queue may have room already (the caller waited for something else)
        try:
            await waiter
        finally:
            if not waiter.done():
                waiter.cancel()
            try:
                self._waiters.remove(waiter)
            except ValueError:
                pass
        self._loop.call_soon(self._wake_waiters)

    def _wake_waiters(self) -> None:
        if self._waiters and (self.has_capacity or self._failure or self._closing):
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _enqueue(self, record: JournalRecord, payload: bytes, on_durable: OnDurable) -> None:
        assert self._loop is not None, "journal not started"
        assert 0 <= record.ledger_id <= INT64_MAX and -1 <= record.entry_id <= INT64_MAX
        if self._failure is not None or self._closing:
            _complete(on_durable, None, self._failure or ServiceNotReadyError("the journal is closing"))
            return
        item = _Pending(record, payload, on_durable)
        self._queued_entries += 1
        self._queued_bytes += item.size
        metrics.TOTALS.journal_queued += 1
        self._queue.put(item)

    def _group_done(self, group: list[_Pending], locations: list[EntryLocation] | None,
                    error: MiniPulsarError | None, end_mark: LogMark | None = None) -> None:
        """On the loop, once per group: complete every record, in queue order, then move
        :attr:`applied_mark` past the group and admit waiters."""
        if error is not None and self._failure is None:
            self._failure = error
        if locations is None:
            error = error or UnknownServerError("journal write failed")
        for i, item in enumerate(group):
            self._queued_entries -= 1
            self._queued_bytes -= item.size
            _complete(item.on_durable, None if locations is None else locations[i], error)
        metrics.TOTALS.journal_queued -= len(group)
        if end_mark is not None:
            self.applied_mark = end_mark
        self._wake_waiters()

    async def close(self) -> None:
        """Write and sync everything queued, complete its futures, then stop the thread."""
        if self._thread is None or self._closing:
            return
        self._closing = True
        self._queue.put(_STOP)
        assert self._stopped is not None
        await asyncio.shield(self._stopped)
        while self._waiters:
            self._wake_waiters()

    # -- the writer thread ----------------------------------------------------------------------

    def _call_on_loop(self, callback: Callable[..., None], *args: Any) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    def _run(self, started: asyncio.Future) -> None:
        try:
            self._writer = self._open_writer()
        except BaseException as exc:  # reported to start(); the thread has nothing to do
            self._call_on_loop(_set_exception, started, exc)
            self._call_on_loop(_set_result, self._stopped, None)
            return
        self._call_on_loop(_set_result, started, None)
        try:
            self._write_loop()
        finally:
            self._writer.close()
            self._call_on_loop(_set_result, self._stopped, None)

    def _write_loop(self) -> None:
        policy, q = self.settings.policy, self._queue
        group: list[_Pending] = []
        group_bytes, stopping = 0, False
        while True:
            item = self._next_item(group)
            while item is not None:  # drain whatever is queued: it joins this group (see group_full)
                if item is _STOP:
                    stopping = True
                else:
                    group.append(item)
                    group_bytes += item.size
                    if policy.group_full(len(group), group_bytes):
                        break
                item = _get_nowait(q)
            if not group:
                if stopping:
                    return
                continue
            reason = FlushReason.SHUTDOWN if stopping else policy.should_flush(
                len(group), group_bytes, time.monotonic() - group[0].enqueued_at, q.empty())
            if reason is None:
                continue
            self._commit(group, reason)
            group, group_bytes = [], 0
            if stopping:
                return

    def _next_item(self, group: list[_Pending]) -> Any:
        """Block for the first record of a group; then wait at most until the group is due."""
        if not group:
            return self._queue.get()
        wait_s = self.settings.policy.wait_s(time.monotonic() - group[0].enqueued_at)
        if wait_s <= 0:
            return _get_nowait(self._queue)
        try:
            return self._queue.get(timeout=wait_s)
        except queue.Empty:
            return None

    def _commit(self, group: list[_Pending], reason: FlushReason) -> None:
        """Write one group, sync it, and hand it back to the loop."""
        writer = self._writer
        assert writer is not None
        if self._failure is not None:
            self._call_on_loop(self._group_done, group, None, self._failure)
            return
        buffers: list[bytes] = []
        locations: list[EntryLocation] = []
        offset, journal_index, segment_id = writer.position, self.index, writer.segment_id
        for item in group:
            header, payload = encode_record(item.record, item.payload)
            buffers.append(header)
            if payload:
                buffers.append(payload)
            locations.append(EntryLocation(journal_index, segment_id, offset + RECORD_HEADER_SIZE, len(payload)))
            offset += item.size
        try:
            start = writer.append(buffers)
            assert start == locations[0].offset - RECORD_HEADER_SIZE
            if self.settings.sync_data:
                sync_started = time.monotonic()
                writer.sync()
                metrics.JOURNAL_SYNC.observe((time.monotonic() - sync_started) * 1000)
                self.stats.syncs += 1
        except OSError as exc:
            log.error("journal %s: write failed, refusing further adds: %s", self.directory, exc)
            failure = UnknownServerError(f"journal write failed: {exc}")
            self._failure = failure
            self._call_on_loop(self._group_done, group, None, failure)
            return
        self._account(group, offset - (locations[0].offset - RECORD_HEADER_SIZE), reason)
        self._call_on_loop(self._group_done, group, locations, None, LogMark(segment_id, offset))
        if writer.position >= self.settings.max_segment_bytes:
            self._roll()

    def _account(self, group: list[_Pending], group_bytes: int, reason: FlushReason) -> None:
        stats = self.stats
        stats.groups += 1
        stats.records += len(group)
        stats.bytes_written += group_bytes
        stats.flushes[reason] += 1
        if len(stats.group_sizes) >= _GROUP_SIZES_KEPT:
            del stats.group_sizes[: _GROUP_SIZES_KEPT // 2]
        stats.group_sizes.append(len(group))
        metrics.JOURNAL_NUM_FLUSH[reason.value].inc()
        metrics.JOURNAL_FORCE_WRITE_GROUPING_COUNT.observe(len(group))
        metrics.JOURNAL_WRITE_BYTES.inc(group_bytes)
        now = time.monotonic()
        observe = metrics.JOURNAL_ADD_ENTRY.observe
        for item in group:
            observe((now - item.enqueued_at) * 1000)

    def _roll(self) -> None:
        """Close the full segment (synced) and start the next one."""
        writer = self._writer
        assert writer is not None
        started = time.monotonic()
        log.info("journal %s: rolling over from segment %x at %d bytes", self.directory, writer.segment_id,
                 writer.position)
        try:
            if not self.settings.sync_data:
                writer.sync()
            writer.close()
            self._writer = self._create_segment(writer.segment_id + 1)
            self.stats.rolls += 1
            log.info("journal %s: rolled over to segment %x in %.1f ms", self.directory, self._writer.segment_id,
                     (time.monotonic() - started) * 1000)
        except OSError as exc:
            log.error("journal %s: cannot roll to a new segment, refusing further adds: %s", self.directory, exc)
            self._failure = UnknownServerError(f"journal roll failed: {exc}")

    def segment_path(self, segment_id: int) -> Path:
        return segment_path(self.directory, segment_id)


class JournalSet:
    """Every journal of the bookie; ledger ``L`` goes to journal ``L mod n`` (as in BookKeeper)."""

    def __init__(self, journals: list[Journal]) -> None:
        assert journals, "a bookie needs at least one journal"
        self.journals = journals

    @classmethod
    def from_config(cls, config: BookieConfig) -> JournalSet:
        settings = JournalSettings.from_config(config)
        return cls([Journal(Path(d) / "current", i, settings) for i, d in enumerate(config.journal_dirs)])

    def for_ledger(self, ledger_id: int) -> Journal:
        return self.journals[ledger_id % len(self.journals)]

    def segment_path(self, journal_index: int, segment_id: int) -> Path:
        return self.journals[journal_index].segment_path(segment_id)

    async def start(self) -> None:
        for journal in self.journals:
            await journal.start()

    async def close(self) -> None:
        await asyncio.gather(*(journal.close() for journal in self.journals))

    @property
    def queued_entries(self) -> int:
        return sum(j.queued_entries for j in self.journals)

    # -- the checkpoint source of the ledger storage ---------------------------------------------

    def new_checkpoint(self) -> Checkpoint:
        """On the loop: each journal's :attr:`Journal.applied_mark`."""
        return Checkpoint(tuple(journal.applied_mark for journal in self.journals))

    def checkpoint_complete(self, checkpoint: Checkpoint) -> None:
        """Blocking: ``checkpoint`` is persisted; each journal deletes its segments wholly before it."""
        for journal in self.journals:
            journal.trim(checkpoint.mark(journal.index))


def _get_nowait(q: queue.SimpleQueue) -> Any:
    try:
        return q.get_nowait()
    except queue.Empty:
        return None


def _set_result(future: asyncio.Future | None, value: Any) -> None:
    if future is not None and not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future, exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
