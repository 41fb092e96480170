"""The writer thread of one journal: batches from the loop become groups, each written with
ONE ``pwritev`` and handed back to the loop with ONE ``call_soon_threadsafe``.

The thread drains its queue, asks :class:`GroupCommitPolicy` whether to flush, and writes the
whole group with ``pwritev(RWF_DSYNC)`` — write and fdatasync in one call
(``journalSyncData``; else a plain ``pwritev``) — with no per-record Python work: the records
were encoded on the loop, and the group's latency is counted per batch. After each group it
lets :class:`JournalFiles` create the next segment ahead of time or roll.

Metrics, per batch for each of its records: ``JOURNAL_QUEUE_LATENCY`` (admitted on the loop →
taken off the queue here) and ``JOURNAL_ADD_ENTRY`` (admitted → written and synced). Writing
and syncing in one call leaves no force-write queue between them, so BookKeeper's
``JOURNAL_FORCE_WRITE_QUEUE_SIZE`` has nothing to count here and is not exported.

Invariants:
- groups are written in queue order, each whole, and a group is handed back only after its
  write (and, with ``journalSyncData``, its sync) returned;
- a failed write, sync or roll fails its group and every later one, and tells the loop at once
  (``on_failure``): the file position is no longer trustworthy, so the journal stops accepting
  instead of guessing;
- :data:`STOP` is the last item the loop queues; everything before it is written (the last
  group flushed with :attr:`FlushReason.SHUTDOWN`) before the thread closes its files.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from minipulsar import diagnostics
from minipulsar.bookie import disk_model, metrics
from minipulsar.bookie.journal.batch import RECORD_SIZE, Batch
from minipulsar.bookie.journal.directory import JournalFiles
from minipulsar.bookie.journal.format import RECORD_HEADER_SIZE, LogMark, encode_group_header
from minipulsar.bookie.journal.group_commit import FlushReason, GroupCommitPolicy
from minipulsar.bookie.journal.segment import SegmentScan
from minipulsar.bookie.journal.stats import JournalStats
from minipulsar.bookie.metrics import LatencyCounts
from minipulsar.errors import MiniPulsarError, UnknownServerError
from minipulsar.supervision import failure_of, guarded, outcome_of

SLOW_SYNC_MS = 5.0
"""A group write + sync this slow is a ``journal_slow_sync`` stall event (minipulsar/diagnostics.py)."""
log = logging.getLogger("minipulsar.bookie.journal")  # one name for the whole journal's log lines

STOP = object()
"""Queued by the loop after its last batch: write what came before, then stop."""

GroupDone = Callable[[list[Batch], MiniPulsarError | None, LogMark | None], None]
"""The loop's completion of a group: ``(group, None, end mark)`` once it is written (and
synced), ``(group, failure, None)`` if it failed; run on the loop."""


class JournalThread:
    """The thread that writes one journal's groups; created and started on the loop.

    The group being assembled lives in the thread's attributes, so that a failed round (a bug:
    :meth:`_round` runs through :func:`~minipulsar.supervision.failure_of`) still knows every
    batch it must answer."""

    def __init__(
        self,
        files: JournalFiles,
        q: queue.SimpleQueue[Any],
        stats: JournalStats,
        add_latency: LatencyCounts,
        group_done: GroupDone,
        on_failure: Callable[[MiniPulsarError], None],
        queue_latency: LatencyCounts,
    ) -> None:
        """Args:
        files: the segments to append to (opened on this thread).
        q: where the loop hands over batches (then :data:`STOP`).
        add_latency: JOURNAL_ADD_ENTRY counts written by this thread only.
        queue_latency: JOURNAL_QUEUE_LATENCY counts written by this thread only.
        group_done: run on the loop once per group, written or failed.
        on_failure: called on this thread with the failure that stops the journal.
        """
        self.files = files
        self.directory = files.directory
        self.settings = files.settings
        self.stats = stats
        self._queue = q
        self._add_latency = add_latency
        self._queue_latency = queue_latency
        self._group_done = group_done
        self._on_failure = on_failure
        self._failure: MiniPulsarError | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Future[None] | None = None
        self._group: list[Batch] = []
        """The batches of the group being assembled (records: ``_entries``, bytes: ``_group_bytes``)."""
        self._entries = 0
        self._group_bytes = 0
        self._in_hand: Batch | None = None
        """A batch taken off the queue and not yet in the group (being split)."""
        self._carry: Batch | None = None
        """The rest of a batch split at a group boundary (journalAdaptiveGroupWrites=false)."""
        self._stopping = False
        """:data:`STOP` was taken off the queue: nothing follows what is in hand."""

    async def start(self, applied_mark: LogMark | None, replay_scans: list[SegmentScan]) -> None:
        """Start the thread; return once it has opened the segment to append to.

        Raises:
            OSError: the segment could not be opened (the thread has stopped).
        """
        self._loop = asyncio.get_running_loop()
        self._stopped = self._loop.create_future()
        started: asyncio.Future[None] = self._loop.create_future()
        name = f"journal-{self.files.index}"
        thread = threading.Thread(
            target=guarded,
            args=(log, f"journal {self.directory}: thread {name}", self._run, started, applied_mark, replay_scans),
            daemon=True,
            name=name,
        )
        thread.start()
        await started

    async def stop(self) -> None:
        """Queue :data:`STOP` (after the loop's last batch) and wait until the thread is done."""
        self._queue.put(STOP)
        assert self._stopped is not None
        await asyncio.shield(self._stopped)

    def _call_on_loop(self, callback: Callable[..., None], *args: Any) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    def _run(
        self, started: asyncio.Future[None], applied_mark: LogMark | None, replay_scans: list[SegmentScan]
    ) -> None:
        """The thread's body: open the segment to append to (start() hears how that went),
        write groups until :data:`STOP`, close the files; ``stop()`` returns after that."""
        try:
            _, error = outcome_of(functools.partial(self.files.open, applied_mark, replay_scans))
            if error is not None:  # start() raises it
                self._call_on_loop(_set_exception, started, error)
                return
            self._call_on_loop(_set_result, started, None)
            self._write_loop()
        finally:
            try:
                self._close_files()
            finally:  # even after a bug: close() must not wait forever
                self._call_on_loop(_set_result, self._stopped, None)

    def _close_files(self) -> None:
        try:
            self.files.close()
        except OSError as exc:  # closed as far as they could be (a failing disk): stop anyway
            log.error("journal %s: closing the segments failed: %r", self.directory, exc)

    # -- group assembly -------------------------------------------------------------------------

    def _write_loop(self) -> None:
        """Assemble and write groups until :data:`STOP`. A round that fails (a bug) fails the
        journal, but never strands a record: see :meth:`_broken`."""
        what = f"journal {self.directory}: the writer thread"
        while not (self._stopping and not self._group and self._carry is None):
            error = failure_of(log, what, self._round)
            if error is not None:
                self._broken(error)

    def _round(self) -> None:
        """Take what is queued into the group; write it once the policy says it is due."""
        self._take_batches()
        group = self._group
        if not group:
            return
        if self._stopping:
            reason: FlushReason | None = FlushReason.SHUTDOWN
        else:
            waited_s = time.monotonic() - group[0].enqueued_at
            queue_empty = self._carry is None and self._queue.empty()
            reason = self.settings.policy.should_flush(self._entries, self._group_bytes, waited_s, queue_empty)
        if reason is not None:
            self._commit(reason)

    def _take_batches(self) -> None:
        """Drain whatever is queued (waiting for a group's first batch, or until the group is
        due): it joins this group, up to a full one (see :meth:`GroupCommitPolicy.group_full`)."""
        policy = self.settings.policy
        carried = self._carry is not None
        if carried:
            item, self._carry = self._carry, None
        else:
            item = self._next_item(self._group)
        while item is not None:
            if item is STOP:
                self._stopping = True
            else:
                if not carried:  # off the queue now: JOURNAL_QUEUE_LATENCY, per batch, for each record
                    self._queue_latency.record(time.monotonic() - item.enqueued_at, len(item.records))
                carried = False
                self._in_hand = item
                head, rest = (
                    (item, None)
                    if policy.adaptive_group_writes
                    else split_batch(item, policy, self._entries, self._group_bytes)
                )
                self._group.append(head)
                self._in_hand, self._carry = None, rest
                self._entries += len(head.records)
                self._group_bytes += head.size
                if rest is not None or policy.group_full(self._entries, self._group_bytes):
                    return
            item = _get_nowait(self._queue)

    def _next_item(self, group: list[Batch]) -> Any:
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

    def _broken(self, error: Exception) -> None:
        """A round failed outside the write itself (a bug, logged by ``failure_of``): fail the
        journal as a failed write does, and answer the batches being assembled with it; later
        groups fail in :meth:`_commit`."""
        failure = self._failure or UnknownServerError(f"journal writer failed: {error!r}")
        if self._failure is None:
            self._fail(failure)
        pending = [*self._group, *(b for b in (self._in_hand, self._carry) if b is not None)]
        self._group, self._entries, self._group_bytes, self._in_hand, self._carry = [], 0, 0, None, None
        if pending:
            self._call_on_loop(self._group_done, pending, failure, None)

    # -- one group: write, sync, account, hand back ---------------------------------------------

    def _commit(self, reason: FlushReason) -> None:
        """Write the group, sync it, and hand it back to the loop (failed, if the journal has)."""
        group, entries, group_bytes = self._group, self._entries, self._group_bytes
        end_mark = self._write(group, group_bytes) if self._failure is None else None
        if end_mark is not None:
            self._account(group, entries, RECORD_HEADER_SIZE + group_bytes, reason)
        self._call_on_loop(self._group_done, group, self._failure if end_mark is None else None, end_mark)
        self._group, self._entries, self._group_bytes = [], 0, 0
        if end_mark is not None:
            self._after_write()

    def _write(self, group: list[Batch], group_bytes: int) -> LogMark | None:
        """Write (and sync) one group: where it ends, or None when the write failed (the
        journal has failed then)."""
        writer = self.files.current
        assert writer is not None
        buffers = [b""]
        for batch in group:
            buffers += batch.buffers
        # The GROUP record first: its checksum covers the record headers (buffers[1::2]), which
        # cover their payloads; a replay takes the group whole or not at all (journal format).
        buffers[0] = encode_group_header(writer.segment_id, buffers[1::2], group_bytes)
        written_bytes = RECORD_HEADER_SIZE + group_bytes
        try:
            if self.settings.sync_data:
                sync_started = time.monotonic()
                start = writer.append_synced(buffers, written_bytes)
                sync_ms = (time.monotonic() - sync_started) * 1000
                metrics.JOURNAL_SYNC.observe(sync_ms)
                if sync_ms >= SLOW_SYNC_MS:
                    diagnostics.record("journal_slow_sync", sync_ms, t=sync_started, bytes=written_bytes)
                self.stats.syncs += 1
            else:
                start = writer.append(buffers, written_bytes)
        except OSError as exc:  # the file position is unknown now
            log.error("journal %s: write failed, refusing further adds: %r", self.directory, exc)
            self._fail(UnknownServerError(f"journal write failed: {exc}"))
            return None
        if disk_model.MODEL is not None:  # bench only (minipulsarSimulatedDiskModel): a SIMULATED slow disk
            disk_model.MODEL.wrote(self.directory, written_bytes, self.settings.sync_data, journal=True)
        return LogMark(writer.segment_id, start + written_bytes)

    def _account(self, group: list[Batch], entries: int, group_bytes: int, reason: FlushReason) -> None:
        """Per group, never per record: the latency of each batch counts for all its records."""
        self.stats.group_written(entries, group_bytes, reason)
        metrics.JOURNAL_NUM_FLUSH[reason.value].inc()
        metrics.JOURNAL_FORCE_WRITE_GROUPING_COUNT.observe(entries)
        metrics.JOURNAL_WRITE_BYTES.inc(group_bytes)
        now, record = time.monotonic(), self._add_latency.record
        for batch in group:
            record(now - batch.enqueued_at, len(batch.records))

    def _after_write(self) -> None:
        """Let the files create the next segment ahead of time, or roll."""
        try:
            self.files.after_write()
        except OSError as exc:  # a full disk: no more appends
            log.error("journal %s: cannot roll to a new segment, refusing further adds: %r", self.directory, exc)
            self._fail(UnknownServerError(f"journal roll failed: {exc}"))

    def _fail(self, failure: MiniPulsarError) -> None:
        """Fail every later group here, and every later admission on the loop at once."""
        self._failure = failure
        self._on_failure(failure)


def split_batch(batch: Batch, policy: GroupCommitPolicy, entries: int, group_bytes: int) -> tuple[Batch, Batch | None]:
    """Without adaptive group writes: the head of ``batch`` that fits the group (it closes on
    the record reaching a threshold, as if records came one by one) and the rest, if any."""
    taken = size = 0
    for record in batch.records:
        taken += 1
        size += record[RECORD_SIZE]
        if policy.group_full(entries + taken, group_bytes + size):
            break
    if taken == len(batch.records):
        return batch, None
    records, buffers = batch.records, batch.buffers
    return (
        Batch(records[:taken], buffers[: 2 * taken], size, batch.enqueued_at),
        Batch(records[taken:], buffers[2 * taken :], batch.size - size, batch.enqueued_at),
    )


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
