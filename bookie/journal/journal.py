"""The loop side of one journal: admission, the hand-over to the writer thread, the waiters
for room, and the completion of each group (the whole journal: :mod:`bookie.journal`).

Invariants:
- a record is encoded (header and checksum) when it is admitted and joins the loop
  iteration's batch; ONE callback per loop iteration hands the batch to the writer thread,
  so batches reach it in admission order (:meth:`Journal.close` hands over the last one
  before stopping the thread);
- :attr:`Journal.queued_entries` and the queued bytes count records from admission until
  their group was completed; :attr:`Journal.has_room` is False from the bound on, and while
  anyone waits in :meth:`Journal.wait_for_room` (first come, first served);
- a group is completed on the loop in queue order: each run of adds goes into the storage
  (one ``add_entries``), then its sink hears of it; only then do the queue counts drop,
  :attr:`Journal.applied_mark` move past the group, and the next waiter for room wake;
- once a group failed (or the writer thread stopped), every later admission is refused at
  once, through its sink, with that failure.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import operator
import queue
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from minipulsar.bookie import metrics
from minipulsar.bookie.journal.batch import RECORD_SIZE, Batch, PendingRecord
from minipulsar.bookie.journal.directory import (
    RECYCLED_SEGMENTS_KEPT,
    JournalFiles,
    replay_directory,
    tail_scan,
    trim_segments,
)
from minipulsar.bookie.journal.format import (
    RECORD_HEADER_SIZE,
    EntryLocation,
    JournalRecord,
    LogMark,
    RecordType,
    ScannedRecord,
    encode_header,
    encode_headers,
)
from minipulsar.bookie.journal.segment import SegmentScan, segment_path
from minipulsar.bookie.journal.settings import JournalSettings
from minipulsar.bookie.journal.stats import JournalStats
from minipulsar.bookie.journal.writer_thread import JournalThread
from minipulsar.durable_file import make_dirs
from minipulsar.errors import MiniPulsarError, ServiceNotReadyError, UnknownServerError
from minipulsar.supervision import failure_of, guarded

log = logging.getLogger("minipulsar.bookie.journal")  # one name for the whole journal's log lines

_ADD_ENTRY = RecordType.ADD_ENTRY
_PAYLOAD = operator.attrgetter("payload")


class JournalRequest(Protocol):
    """What a record is made of: the ADD_ENTRY command satisfies it, a fence is a :class:`Fence`."""

    @property
    def ledger_id(self) -> int: ...
    @property
    def entry_id(self) -> int: ...
    @property
    def lac(self) -> int: ...
    @property
    def payload(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Fence:
    """The request of a FENCE record: the ledger was fenced (later non-recovery adds are refused)."""

    ledger_id: int
    entry_id: int = -1
    lac: int = -1
    payload: bytes = b""


@dataclass(frozen=True, slots=True)
class LedgerKey:
    """The request of a LEDGER_KEY record: the ledger's master key is ``payload``."""

    ledger_id: int
    payload: bytes
    entry_id: int = -1
    lac: int = -1


class JournalSink(Protocol):
    """Who hears that admitted records completed, on the loop, once per record: after it is
    durable (and, for an add, in the ledger storage), ``error`` None; or with the error that
    stopped it. The records of one sink admitted one after the other with the same
    ``started`` (the adds of one read) come in one call, in admission order."""

    def requests_done(self, requests: list[Any], started: float, error: BaseException | None) -> None: ...


class EntryStore(Protocol):
    """Where durable adds go before their sinks hear of them (the bookie's ledger storage)."""

    def add_entries(self, requests: Sequence[Any]) -> None:
        """Store a run of durable adds (:class:`JournalRequest`), in order."""

    def cancel_admission(self, ledger_id: int, payload_length: int) -> None:
        """Give back the room reserved for an add that will not be stored."""


ReplayVisitor = Callable[[JournalRecord, EntryLocation, bytes], None]
"""Called once per valid record during replay: the record, where its payload is, the payload."""


@dataclass(slots=True)
class ReplayResult:
    segments: int = 0
    records: int = 0
    lost_tail: bool = False
    """The last segment written to ended with a torn or corrupt record (discarded)."""
    end_mark: LogMark | None = None
    """The end of the last valid record replayed (or the start mark when nothing followed it)."""


