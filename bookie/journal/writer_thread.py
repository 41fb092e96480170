"""The writer thread of one journal: batches from the loop become groups, each written with
ONE ``pwritev`` and handed back to the loop with ONE ``call_soon_threadsafe``.

The thread drains its queue, asks :class:`GroupCommitPolicy` whether to flush, and writes the
whole group with ``pwritev(RWF_DSYNC)`` — write and fdatasync in one call
(``journalSyncData``; else a plain ``pwritev``) — with no per-record Python work: the records
were encoded on the loop, and the group's latency is counted per batch. After each group it
lets :class:`JournalFiles` create the next segment ahead of time or roll.

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
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from minipulsar.bookie import disk_model, metrics
from minipulsar.bookie.journal.batch import RECORD_SIZE, Batch
from minipulsar.bookie.journal.directory import JournalFiles
from minipulsar.bookie.journal.format import RECORD_HEADER_SIZE, LogMark, encode_group_header
from minipulsar.bookie.journal.group_commit import FlushReason, GroupCommitPolicy
from minipulsar.bookie.journal.segment import SegmentScan
from minipulsar.bookie.journal.stats import JournalStats
from minipulsar.errors import MiniPulsarError, UnknownServerError

log = logging.getLogger("minipulsar.bookie.journal")  # one name for the whole journal's log lines

STOP = object()
"""Queued by the loop after its last batch: write what came before, then stop."""

GroupDone = Callable[[list[Batch], MiniPulsarError | None, LogMark | None], None]
"""The loop's completion of a group: ``(group, None, end mark)`` once it is written (and
synced), ``(group, failure, None)`` if it failed; run on the loop."""


class JournalThread:
    """The thread that writes one journal's groups; created and started on the loop."""

    def __init__(
        self,
        files: JournalFiles,
        q: queue.SimpleQueue,
        stats: JournalStats,
        add_latency: Any,
        group_done: GroupDone,
        on_failure: Callable[[MiniPulsarError], None],
    ) -> None:
        """Args:
        files: the segments to append to (opened on this thread).
        q: where the loop hands over batches (then :data:`STOP`).
        add_latency: JOURNAL_ADD_ENTRY counts written by this thread only.
        group_done: run on the loop once per group, written or failed.
        on_failure: called on this thread with the failure that stops the journal.
        """
        self.files = files
        self.directory = files.directory
        self.settings = files.settings
        self.stats = stats
        self._queue = q
        self._add_latency = add_latency
        self._group_done = group_done
        self._on_failure = on_failure
        self._failure: MiniPulsarError | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Future[None] | None = None

    async def start(self, applied_mark: LogMark | None, replay_scans: list[SegmentScan]) -> None:
        """Start the thread; return once it has opened the segment to append to.

        Raises:
            OSError: the segment could not be opened (the thread has stopped).
        """
        self._loop = asyncio.get_running_loop()
        self._stopped = self._loop.create_future()
        started: asyncio.Future[None] = self._loop.create_future()
        thread = threading.Thread(
            target=self._run,
            args=(started, applied_mark, replay_scans),
            daemon=True,
            name=f"journal-{self.files.index}",
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

    def _run(self, started: asyncio.Future, applied_mark: LogMark | None, replay_scans: list[SegmentScan]) -> None:
        try:
            self.files.open(applied_mark, replay_scans)
        except BaseException as exc:  # reported to start(); the thread has nothing to do
            self.files.close()
            self._call_on_loop(_set_exception, started, exc)
            self._call_on_loop(_set_result, self._stopped, None)
            return
        self._call_on_loop(_set_result, started, None)
        try:
            self._write_loop()
        finally:
            try:
                self.files.close()
            except Exception as exc:  # closed as far as they could be: stop anyway, or close() would wait forever
                log.error("journal %s: closing the segments failed: %r", self.directory, exc)
            self._call_on_loop(_set_result, self._stopped, None)

    # -- group assembly -------------------------------------------------------------------------

    def _write_loop(self) -> None:
        policy, q = self.settings.policy, self._queue
        group: list[Batch] = []
        entries = group_bytes = 0
        stopping = False
        carry: Batch | None = None
        """The rest of a batch split at a group boundary (journalAdaptiveGroupWrites=false)."""
        item: Any = None
        while True:
            try:
                if carry is not None:
                    item, carry = carry, None
                else:
                    item = self._next_item(group)
                while item is not None:  # drain whatever is queued: it joins this group (see group_full)
                    if item is STOP:
                        stopping = True
                    else:
                        if not policy.adaptive_group_writes:
                            item, carry = split_batch(item, policy, entries, group_bytes)
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
                reason = (
                    FlushReason.SHUTDOWN
                    if stopping
                    else policy.should_flush(
                        entries, group_bytes, time.monotonic() - group[0].enqueued_at, carry is None and q.empty()
                    )
                )
                if reason is None:
                    continue
                self._commit(group, entries, group_bytes, reason)
                group, entries, group_bytes = [], 0, 0
                if stopping and carry is None:
                    return
            except Exception as exc:  # a bug: fail the journal, but no add may wait forever for this thread
                # The batch in hand (taken off the queue, not yet in the group) goes with it.
                in_hand = [
                    b for b in (item, carry) if b is not None and b is not STOP and all(b is not g for g in group)
                ]
                self._broken(group + in_hand, exc)
                group, entries, group_bytes, carry, item = [], 0, 0, None, None
                if stopping:
                    return

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

    # -- one group: write, sync, account, hand back ---------------------------------------------

    def _commit(self, group: list[Batch], entries: int, group_bytes: int, reason: FlushReason) -> None:
        """Write one group, sync it, and hand it back to the loop."""
        writer = self.files.current
        assert writer is not None
        if self._failure is not None:
            self._call_on_loop(self._group_done, group, self._failure, None)
            return
        buffers = [b""]
        for batch in group:
            buffers += batch.buffers
        # The GROUP record first: its checksum covers the record headers (buffers[1::2]), which
        # cover their payloads; a replay takes the group whole or not at all (journal_format).
        buffers[0] = encode_group_header(writer.segment_id, buffers[1::2], group_bytes)
        written_bytes = RECORD_HEADER_SIZE + group_bytes
        try:
            if self.settings.sync_data:
                sync_started = time.monotonic()
                start = writer.append_synced(buffers, written_bytes)
                metrics.JOURNAL_SYNC.observe((time.monotonic() - sync_started) * 1000)
                self.stats.syncs += 1
            else:
                start = writer.append(buffers, written_bytes)
        except Exception as exc:  # OSError, or a bug: either way the position is unknown
            log.error("journal %s: write failed, refusing further adds: %r", self.directory, exc)
            failure = UnknownServerError(f"journal write failed: {exc}")
            self._fail(failure)
            self._call_on_loop(self._group_done, group, failure, None)
            return
        if disk_model.MODEL is not None:  # bench only (minipulsarSimulatedDiskModel): a SIMULATED slow disk
            disk_model.MODEL.wrote(self.directory, written_bytes, self.settings.sync_data)
        end_mark = LogMark(writer.segment_id, start + written_bytes)
        self._account(group, entries, written_bytes, reason)
        self._call_on_loop(self._group_done, group, None, end_mark)
        self._after_write()

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
        except Exception as exc:  # OSError (a full disk), or a bug: either way no more appends
            log.error("journal %s: cannot roll to a new segment, refusing further adds: %r", self.directory, exc)
            self._fail(UnknownServerError(f"journal roll failed: {exc}"))

    def _fail(self, failure: MiniPulsarError) -> None:
        """Fail every later group here, and every later admission on the loop at once."""
        self._failure = failure
        self._on_failure(failure)

    def _broken(self, group: list[Batch], exc: Exception) -> None:
        """The group assembly failed (a bug, not a write: :meth:`_commit` answers those): fail
        the journal as a failed write does, and the batches being assembled with it; later
        groups fail in :meth:`_commit`."""
        log.error("journal %s: the writer thread failed, refusing further adds: %r", self.directory, exc, exc_info=exc)
        failure = self._failure or UnknownServerError(f"journal writer failed: {exc!r}")
        if self._failure is None:
            self._fail(failure)
        if group:
            self._call_on_loop(self._group_done, group, failure, None)


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
