"""The journal: a write-ahead log with group commit, one writer thread per journal directory.

The event loop admits records (:meth:`Journal.try_add`, :meth:`Journal.add_fence`): each is
encoded there — header and checksum — and appended to the loop iteration's *batch*; ONE
callback per loop iteration hands the whole batch to the writer thread (one queue put, one
wake-up, one GIL hand-off per batch instead of per add). The writer drains its queue, asks
:class:`GroupCommitPolicy` whether to flush, and writes the whole group with ONE
``pwritev(RWF_DSYNC)`` — write and fdatasync in one call (``journalSyncData``; else a plain
``pwritev``) — with no per-record Python work on that thread. It then
completes every record of the group with ONE ``loop.call_soon_threadsafe``: a durable add is
put into the ledger storage (:attr:`Journal.storage`) and its sink told
(``sink.adds_done(requests, started, None)``, once per run of adds that came together) — no
future, no closure, no call per add; fences and :meth:`Journal.add_entry` complete a future
with the record's location.

Invariants:
- a record completes only after its group was written and, with ``journalSyncData``,
  synced: an add is acknowledged only once durable; records complete in queue order;
- records of one journal reach the disk in the order they were admitted (a batch is handed
  over before any later one, and :meth:`close` hands over the last one before stopping);
- admission is bounded (``journalQueueSize`` records, ``journalMaxMemorySizeMb`` bytes, from
  admitted until durable): past the bound :meth:`try_add` returns False and callers await
  :meth:`wait_for_capacity` (FIFO) — adds are slowed down, never dropped;
- a failed write or sync fails the group and every later add: the file position is no
  longer trustworthy, so the journal stops accepting instead of guessing;
- segments roll at ``journalMaxSizeMB`` after a group, never inside one; the next segment is
  created (and preallocated) ahead of time on the preallocation thread once the current one
  is half full, so a roll is a file switch; segments wholly before a checkpoint are deleted
  on the journal's own trim thread;
- :attr:`Journal.applied_mark` is the end of the last group whose records were all completed
  on the loop (for adds: put into the ledger storage). It is what a checkpoint captures; the
  segments wholly before a persisted checkpoint are deleted (:meth:`Journal.trim`), and a
  restart replays only from it (:meth:`Journal.replay`).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bookie import metrics
from bookie.group_commit import FlushReason, GroupCommitPolicy
from bookie.journal_format import (
    INT64_MAX,
    RECORD_HEADER_SIZE,
    SEGMENT_VERSION,
    EntryLocation,
    JournalRecord,
    LogMark,
    RecordType,
    ScanEnd,
    ScannedRecord,
    encode_header,
)
from bookie.journal_segment import (
    Preallocator,
    SegmentScan,
    SegmentWriter,
    delete_segments_before,
    list_segments,
    replay_directory,
    scan_segment,
    segment_path,
    tail_scan,
)
from bookie.storage.checkpoint import Checkpoint
from minipulsar.config import BookieConfig
from minipulsar.errors import MiniPulsarError, ServiceNotReadyError, UnknownServerError

log = logging.getLogger(__name__)

MIB = 1024 * 1024
_ADD_ENTRY = int(RecordType.ADD_ENTRY)
_FENCE = int(RecordType.FENCE)

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
    """The last segment written to ended with a torn or corrupt record (discarded)."""
    end_mark: LogMark | None = None
    """The end of the last valid record replayed (or the start mark when nothing followed it)."""


class AddRequest(Protocol):
    """What an add carries (the ADD_ENTRY command itself satisfies it)."""

    ledger_id: int
    entry_id: int
    lac: int
    payload: bytes


class AddSink(Protocol):
    """Who is told that adds completed: on the loop, once per add, after the entry is durable
    and in the ledger storage (``error`` None), or with the error that stopped it. Adds of one
    sink admitted one after the other with the same ``started`` (one read's worth) come in
    one call, in admission order."""

    def adds_done(self, requests: list[Any], started: float, error: BaseException | None) -> None: ...


class EntryStore(Protocol):
    """Where durable adds go (the ledger storage; see :meth:`JournalSet.attach_storage`)."""

    def add_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes) -> None: ...

    def cancel_admission(self, ledger_id: int, payload_length: int) -> None: ...


class _NoStore:
    """A journal on its own (tests, tools): durable adds go nowhere."""

    def add_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes) -> None:
        pass

    def cancel_admission(self, ledger_id: int, payload_length: int) -> None:
        pass


OnDurable = Callable[[EntryLocation | None, BaseException | None], None] | asyncio.Future
"""How a record without a sink is completed: a callback ``(location, None)`` / ``(None, error)``,
or a future resolved with the location (or failed with the error)."""


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
    """One admitted record. With a ``sink``: an add, ``request`` its :class:`AddRequest`; without:
    ``request`` is the :data:`OnDurable` to complete with the record's location."""

    __slots__ = ("request", "sink", "started", "size")

    def __init__(self, request: Any, sink: AddSink | None, started: float, size: int) -> None:
        self.request = request
        self.sink = sink
        self.started = started
        """The caller's clock when the request arrived (handed back to the sink)."""
        self.size = size
        """Header + payload bytes in the segment."""


class _Batch:
    """The records admitted in one loop iteration, handed to the writer thread together."""

    __slots__ = ("records", "buffers", "size", "enqueued_at")

    def __init__(self, records: list[_Pending], buffers: list[bytes], size: int, enqueued_at: float) -> None:
        self.records = records
        self.buffers = buffers
        """Header, payload, header, payload, ...: exactly two per record, ready for ``pwritev``."""
        self.size = size
        self.enqueued_at = enqueued_at
        """When its first record was admitted (``time.monotonic``)."""


_STOP = object()
_GROUP_SIZES_KEPT = 1000


class Journal:
    """One journal directory: its segments, its queue and its writer thread."""

    def __init__(self, directory: str | Path, index: int = 0, settings: JournalSettings | None = None) -> None:
        self.directory = Path(directory)
        self.index = index
        self.settings = settings or JournalSettings()
        self.stats = JournalStats()
        self.storage: EntryStore = _NoStore()
        """Where durable adds are put before their sinks are told (the bookie's ledger storage)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._queued_entries = 0
        self._queued_bytes = 0
        self._entries_max = self.settings.queue_entries_max
        self._bytes_max = self.settings.queue_bytes_max
        self._batch_records: list[_Pending] = []
        self._batch_buffers: list[bytes] = []
        self._batch_bytes = 0
        self._batch_started = 0.0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Future[None] | None = None
        self._preallocator: Preallocator | None = None
        self._trimmer: concurrent.futures.ThreadPoolExecutor | None = None
        self._writer: SegmentWriter | None = None
        self._next_writer: concurrent.futures.Future | None = None
        """The next segment, being created ahead of time (see :meth:`_after_write`)."""
        self._replay_scans: list[SegmentScan] = []
        self._failure: MiniPulsarError | None = None
        self._closing = False
        self._add_latency = metrics.JOURNAL_ADD_ENTRY.counts(shared=False)
        """JOURNAL_ADD_ENTRY, written by this journal's thread only."""
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

        scans = self._replay_scans = replay_directory(self.directory, on_record, start)
        tail = tail_scan(scans)
        end_mark = start
        for scan in scans:
            if scan.header_ok:
                end_mark = LogMark(scan.segment_id, scan.end_offset)
        self.applied_mark = end_mark
        return ReplayResult(len(scans), sum(s.records for s in scans),
                            tail is not None and tail.end is not ScanEnd.CLEAN, end_mark)

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

    def trim_soon(self, mark: LogMark | None) -> None:
        """:meth:`trim` on the journal's own thread while it runs, else now. Unlinking a full
        2 GiB segment keeps the kernel busy ~0.5 s here: not on the ledger storage's flush
        thread, whose next flush the adds may be waiting for."""
        trimmer = self._trimmer
        if trimmer is None:
            self.trim(mark)
            return
        try:
            trimmer.submit(self._trim_logged, mark)
        except RuntimeError:  # the journal has stopped (the storage's last checkpoint): here, now
            self._trim_logged(mark)

    def _trim_logged(self, mark: LogMark | None) -> None:
        try:
            self.trim(mark)
        except OSError as exc:  # retried by the next checkpoint
            log.warning("journal %s: deleting segments before %s failed: %s", self.directory, mark, exc)

    async def start(self) -> None:
        """Open (or create) the segment to append to and start the writer thread."""
        assert self._thread is None, "journal already started"
        self._loop = asyncio.get_running_loop()
        self._stopped = self._loop.create_future()
        self._preallocator = Preallocator(f"journal-prealloc-{self.index}")
        self._trimmer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"journal-trim-{self.index}")
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
        scans = {scan.segment_id: scan for scan in self._replay_scans}
        scan = scans.get(last) or scan_segment(segment_path(self.directory, last), last, lambda _: None)
        if not scan.header_ok:
            # Created but never made durable with a header: it holds no record.
            os.unlink(segment_path(self.directory, last))
            return self._create_segment(last)
        if scan.end_offset >= settings.max_segment_bytes or scan.version != SEGMENT_VERSION:
            return self._create_segment(last + 1)  # full, or of an older format: never mix checksums
        if scan.empty and len(segment_ids) > 1:
            self._cut_torn_tail(scans.get(segment_ids[-2]))
        return SegmentWriter.reopen(self.directory, scan, settings.prealloc_bytes, self._preallocator,
                                    settings.max_segment_bytes)

    def _cut_torn_tail(self, scan: SegmentScan | None) -> None:
        """Appending resumes in an empty segment created ahead of time: cut the damaged tail
        the previous one may have (a crash mid-write), as reopening it would have, so that no
        later replay reports it as lost data."""
        if scan is None or not scan.header_ok or scan.end is ScanEnd.CLEAN:
            return
        fd = os.open(segment_path(self.directory, scan.segment_id), os.O_RDWR)
        try:
            os.ftruncate(fd, scan.end_offset)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _create_segment(self, segment_id: int) -> SegmentWriter:
        started = time.monotonic()
        settings = self.settings
        writer = SegmentWriter.create(self.directory, segment_id, settings.prealloc_bytes, self._preallocator,
                                      settings.max_segment_bytes)
        metrics.JOURNAL_CREATION_LATENCY.observe((time.monotonic() - started) * 1000)
        return writer

    def _create_next_segment(self, segment_id: int) -> SegmentWriter:
        """On the preallocation thread: the segment the next roll switches to (the part of a
        rollover that touches the disk, logged as such)."""
        started = time.monotonic()
        log.info("journal %s: rolling over ahead of time: creating segment %x", self.directory, segment_id)
        writer = self._create_segment(segment_id)
        log.info("journal %s: created segment %x ahead of time in %.1f ms", self.directory, segment_id,
                 (time.monotonic() - started) * 1000)
        return writer

    # -- the loop side ---------------------------------------------------------------------------

    @property
    def has_capacity(self) -> bool:
        return self._queued_entries < self._entries_max and self._queued_bytes < self._bytes_max

    @property
    def queued_entries(self) -> int:
        return self._queued_entries

    def try_add(self, request: AddRequest, sink: AddSink, started: float) -> bool:
        """Admit an ADD record: once it is durable, ``storage.add_entry(...)`` then
        ``sink.adds_done([..., request, ...], started, None)`` run on the loop (with the error —
        after ``storage.cancel_admission`` — if it cannot be). The hot path.

        Returns False when the queue is at its bound (or others are already waiting): await
        :meth:`wait_for_capacity`, then :meth:`admit`.
        """
        if self._waiters or self._queued_entries >= self._entries_max or self._queued_bytes >= self._bytes_max:
            return False
        self.admit(request, sink, started)
        return True

    def admit(self, request: AddRequest, sink: AddSink, started: float) -> None:
        """Admit an ADD record regardless of the bound: only right after :meth:`wait_for_capacity`
        returned, with no ``await`` in between (that return is the caller's turn)."""
        payload = request.payload
        if self._failure is not None or self._closing:
            self.storage.cancel_admission(request.ledger_id, len(payload))
            sink.adds_done([request], started, self._refusal())
            return
        header = encode_header(_ADD_ENTRY, request.ledger_id, request.entry_id, request.lac, payload)
        self._push(_Pending(request, sink, started, RECORD_HEADER_SIZE + len(payload)), header, payload)

    def try_add_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes,
                      on_durable: OnDurable) -> bool:
        """Admit an ADD record completed with its location (no storage): tests and tools. False
        when the queue is at its bound: await :meth:`wait_for_capacity`, then :meth:`admit_entry`."""
        if self._waiters or not self.has_capacity:
            return False
        self.admit_entry(ledger_id, entry_id, lac, payload, on_durable)
        return True

    def admit_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes, on_durable: OnDurable) -> None:
        """:meth:`try_add_entry` regardless of the bound (see :meth:`admit`)."""
        self._enqueue(_ADD_ENTRY, ledger_id, entry_id, lac, payload, on_durable)

    async def add_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes) -> EntryLocation:
        """Admit an ADD record, waiting for room first; returns its location once it is durable."""
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
        self._enqueue(_FENCE, ledger_id, -1, -1, b"", future)
        return future

    def _enqueue(self, kind: int, ledger_id: int, entry_id: int, lac: int, payload: bytes,
                 on_durable: OnDurable) -> None:
        assert self._loop is not None, "journal not started"
        assert 0 <= ledger_id <= INT64_MAX and -1 <= entry_id <= INT64_MAX
        if self._failure is not None or self._closing:
            _complete(on_durable, None, self._refusal())
            return
        header = encode_header(kind, ledger_id, entry_id, lac, payload)
        self._push(_Pending(on_durable, None, 0.0, RECORD_HEADER_SIZE + len(payload)), header, payload)

    def _refusal(self) -> MiniPulsarError:
        return self._failure or ServiceNotReadyError("the journal is closing")

    def _push(self, record: _Pending, header: bytes, payload: bytes) -> None:
        """Add an encoded record to this loop iteration's batch (the first one schedules the
        hand-over)."""
        records = self._batch_records
        if not records:
            self._batch_started = time.monotonic()
            self._loop.call_soon(self._hand_over)  # type: ignore[union-attr]
        records.append(record)
        buffers = self._batch_buffers
        buffers.append(header)
        buffers.append(payload)
        size = record.size
        self._batch_bytes += size
        self._queued_entries += 1
        self._queued_bytes += size

    def _hand_over(self) -> None:
        """Give the batch to the writer thread: one queue put (and wake-up) per loop iteration."""
        records = self._batch_records
        if not records:
            return
        self._queue.put(_Batch(records, self._batch_buffers, self._batch_bytes, self._batch_started))
        self._batch_records, self._batch_buffers, self._batch_bytes = [], [], 0
        metrics.TOTALS.journal_queued += len(records)

    async def wait_for_capacity(self) -> None:
        """Return once the queue has room and every earlier waiter has been served.

        The caller must then queue its record at once (:meth:`admit`); the next waiter
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

    def _group_done(self, group: list[_Batch], error: MiniPulsarError | None, segment_id: int = 0,
                    offset: int = 0, end_mark: LogMark | None = None) -> None:
        """On the loop, once per group (written at ``offset`` of ``segment_id``, or failed):
        complete every record, in order, then move :attr:`applied_mark` past the group and
        admit waiters."""
        if error is not None and self._failure is None:
            self._failure = error
        store = self.storage
        put, cancel = store.add_entry, store.cancel_admission
        entries = size = payload_bytes = 0
        run: list[Any] = []
        run_sink: AddSink | None = None
        run_started = 0.0
        for batch in group:
            entries += len(batch.records)
            size += batch.size
            for record in batch.records:
                sink = record.sink
                try:
                    if sink is None:
                        location = None if error is not None else EntryLocation(
                            self.index, segment_id, offset + RECORD_HEADER_SIZE, record.size - RECORD_HEADER_SIZE)
                        _complete(record.request, location, error)
                    else:
                        request = record.request
                        if error is None:
                            put(request.ledger_id, request.entry_id, request.lac, request.payload)
                            payload_bytes += record.size - RECORD_HEADER_SIZE
                        else:
                            cancel(request.ledger_id, len(request.payload))
                        if sink is run_sink and record.started == run_started:
                            run.append(request)
                        else:
                            if run:
                                run_sink.adds_done(run, run_started, error)  # type: ignore[union-attr]
                            run, run_sink, run_started = [request], sink, record.started
                except Exception:  # a bug in one completion must not strand the rest of the group
                    log.exception("journal %s: completing a record failed", self.directory)
                offset += record.size
        if run:
            try:
                run_sink.adds_done(run, run_started, error)  # type: ignore[union-attr]
            except Exception:
                log.exception("journal %s: completing a record failed", self.directory)
        self._queued_entries -= entries
        self._queued_bytes -= size
        totals = metrics.TOTALS
        totals.journal_queued -= entries
        totals.write_bytes += payload_bytes
        if end_mark is not None:
            self.applied_mark = end_mark
        self._wake_waiters()

    async def close(self) -> None:
        """Write and sync everything admitted, complete it, then stop the threads."""
        if self._thread is None or self._closing:
            return
        self._hand_over()
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
            self._close_files()
            self._call_on_loop(_set_exception, started, exc)
            self._call_on_loop(_set_result, self._stopped, None)
            return
        self._call_on_loop(_set_result, started, None)
        try:
            self._write_loop()
        finally:
            self._close_files()
            self._call_on_loop(_set_result, self._stopped, None)

    def _close_files(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._preallocator is not None:
            self._preallocator.close()
        if self._trimmer is not None:
            self._trimmer.shutdown(wait=True)
        next_writer, self._next_writer = self._next_writer, None
        if next_writer is not None and not next_writer.cancelled() and next_writer.exception() is None:
            next_writer.result().close()  # a valid empty segment: the next start appends to it

    def _write_loop(self) -> None:
        policy, q = self.settings.policy, self._queue
        group: list[_Batch] = []
        entries = group_bytes = 0
        stopping = False
        carry: _Batch | None = None
        """The rest of a batch split at a group boundary (journalAdaptiveGroupWrites=false)."""
        while True:
            if carry is not None:
                item, carry = carry, None
            else:
                item = self._next_item(group)
            while item is not None:  # drain whatever is queued: it joins this group (see group_full)
                if item is _STOP:
                    stopping = True
                else:
                    if not policy.adaptive_group_writes:
                        item, carry = _split(item, policy, entries, group_bytes)
                    group.append(item)
                    entries += len(item.records)
                    group_bytes += item.size
                    if carry is not None or policy.group_full(entries, group_bytes):
                        break
                item = _get_nowait(q)
            if not group:
                if stopping:
                    return
                continue
            reason = FlushReason.SHUTDOWN if stopping else policy.should_flush(
                entries, group_bytes, time.monotonic() - group[0].enqueued_at, carry is None and q.empty())
            if reason is None:
                continue
            self._commit(group, entries, group_bytes, reason)
            group, entries, group_bytes = [], 0, 0
            if stopping and carry is None:
                return

    def _next_item(self, group: list[_Batch]) -> Any:
        """Block for the first batch of a group; then wait at most until the group is due."""
        if not group:
            return self._queue.get()
        wait_s = self.settings.policy.wait_s(time.monotonic() - group[0].enqueued_at)
        if wait_s <= 0:
            return _get_nowait(self._queue)
        try:
            return self._queue.get(timeout=wait_s)
        except queue.Empty:
            return None

    def _commit(self, group: list[_Batch], entries: int, group_bytes: int, reason: FlushReason) -> None:
        """Write one group, sync it, and hand it back to the loop."""
        writer = self._writer
        assert writer is not None
        if self._failure is not None:
            self._call_on_loop(self._group_done, group, self._failure)
            return
        if len(group) == 1:
            buffers = group[0].buffers
        else:
            buffers = []
            for batch in group:
                buffers += batch.buffers
        try:
            if self.settings.sync_data:
                sync_started = time.monotonic()
                start = writer.append_synced(buffers, group_bytes)
                metrics.JOURNAL_SYNC.observe((time.monotonic() - sync_started) * 1000)
                self.stats.syncs += 1
            else:
                start = writer.append(buffers, group_bytes)
        except Exception as exc:  # OSError, or a bug: either way the position is unknown
            log.error("journal %s: write failed, refusing further adds: %r", self.directory, exc)
            failure = UnknownServerError(f"journal write failed: {exc}")
            self._failure = failure
            self._call_on_loop(self._group_done, group, failure)
            return
        end_mark = LogMark(writer.segment_id, start + group_bytes)
        self._account(group, entries, group_bytes, reason)
        self._call_on_loop(self._group_done, group, None, writer.segment_id, start, end_mark)
        self._after_write()

    def _account(self, group: list[_Batch], entries: int, group_bytes: int, reason: FlushReason) -> None:
        """Per group, never per record: the latency of each batch counts for all its records."""
        stats = self.stats
        stats.groups += 1
        stats.records += entries
        stats.bytes_written += group_bytes
        stats.flushes[reason] += 1
        if len(stats.group_sizes) >= _GROUP_SIZES_KEPT:
            del stats.group_sizes[: _GROUP_SIZES_KEPT // 2]
        stats.group_sizes.append(entries)
        metrics.JOURNAL_NUM_FLUSH[reason.value].inc()
        metrics.JOURNAL_FORCE_WRITE_GROUPING_COUNT.observe(entries)
        metrics.JOURNAL_WRITE_BYTES.inc(group_bytes)
        now, record = time.monotonic(), self._add_latency.record
        for batch in group:
            record(now - batch.enqueued_at, len(batch.records))

    def _after_write(self) -> None:
        """Create the next segment ahead of time once this one is half full; roll when full."""
        writer = self._writer
        assert writer is not None
        limit = self.settings.max_segment_bytes
        if self._next_writer is None and writer.position >= limit // 2 and self._preallocator is not None:
            self._next_writer = self._preallocator.submit(self._create_next_segment, writer.segment_id + 1)
        if writer.position >= limit:
            self._roll()

    def _roll(self) -> None:
        """Close the full segment (synced) and switch to the next one."""
        writer = self._writer
        assert writer is not None
        started = time.monotonic()
        log.info("journal %s: rolling over from segment %x at %d bytes", self.directory, writer.segment_id,
                 writer.position)
        try:
            if not self.settings.sync_data:
                writer.sync()
            writer.close()
            self._writer = self._take_next_segment(writer.segment_id + 1)
            self.stats.rolls += 1
            log.info("journal %s: rolled over to segment %x in %.1f ms", self.directory, self._writer.segment_id,
                     (time.monotonic() - started) * 1000)
        except OSError as exc:
            log.error("journal %s: cannot roll to a new segment, refusing further adds: %s", self.directory, exc)
            self._failure = UnknownServerError(f"journal roll failed: {exc}")

    def _take_next_segment(self, segment_id: int) -> SegmentWriter:
        """The segment created ahead of time (waiting for it if need be), else a new one now."""
        next_writer, self._next_writer = self._next_writer, None
        if next_writer is not None:
            try:
                return next_writer.result()
            except OSError as exc:
                log.warning("journal %s: creating segment %x ahead of time failed (%s); retrying", self.directory,
                            segment_id, exc)
                segment_path(self.directory, segment_id).unlink(missing_ok=True)
        return self._create_segment(segment_id)

    def segment_path(self, segment_id: int) -> Path:
        return segment_path(self.directory, segment_id)


def _split(batch: _Batch, policy: GroupCommitPolicy, entries: int, group_bytes: int) -> tuple[_Batch, _Batch | None]:
    """Without adaptive group writes: the head of ``batch`` that fits the group (it closes on
    the record reaching a threshold, as if records came one by one) and the rest, if any."""
    taken = size = 0
    for record in batch.records:
        taken += 1
        size += record.size
        if policy.group_full(entries + taken, group_bytes + size):
            break
    if taken == len(batch.records):
        return batch, None
    records, buffers = batch.records, batch.buffers
    return (_Batch(records[:taken], buffers[: 2 * taken], size, batch.enqueued_at),
            _Batch(records[taken:], buffers[2 * taken:], batch.size - size, batch.enqueued_at))


class JournalSet:
    """Every journal of the bookie; ledger ``L`` goes to journal ``L mod n`` (as in BookKeeper)."""

    def __init__(self, journals: list[Journal]) -> None:
        assert journals, "a bookie needs at least one journal"
        self.journals = journals

    @classmethod
    def from_config(cls, config: BookieConfig) -> JournalSet:
        settings = JournalSettings.from_config(config)
        return cls([Journal(Path(d) / "current", i, settings) for i, d in enumerate(config.journal_dirs)])

    def attach_storage(self, storage: EntryStore) -> None:
        """Where every journal puts its durable adds (before telling their sinks)."""
        for journal in self.journals:
            journal.storage = storage

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
        """``checkpoint`` is persisted: each journal deletes its segments wholly before it (on
        its own thread once started, see :meth:`Journal.trim_soon`)."""
        for journal in self.journals:
            journal.trim_soon(checkpoint.mark(journal.index))


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
