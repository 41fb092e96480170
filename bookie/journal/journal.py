"""The journal: a write-ahead log with group commit, one writer thread per journal directory.
This module is its loop side: admission, the hand-over to the writer thread, the capacity
waiters and the completion of each group on the loop.

The event loop admits records (:meth:`Journal.try_add`, :meth:`Journal.try_add_all` for the
adds of one read, :meth:`Journal.add_fence`): each is encoded there — header and checksum —
and appended to the loop iteration's *batch* as a ``(request, sink, started, size)`` tuple; ONE
callback per loop iteration hands the whole batch to the writer thread (one queue put, one
wake-up, one GIL hand-off per batch instead of per add). The writer thread
(:mod:`bookie.journal.writer_thread`) writes whole groups with ONE ``pwritev`` each and rolls the
segments (:mod:`bookie.journal.directory`). It then completes every record of the group with ONE
``loop.call_soon_threadsafe``: a durable add is put into the ledger storage
(:attr:`Journal.storage`, one ``add_entries`` call per run) and its sink told
(``sink.adds_done(requests, started, None)``, once per run of adds that came together) — no
future, no closure, no call per add; fences and
:meth:`Journal.add_entry` complete a future with the record's location. The journals of a
bookie form a :class:`bookie.journal.journal_set.JournalSet`; the small types are in
:mod:`bookie.journal.types` (and importable from here).

Invariants:
- a record completes only after its group was written and, with ``journalSyncData``,
  synced: an add is acknowledged only once durable; records complete in queue order;
- records of one journal reach the disk in the order they were admitted (a batch is handed
  over before any later one, and :meth:`Journal.close` hands over the last one before stopping);
- admission is bounded (``journalQueueSize`` records, ``journalMaxMemorySizeMb`` bytes, from
  admitted until durable): past the bound :meth:`Journal.try_add` returns False and callers
  await :meth:`Journal.wait_for_capacity` (FIFO) — adds are slowed down, never dropped (the
  adds of one read are admitted whole while the queue is below its bound: one run over it);
- a failed write, sync or roll fails the group and every later add: the file position is no
  longer trustworthy, so the journal stops accepting instead of guessing;
- :attr:`Journal.applied_mark` is the end of the last group whose records were all completed
  on the loop (for adds: put into the ledger storage). It is what a checkpoint captures; the
  segments wholly before a persisted checkpoint are deleted (:meth:`Journal.trim`), and a
  restart replays only from it (:meth:`Journal.replay`).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import operator
import queue
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minipulsar.bookie import metrics
from minipulsar.bookie.journal.directory import RECYCLED_SEGMENTS_KEPT, JournalFiles, trim_segments
from minipulsar.bookie.journal.format import (
    INT64_MAX,
    RECORD_HEADER_SIZE,
    EntryLocation,
    LogMark,
    RecordType,
    ScannedRecord,
    encode_add_headers,
    encode_header,
)
from minipulsar.bookie.journal.segment import SegmentScan, replay_directory, segment_path, tail_scan
from minipulsar.bookie.journal.types import (
    RECORD_SIZE,
    AddRequest,
    AddSink,
    Batch,
    EntryStore,
    JournalSettings,
    JournalStats,
    NoStore,
    OnDurable,
    PendingRecord,
    ReplayResult,
    ReplayVisitor,
    complete_on_durable,
)
from minipulsar.bookie.journal.writer_thread import JournalThread
from minipulsar.errors import MiniPulsarError, ServiceNotReadyError, UnknownServerError

__all__ = [
    "AddRequest",
    "AddSink",
    "EntryStore",
    "Journal",
    "JournalSettings",
    "JournalStats",
    "OnDurable",
    "ReplayResult",
    "ReplayVisitor",
]

log = logging.getLogger("minipulsar.bookie.journal")  # one name for the whole journal's log lines

_ADD_ENTRY = int(RecordType.ADD_ENTRY)
_PAYLOAD = operator.attrgetter("payload")
_FENCE = int(RecordType.FENCE)


class Journal:
    """One journal directory: its queue and its loop side; :meth:`start` starts its writer thread."""

    def __init__(self, directory: str | Path, index: int = 0, settings: JournalSettings | None = None) -> None:
        self.directory = Path(directory)
        self.index = index
        self.settings = settings or JournalSettings()
        self.stats = JournalStats()
        self.storage: EntryStore = NoStore()
        """Where durable adds are put before their sinks are told (the bookie's ledger storage)."""
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
        self.applied_mark: LogMark | None = None
        """End of the last group completed on the loop (see the module docstring)."""
        self.on_failed: Callable[[int, MiniPulsarError], None] | None = None
        """Told ``(index, failure)`` on the loop, once, when the writer thread stops after a
        failed write, sync or roll (the bookie then turns read-only: :mod:`bookie.state`)."""

    # -- lifecycle: replay, start, trim, close --------------------------------------------------

    def replay(self, visit: ReplayVisitor, start: LogMark | None = None) -> ReplayResult:
        """Replay every valid record from ``start`` (a checkpoint's mark; None: from the first
        segment), oldest first, and set :attr:`applied_mark` to where the replay ended.
        Blocking: run it on a worker thread, before :meth:`start`."""
        self.directory.mkdir(parents=True, exist_ok=True)
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
        self._loop = asyncio.get_running_loop()
        self._files = JournalFiles(self.directory, self.index, self.settings, self.stats)
        self._thread = JournalThread(
            self._files, self._queue, self.stats, self._add_latency, self._group_done, self._writer_failed
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

    # -- admission --------------------------------------------------------------------------------

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
        self._push((request, sink, started, RECORD_HEADER_SIZE + len(payload)), header, payload)

    def try_add_all(self, requests: list[AddRequest], sink: AddSink, started: float) -> bool:
        """:meth:`try_add` for every add of ``requests``, in order, or for none (False: the queue
        is at its bound). The adds of one read come this way: their headers are encoded in one
        go, and they complete in one ``sink.adds_done`` call. Like one add, the whole run is
        admitted while the queue is below its bound, so the bound may be exceeded by one run."""
        if self._waiters or self._queued_entries >= self._entries_max or self._queued_bytes >= self._bytes_max:
            return False
        if self._failure is not None or self._closing:
            refusal, cancel = self._refusal(), self.storage.cancel_admission
            for request in requests:
                cancel(request.ledger_id, len(request.payload))
            sink.adds_done(requests, started, refusal)
            return True
        headers, payloads, sizes = encode_add_headers(requests)
        records = self._batch_records
        if not records:
            self._batch_started = time.monotonic()
            self._loop.call_soon(self._hand_over)  # type: ignore[union-attr]
        records += zip(requests, itertools.repeat(sink), itertools.repeat(started), sizes)
        buffers: list[bytes] = [b""] * (2 * len(headers))
        buffers[0::2] = headers
        buffers[1::2] = payloads
        self._batch_buffers += buffers
        size = sum(sizes)
        self._batch_bytes += size
        self._queued_entries += len(sizes)
        self._queued_bytes += size
        return True

    def try_add_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes, on_durable: OnDurable) -> bool:
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

    def _enqueue(
        self, kind: int, ledger_id: int, entry_id: int, lac: int, payload: bytes, on_durable: OnDurable
    ) -> None:
        assert self._loop is not None, "journal not started"
        assert 0 <= ledger_id <= INT64_MAX and -1 <= entry_id <= INT64_MAX
        if self._failure is not None or self._closing:
            complete_on_durable(on_durable, None, self._refusal())
            return
        header = encode_header(kind, ledger_id, entry_id, lac, payload)
        self._push((on_durable, None, 0.0, RECORD_HEADER_SIZE + len(payload)), header, payload)

    def _refusal(self) -> MiniPulsarError:
        return self._failure or ServiceNotReadyError("the journal is closing")

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

    def _push(self, record: PendingRecord, header: bytes, payload: bytes) -> None:
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
        size = record[RECORD_SIZE]
        self._batch_bytes += size
        self._queued_entries += 1
        self._queued_bytes += size

    def _hand_over(self) -> None:
        """Give the batch to the writer thread: one queue put (and wake-up) per loop iteration."""
        records = self._batch_records
        if not records:
            return
        self._queue.put(Batch(records, self._batch_buffers, self._batch_bytes, self._batch_started))
        self._batch_records, self._batch_buffers, self._batch_bytes = [], [], 0
        metrics.TOTALS.journal_queued += len(records)

    # -- capacity waiters -----------------------------------------------------------------------

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

    # -- group completion, on the loop ------------------------------------------------------------

    def _group_done(
        self,
        group: list[Batch],
        error: MiniPulsarError | None,
        segment_id: int = 0,
        offset: int = 0,
        end_mark: LogMark | None = None,
    ) -> None:
        """On the loop, once per group (written at ``offset`` of ``segment_id``, or failed):
        complete every record, in order, then move :attr:`applied_mark` past the group and
        admit waiters."""
        if error is not None and self._failure is None:
            self._failure = error
        entries = size = payload_bytes = 0
        run: list[Any] = []
        run_sink: AddSink | None = None
        run_started = 0.0
        for batch in group:
            entries += len(batch.records)
            size += batch.size
            for request, sink, started, record_size in batch.records:
                if sink is not None:
                    if sink is run_sink and started == run_started:
                        run.append(request)
                    else:
                        if run:
                            payload_bytes += self._run_done(run_sink, run, run_started, error)  # type: ignore[arg-type]
                        run, run_sink, run_started = [request], sink, started
                else:
                    if run:  # in queue order: the adds before this record complete first
                        payload_bytes += self._run_done(run_sink, run, run_started, error)  # type: ignore[arg-type]
                        run, run_sink = [], None
                    location = (
                        None
                        if error is not None
                        else EntryLocation(
                            self.index, segment_id, offset + RECORD_HEADER_SIZE, record_size - RECORD_HEADER_SIZE
                        )
                    )
                    try:
                        complete_on_durable(request, location, error)
                    except Exception:  # a bug in one completion must not strand the rest of the group
                        log.exception("journal %s: completing a record failed", self.directory)
                offset += record_size
        if run:
            payload_bytes += self._run_done(run_sink, run, run_started, error)  # type: ignore[arg-type]
        self._group_released(entries, size, payload_bytes, end_mark)

    def _run_done(self, sink: AddSink, run: list[Any], started: float, error: MiniPulsarError | None) -> int:
        """Complete a run of adds (one sink, one arrival time): put them into the storage (or
        give their room back), then tell the sink. Returns the payload bytes stored."""
        store = self.storage
        payload_bytes = 0
        try:
            if error is None:
                # add_entries is optional (a store for tests may only have add_entry): one call per run
                add_entries = getattr(store, "add_entries", None)
                if add_entries is not None:
                    add_entries(run)
                else:
                    for request in run:
                        store.add_entry(request.ledger_id, request.entry_id, request.lac, request.payload)
                payload_bytes = sum(map(len, map(_PAYLOAD, run)))
            else:
                for request in run:
                    store.cancel_admission(request.ledger_id, len(request.payload))
        except Exception as exc:  # a bug: these adds are not acknowledged (the mark may pass them)
            log.exception("journal %s: storing %d journaled entries failed", self.directory, len(run))
            if error is None:
                error = UnknownServerError(f"the bookie could not store the entry: {exc!r}")
        try:
            sink.adds_done(run, started, error)
        except Exception:  # a bug in one completion must not strand the rest of the group
            log.exception("journal %s: completing a record failed", self.directory)
        return payload_bytes

    def _group_released(self, entries: int, size: int, payload_bytes: int, end_mark: LogMark | None) -> None:
        """The group's records left the queue: give their room back, move :attr:`applied_mark`
        past the group (if it was written) and admit the next waiter."""
        self._queued_entries -= entries
        self._queued_bytes -= size
        totals = metrics.TOTALS
        totals.journal_queued -= entries
        totals.write_bytes += payload_bytes
        if end_mark is not None:
            self.applied_mark = end_mark
        self._wake_waiters()