class Journal:
    """One journal directory: its queue and its loop side; :meth:`start` starts its writer thread."""

    def __init__(self, directory: str | Path, index: int = 0, settings: JournalSettings | None = None) -> None:
        self.directory = Path(directory)
        self.index = index
        self.settings = settings or JournalSettings()
        self.stats = JournalStats()
        self._storage: EntryStore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._queued_entries = 0
        self._queued_bytes = 0
        self._entries_max = self.settings.queue_entries_max
        self._bytes_max = self.settings.queue_bytes_max
        self._batch_records: list[PendingRecord] = []
        self._batch_buffers: list[bytes] = []
        self._batch_bytes = 0
        self._batch_started = 0.0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._thread: JournalThread | None = None
        self._files: JournalFiles | None = None
        self._replay_scans: list[SegmentScan] = []
        self._failure: MiniPulsarError | None = None
        """Set on the loop by a failed group, or at once by the writer thread (see :meth:`_writer_failed`)."""
        self._closing = False
        self._add_latency = metrics.JOURNAL_ADD_ENTRY.counts(shared=False)
        """JOURNAL_ADD_ENTRY, written by this journal's thread only."""
        self._queue_latency = metrics.JOURNAL_QUEUE_LATENCY.counts("true", shared=False)
        """JOURNAL_QUEUE_LATENCY, likewise."""
        self.applied_mark: LogMark | None = None
        """End of the last group completed on the loop (see the module docstring)."""
        self._completing = f"journal {self.directory}: completing journaled records"
        self._storing = f"journal {self.directory}: storing journaled entries"
        """What :func:`guarded` and :func:`failure_of` log, made once."""
        self.on_failed: Callable[[int, MiniPulsarError], None] | None = None
        """Told ``(index, failure)`` on the loop, once, when the writer thread stops after a
        failed write, sync or roll (the bookie then leaves the cluster: :mod:`bookie.bookie_server`)."""

    def attach_storage(self, storage: EntryStore) -> None:
        """Where durable adds go before their sinks hear of them; before :meth:`start`."""
        self._storage = storage

    # -- lifecycle: replay, start, trim, close --------------------------------------------------

    def replay(self, visit: ReplayVisitor, start: LogMark | None = None) -> ReplayResult:
        """Replay every valid record from ``start`` (a checkpoint's mark; None: from the first
        segment), oldest first, and set :attr:`applied_mark` to where the replay ended.
        Blocking: run it on a worker thread, before :meth:`start`."""
        make_dirs(self.directory)
        index = self.index

        def on_record(segment_id: int, item: ScannedRecord) -> None:
            visit(item.record, EntryLocation(index, segment_id, item.payload_offset, len(item.payload)), item.payload)

        scans = self._replay_scans = replay_directory(self.directory, on_record, start)
        tail = tail_scan(scans)
        end_mark = start
        for scan in scans:
            if scan.header_ok:
                end_mark = LogMark(scan.segment_id, scan.end_offset)
        self.applied_mark = end_mark
        return ReplayResult(
            len(scans), sum(s.records for s in scans), tail is not None and not tail.end.clean, end_mark
        )

    async def start(self) -> None:
        """Open (or create) the segment to append to and start the writer thread."""
        assert self._thread is None, "journal already started"
        assert self._storage is not None, "attach_storage() first"
        self._loop = asyncio.get_running_loop()
        self._files = JournalFiles(self.directory, self.index, self.settings, self.stats)
        self._thread = JournalThread(
            self._files,
            self._queue,
            self.stats,
            self._add_latency,
            self._group_done,
            self._writer_failed,
            self._queue_latency,
        )
        await self._thread.start(self.applied_mark, self._replay_scans)

    def trim(self, mark: LogMark | None) -> list[int]:
        """Delete the segments wholly before ``mark`` (a persisted checkpoint's); blocking.

        Safe beside the writer thread: it only ever appends to the newest segment, which is
        at or after any mark."""
        return trim_segments(self.directory, mark, RECYCLED_SEGMENTS_KEPT if self.settings.reuse_files else 0)

    def trim_soon(self, mark: LogMark | None) -> None:
        """:meth:`trim` on the journal's own trim thread once started (see
        :meth:`JournalFiles.trim_soon`), else now."""
        files = self._files
        if files is None:  # at start (the replay's checkpoint): a failure must not stop the bookie
            try:
                self.trim(mark)
            except OSError as exc:  # retried by the next checkpoint
                log.warning("journal %s: deleting segments before %s failed: %s", self.directory, mark, exc)
            return
        files.trim_soon(mark)

    async def close(self) -> None:
        """Write and sync everything admitted, complete it, then stop the threads."""
        if self._thread is None or self._closing:
            return
        self._hand_over()
        self._closing = True
        await self._thread.stop()
        while self._waiters:
            self._wake_waiters()

    def segment_path(self, segment_id: int) -> Path:
        return segment_path(self.directory, segment_id)

    # -- admission: the one way in ----------------------------------------------------------------

    @property
    def has_room(self) -> bool:
        """Whether an add may be admitted now: the queue is below its bound (journalQueueSize
        records, journalMaxMemorySizeMb bytes) and nobody waits for room before it."""
        return not self._waiters and self._queued_entries < self._entries_max and self._queued_bytes < self._bytes_max

    @property
    def queued_entries(self) -> int:
        return self._queued_entries

    def add(
        self,
        requests: Sequence[JournalRequest],
        sink: JournalSink,
        started: float,
        record_type: RecordType = _ADD_ENTRY,
    ) -> None:
        """Admit ``requests`` as records of ``record_type``, in order: the hot path, with no
        future, closure or call per add.

        Once their group is durable, on the loop, adds go into the storage
        (``add_entries``), then ``sink.requests_done(requests, started, None)`` runs (see
        :class:`JournalSink`). Refused — the journal failed or is closing — the adds' room
        goes back to the storage (``cancel_admission``) and the sink hears the error at once.

        The bound is the caller's to keep: admit adds while :attr:`has_room`, or right after
        :meth:`wait_for_room` returned (no ``await`` in between: that return is the caller's
        turn). A run admitted while there is room may pass the bound. A FENCE never waits:
        fencing is rare and tiny, and ledger recovery must not wait behind adds.
        """
        if self._failure is not None or self._closing:
            self._refuse(requests, sink, started, record_type)
            return
        if len(requests) == 1:  # a lone add (big entries come one per read): one header, no lists
            request = requests[0]
            payload = request.payload
            header = encode_header(record_type, request.ledger_id, request.entry_id, request.lac, payload)
            self._push((request, sink, started, RECORD_HEADER_SIZE + len(payload), record_type), header, payload)
        else:
            self._push_all(requests, sink, started, record_type)

    def _refuse(
        self, requests: Sequence[JournalRequest], sink: JournalSink, started: float, record_type: RecordType
    ) -> None:
        if record_type is _ADD_ENTRY:
            assert self._storage is not None
            cancel = self._storage.cancel_admission
            for request in requests:
                cancel(request.ledger_id, len(request.payload))
        sink.requests_done(list(requests), started, self._failure or ServiceNotReadyError("the journal is closing"))

    def _writer_failed(self, failure: MiniPulsarError) -> None:
        """On the writer thread: refuse admissions from now on, before the failed group's
        completion reaches the loop (one attribute store: atomic under the GIL); then tell
        :attr:`on_failed`, on the loop."""
        self._failure = failure
        if self.on_failed is not None and self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self.on_failed, self.index, failure)
            except RuntimeError:  # the loop is closed: the bookie is gone anyway
                pass

    # -- the hand-over to the writer thread ---------------------------------------------------------

    def _batch_for_this_iteration(self) -> list[PendingRecord]:
        """This loop iteration's records; the first one admitted schedules the hand-over."""
        records = self._batch_records
        if not records:
            assert self._loop is not None, "journal not started"
            self._batch_started = time.monotonic()
            self._loop.call_soon(self._hand_over)
        return records

    def _push(self, record: PendingRecord, header: bytes, payload: bytes) -> None:
        self._batch_for_this_iteration().append(record)
        buffers = self._batch_buffers
        buffers.append(header)
        buffers.append(payload)
        size = record[RECORD_SIZE]
        self._batch_bytes += size
        self._queued_entries += 1
        self._queued_bytes += size

    def _push_all(
        self, requests: Sequence[JournalRequest], sink: JournalSink, started: float, record_type: RecordType
    ) -> None:
        """:meth:`_push` for many records: their headers encoded in one go, in C."""
        headers, payloads, sizes = encode_headers(int(record_type), requests)
        repeat = itertools.repeat
        self._batch_for_this_iteration().extend(
            zip(requests, repeat(sink), repeat(started), sizes, repeat(record_type))
        )
        buffers: list[bytes] = [b""] * (2 * len(headers))
        buffers[0::2] = headers
        buffers[1::2] = payloads
        self._batch_buffers += buffers
        size = sum(sizes)
        self._batch_bytes += size
        self._queued_entries += len(sizes)
        self._queued_bytes += size

    def _hand_over(self) -> None:
        """Give the batch to the writer thread: one queue put (and wake-up) per loop iteration."""
        records = self._batch_records
        if not records:
            return
        self._queue.put(Batch(records, self._batch_buffers, self._batch_bytes, self._batch_started))
        self._batch_records, self._batch_buffers, self._batch_bytes = [], [], 0
        metrics.TOTALS.journal_queued += len(records)

    # -- waiting for room -----------------------------------------------------------------------

    async def wait_for_room(self) -> None:
        """Return once the queue has room and every earlier waiter has been served (at once
        when the journal failed or is closing: :meth:`add` then refuses).

        The caller must then :meth:`add` at once; the next waiter is woken after that, in a
        later callback.
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
        below_bound = self._queued_entries < self._entries_max and self._queued_bytes < self._bytes_max
        if self._waiters and (below_bound or self._failure or self._closing):
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    # -- group completion, on the loop ------------------------------------------------------------

    def _group_done(self, group: list[Batch], error: MiniPulsarError | None, end_mark: LogMark | None) -> None:
        """On the loop, once per group (written and ending at ``end_mark``, or failed with
        ``error``): complete every record, in order, a run at a time; then move
        :attr:`applied_mark` past the group and wake a waiter."""
        if error is not None and self._failure is None:
            self._failure = error
        entries = size = payload_bytes = 0
        run: list[Any] = []
        run_sink: JournalSink | None = None
        run_started = 0.0
        run_type: RecordType | None = None
        for batch in group:
            entries += len(batch.records)
            size += batch.size
            for request, sink, started, _size, record_type in batch.records:
                if sink is run_sink and started == run_started and record_type is run_type:
                    run.append(request)
                    continue
                if run_sink is not None:
                    payload_bytes += self._run_done(run, run_sink, run_started, run_type, error)
                run, run_sink, run_started, run_type = [request], sink, started, record_type
        if run_sink is not None:
            payload_bytes += self._run_done(run, run_sink, run_started, run_type, error)
        self._group_released(entries, size, payload_bytes, end_mark)

    def _run_done(
        self,
        run: list[Any],
        sink: JournalSink,
        started: float,
        record_type: RecordType | None,
        error: MiniPulsarError | None,
    ) -> int:
        """Complete a run of one sink's records: adds go into the storage (or give their room
        back), then the sink hears of them. Returns the payload bytes stored."""
        payload_bytes = 0
        if record_type is _ADD_ENTRY:
            error, payload_bytes = self._store(run, error)
        # One sink among the group's: a bug in it must not strand the rest of the group.
        guarded(log, self._completing, sink.requests_done, run, started, error)
        return payload_bytes

    def _store(self, run: list[Any], error: MiniPulsarError | None) -> tuple[MiniPulsarError | None, int]:
        """Put a run of durable adds into the storage, or give back their room if they failed.
        Returns the error their sink hears, and the payload bytes stored."""
        storage = self._storage
        assert storage is not None
        if error is not None:
            for request in run:
                storage.cancel_admission(request.ledger_id, len(request.payload))
            return error, 0
        failure = failure_of(log, self._storing, storage.add_entries, run)
        if failure is not None:  # a bug: these adds are not acknowledged (the mark may pass them)
            return UnknownServerError(f"the bookie could not store the entry: {failure!r}"), 0
        return None, sum(map(len, map(_PAYLOAD, run)))

    def _group_released(self, entries: int, size: int, payload_bytes: int, end_mark: LogMark | None) -> None:
        """The group's records left the queue: give their room back, move :attr:`applied_mark`
        past the group (if it was written) and wake the next waiter."""
        self._queued_entries -= entries
        self._queued_bytes -= size
        totals = metrics.TOTALS
        totals.journal_queued -= entries
        totals.write_bytes += payload_bytes
        if end_mark is not None:
            self.applied_mark = end_mark
        self._wake_waiters()
