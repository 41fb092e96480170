"""DbLedgerStorage: the bookie's ledger storage over one or more ledger dirs.

Ledger ``L`` lives in dir ``L mod #dirs`` (:class:`SingleDirectoryDbLedgerStorage`: write cache,
entry logs, index, read-ahead cache). This module runs the checkpoints, BookKeeper's
``SyncThread``: every ``flushInterval``, and whenever a dir's active write-cache half is full
or adds wait for room:

1. on the loop, in one callback: capture the checkpoint (each journal's applied mark) and swap
   every dir's halves — so every record before a mark is in a half being flushed, or earlier;
2. on the flush thread (and one more thread per further dir, all dirs at once: each may be
   its own disk): each dir writes its half sorted into entry logs, fsyncs them, and
   commits the locations in one index transaction; then, if every dir's flush succeeded,
   ``lastMark`` is written atomically in every dir, and the journals delete their segments
   wholly before it;
3. on the loop: the flushed halves are dropped; if more is due, the next checkpoint starts.

Invariants:
- at most one checkpoint in flight, and the dirs flush independently within it: a dir whose
  flush failed keeps its half (still readable, still in the journal) and retries that half
  alone, every :data:`RETRY_DELAY_S` (one timer), while the other dirs go on swapping and
  flushing theirs — as BookKeeper's per-dir storages do, so one full ledger disk does not stop
  the adds to the ledgers of the others. A half that was flushed is never written again;
- the mark moves only with a checkpoint in which every dir swapped its active half and every
  flush succeeded: while a dir retries an old half, its active one holds records before any
  newer mark, so the journals keep them;
- a dir whose flush failed is marked in :attr:`DbLedgerStorage.dirs_manager`: *full* for lack of
  space (and :attr:`DbLedgerStorage.no_space_listener` is told), *failed* for any other error
  (:mod:`bookie.storage.ledger_dirs_manager`). While it is not writable the adds of its ledgers
  are refused at once with BookieReadOnly, those waiting for room too; adds that wait for
  room in a writable dir are refused after dbStorage_maxThrottleTimeMs (TooManyRequests);
- no ``lastMark`` is written into a failed dir (the newest mark over the dirs is read at start);
- blocking work (flush, replay, open, close) never runs on the event loop;
- the replay at start puts entries into the write cache; a full half is flushed on the spot
  *without* moving the mark (a crash then replays those records again: harmless, an entry
  re-added replaces itself), and :meth:`replay_completed` checkpoints the end of the replay.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from minipulsar import diagnostics
from minipulsar.bookie.storage import metrics
from minipulsar.bookie.storage.base import LedgerStorage
from minipulsar.bookie.storage.checkpoint import EMPTY_CHECKPOINT, Checkpoint, CheckpointSource
from minipulsar.bookie.storage.ledger_dirs import LedgerDirs
from minipulsar.bookie.storage.ledger_dirs_manager import LedgerDirsManager, is_out_of_space
from minipulsar.bookie.storage.ledger_state import LedgerState
from minipulsar.bookie.storage.single_directory import FlushBatch, SingleDirectoryDbLedgerStorage, StorageSettings
from minipulsar.config import BookieConfig
from minipulsar.errors import BookieReadOnlyError

log = logging.getLogger(__name__)

MB = 1024 * 1024
RETRY_DELAY_S = 1.0
FAILURE_LOG_EVERY = 30
"""While a checkpoint keeps failing, one log line per this many attempts (after the first)."""
FLUSH_ERRORS: tuple[type[Exception], ...] = (OSError, sqlite3.Error)
"""What a dir's flush may fail with in operation (the disk, the index): the dir keeps its half
and retries it."""
LAST_MARK_MIN_INTERVAL_S = 0.5
"""Under load, the lastMark files are written at most this often (see ``_mark_due``): the
journals then keep up to this much more to replay after a crash, and are trimmed as often."""
T = TypeVar("T")


def settings_from_config(config: BookieConfig) -> StorageSettings:
    """Cache sizes are per bookie in the config and split across the ledger dirs (as BookKeeper)."""
    dirs = len(config.ledger_dirs)
    return StorageSettings(
        write_cache_max_bytes=config.db_storage_write_cache_max_size_mb * MB // dirs,
        read_cache_max_bytes=config.db_storage_read_ahead_cache_max_size_mb * MB // dirs,
        read_ahead_batch_entries=config.db_storage_read_ahead_cache_batch_size,
        read_ahead_batch_bytes=config.db_storage_read_ahead_cache_batch_bytes_size,
        log_size_limit=config.log_size_limit,
        flush_entry_log_bytes=config.flush_entrylog_bytes,
        direct_io_entry_logger=config.db_storage_direct_io_entry_logger,
        max_throttle_s=config.db_storage_max_throttle_time_ms / 1000,
    )


@dataclass(slots=True)
class _Checkpointing:
    sequence: int
    checkpoint: Checkpoint
    batches: list[FlushBatch | None]
    """Per dir: the half to flush (its active one just swapped, or one whose flush failed,
    retried), or None (a failed half not due for its retry yet)."""
    complete: bool
    """Every dir swapped its active half for this checkpoint: once all of them are flushed,
    everything before ``checkpoint`` is in the entry logs, and the mark may move."""
    retried: bool = False
    """Some of ``batches`` are halves whose flush failed before."""
    persist_mark: bool = True
    """False for a flush the write cache asked for within :data:`LAST_MARK_MIN_INTERVAL_S` of
    the last persisted mark: the data is flushed, the lastMark files are left for a later one."""
    flushed: list[bool] = field(default_factory=list)
    """Per dir, set on the flush thread: its batch is in the entry logs and indexed."""
    errors: list[BaseException] = field(default_factory=list)
    """The dirs' flush failures, then the lastMark write's (set on the flush thread)."""
    dir_errors: dict[int, BaseException] = field(default_factory=dict)
    """Per dir index, its flush's failure (also in ``errors``)."""
    mark_skipped: list[bool] = field(default_factory=list)
    """Per dir: failed (its disk errs), so the lastMark is not written there (the newest mark of
    all dirs is the one read at start)."""

    @property
    def failed(self) -> bool:
        return bool(self.errors)


class DbLedgerStorage(LedgerStorage):
    def __init__(
        self,
        config: BookieConfig,
        checkpoint_source: CheckpointSource,
        settings: StorageSettings | None = None,
        dirs_manager: LedgerDirsManager | None = None,
    ) -> None:
        settings = settings or settings_from_config(config)
        self.dirs_manager = dirs_manager if dirs_manager is not None else LedgerDirsManager(config.ledger_dirs)
        """Which dirs take adds: a flush failing marks its dir full (no space) or failed."""
        self._writable = self.dirs_manager.writable_flags
        self._dirs = [
            SingleDirectoryDbLedgerStorage(d, settings, functools.partial(self._dir_wants_flush, index))
            for index, d in enumerate(LedgerDirs(config.ledger_dirs).current_dirs)
        ]
        self._n = len(self._dirs)
        self._source = checkpoint_source
        self._flush_interval_s = config.flush_interval_ms / 1000
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="db-storage-flush")
        self._dir_flushers = (
            ThreadPoolExecutor(max_workers=self._n - 1, thread_name_prefix="db-storage-flush-dir")
            if self._n > 1
            else None
        )
        """With several ledger dirs, the flush thread flushes one and these the others, at once:
        each dir may sit on its own disk (BookKeeper's per-dir storages flush on their own threads)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: _Checkpointing | None = None
        self._idle: asyncio.Future[None] | None = None
        self._unflushed: list[FlushBatch | None] = [None] * self._n
        """Per dir: the half whose flush failed, kept until a retry writes it."""
        self._retry_due = False
        """The retry timer fired: the next checkpoint retries the failed halves."""
        self._retry_timer: asyncio.TimerHandle | None = None
        self._failures = 0
        """Checkpoints that failed since the mark last moved."""
        self._dir_failure: list[str | None] = [None] * self._n
        """Per dir: how its flush last failed (logged when it changes), None once it flushes."""
        self._flush_requested = False
        self._timer: asyncio.TimerHandle | None = None
        self._last_checkpoint = EMPTY_CHECKPOINT
        """The latest checkpoint completed (loop side)."""
        self._persisted = EMPTY_CHECKPOINT
        """The checkpoint in the lastMark files (flush thread side)."""
        self._persisted_at = 0.0
        """When the lastMark files were last written (monotonic; flush thread side)."""
        self._sequence = 0
        self._closing = False

    @property
    def dirs(self) -> list[SingleDirectoryDbLedgerStorage]:
        return self._dirs

    def _dir(self, ledger_id: int) -> SingleDirectoryDbLedgerStorage:
        return self._dirs[ledger_id % self._n]

    # -- start-up and shutdown ------------------------------------------------------------------

    def open(self) -> Checkpoint:
        checkpoint = EMPTY_CHECKPOINT
        for directory in self._dirs:
            checkpoint = checkpoint.max(directory.open())
        self._persisted = self._last_checkpoint = checkpoint
        log.info(
            "ledger storage open: %d ledgers, %d entries indexed, checkpoint %s",
            self.ledger_count,
            self.entry_count,
            checkpoint,
        )
        return checkpoint

    def replay_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes) -> None:
        directory = self._dir(ledger_id)
        if directory.replay_entry(ledger_id, entry_id, lac, payload):
            batch = directory.swap()  # nothing else runs during the replay: no loop involved
            directory.flush(batch)
            directory.flush_completed(batch)

    def replay_completed(self, checkpoint: Checkpoint) -> None:
        job = _Checkpointing(0, checkpoint, [directory.swap() for directory in self._dirs], complete=True)
        self._flush_blocking(job)
        if job.failed:
            raise job.errors[0]
        self._completed(job)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._timer = self._loop.call_later(self._flush_interval_s, self._on_timer)

    async def close(self) -> None:
        """Finish the checkpoint in flight, checkpoint what is left, then release everything."""
        loop = asyncio.get_running_loop()
        self._closing = True
        self._hurry(True)  # the flush in flight and the last ones go at full speed
        for timer in (self._timer, self._retry_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._retry_timer = None
        if self._loop is not None:
            await self._wait_idle()
            for _ in range(2):  # the failed halves first, if any; then the rest
                if not (self._has_failed_halves or self._has_work()):
                    break
                self._start_checkpoint(retry_failed=True)
                job = self._running
                await self._wait_idle()
                if job is None or job.failed or job.complete:
                    break
        await loop.run_in_executor(None, self._close_blocking)

    async def _wait_idle(self) -> None:
        while self._idle is not None:
            await asyncio.shield(self._idle)

    def _close_blocking(self) -> None:
        self._executor.shutdown(wait=True)
        if self._dir_flushers is not None:
            self._dir_flushers.shutdown(wait=True)
        for directory in self._dirs:
            directory.close()

    # -- checkpoints (loop side) -----------------------------------------------------------------

    async def checkpoint(self) -> Checkpoint:
        """Checkpoint now (after the one in flight) and return the checkpoint completed.

        Raises:
            Exception: the checkpoint failed (it is retried in the background).
        """
        assert self._loop is not None and not self._closing, "storage not serving"
        self._hurry(True)  # someone waits for it: no pacing
        try:
            await self._wait_idle()
            while True:  # at most twice: the failed halves retried first leave the mark where it is
                self._start_checkpoint(retry_failed=True)
                job = self._running
                assert job is not None
                await self._wait_idle()
                if job.failed:
                    raise RuntimeError(f"checkpoint {job.sequence} failed: {job.errors[0]!r}")
                if job.complete:
                    return job.checkpoint
        finally:
            self._hurry(self._closing)

    def _hurry(self, hurry: bool) -> None:
        for directory in self._dirs:
            directory.hurry = hurry

    async def run_exclusive(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking ``fn(*args)`` on the flush thread: garbage collection's index and
        entry-log writes run there, so they never interleave with a flush (one writer for
        ``index.db`` and for the entry logs, and FIFO with the checkpoints)."""
        assert self._loop is not None and not self._closing, "storage not serving"
        return await self._loop.run_in_executor(self._executor, functools.partial(fn, *args))

    @property
    def last_checkpoint(self) -> Checkpoint:
        return self._last_checkpoint

    def request_flush(self) -> None:
        """A dir's active half is full or adds wait for room: checkpoint now, or right after
        the one in flight (a dir whose last flush failed waits for its retry)."""
        if self._loop is None or self._closing:
            return  # replay (flushes inline) or shutdown (close() does the last checkpoint)
        if self._running is not None:
            self._flush_requested = True
            return
        self._start_checkpoint(persist_mark=self._mark_due())

    def _dir_wants_flush(self, index: int) -> None:
        """Dir ``index`` asks for a flush: not while its last one failed (its half is retried
        by the timer; a checkpoint now could not swap it, and adds arriving there would start
        one after another)."""
        if self._unflushed[index] is None:
            self.request_flush()

    def _mark_due(self) -> bool:
        """Whether a flush the write cache asked for also writes the lastMark files: at most
        every :data:`LAST_MARK_MIN_INTERVAL_S` under load (each write is three fsyncs on the
        flush thread, ~7 % of its time at 64 KiB adds, while the adds wait for the flush)."""
        return time.monotonic() - self._persisted_at >= LAST_MARK_MIN_INTERVAL_S

    def _on_timer(self) -> None:
        assert self._loop is not None
        self._timer = self._loop.call_later(self._flush_interval_s, self._on_timer)
        if self._running is None and self._has_work():
            self._start_checkpoint()  # failed halves wait for their own timer

    def _has_work(self) -> bool:
        return (
            any(d.has_unflushed_changes for d in self._dirs)
            or self._source.new_checkpoint() != self._last_checkpoint
            or self._persisted != self._last_checkpoint
        )

    @property
    def _has_failed_halves(self) -> bool:
        return any(batch is not None for batch in self._unflushed)

    def _start_checkpoint(self, persist_mark: bool = True, retry_failed: bool = False) -> None:
        assert self._loop is not None and self._running is None
        job = self._capture(persist_mark, retry_failed or self._retry_due)
        self._running = job
        self._idle = self._loop.create_future()
        future = self._loop.run_in_executor(self._executor, self._flush_blocking, job)
        future.add_done_callback(functools.partial(self._checkpoint_done, job))

    def _capture(self, persist_mark: bool, retry_failed: bool) -> _Checkpointing:
        """The checkpoint, and the halves holding everything before it: one loop callback. A
        dir whose last flush failed swaps nothing; its failed half comes along if ``retry_failed``."""
        checkpoint = self._source.new_checkpoint()
        if retry_failed:
            self._retry_due = False
        batches = [
            directory.swap() if failed is None else failed if retry_failed else None
            for directory, failed in zip(self._dirs, self._unflushed)
        ]
        self._sequence += 1
        manager = self.dirs_manager
        return _Checkpointing(
            self._sequence,
            checkpoint,
            batches,
            complete=not self._has_failed_halves,
            retried=retry_failed and self._has_failed_halves,
            persist_mark=persist_mark,
            mark_skipped=[d in manager.failed for d in manager.dirs],
        )

    def _checkpoint_done(self, job: _Checkpointing, future: asyncio.Future) -> None:
        assert self._running is job
        self._running = None
        if future.cancelled():  # the executor shut down
            job.errors.append(asyncio.CancelledError())
        elif (bug := future.exception()) is not None:  # the flush thread's boundary: the halves are retried
            log.error("checkpoint %d: the flush failed", job.sequence, exc_info=bug)
            job.errors.append(bug)
        for index, (directory, batch) in enumerate(zip(self._dirs, job.batches)):
            if batch is None:
                continue
            if index < len(job.flushed) and job.flushed[index]:
                directory.flush_completed(batch)
                self._unflushed[index] = None
                self.dirs_manager.flushed(index)
                if self._dir_failure[index] is not None:
                    self._dir_failure[index] = None
                    log.warning("ledger dir %s flushes again (checkpoint %d)", directory.directory, job.sequence)
            else:
                self._unflushed[index] = batch
        if job.failed:
            self._failed(job)
        elif job.complete:
            if self._failures:
                log.warning("checkpoint %d completed after %d failed", job.sequence, self._failures)
            self._failures = 0
            self._last_checkpoint = job.checkpoint
            metrics.CHECKPOINTS.inc()
        elif job.retried:  # failed halves written: the checkpoint that can move the mark comes next
            self._flush_requested = True
        idle, self._idle = self._idle, None
        if idle is not None and not idle.done():
            idle.set_result(None)
        if not self._closing and (
            self._flush_requested
            or any(d.wants_flush for d, failed in zip(self._dirs, self._unflushed) if failed is None)
        ):
            self._flush_requested = False
            self._start_checkpoint(persist_mark=self._mark_due())

    def _failed(self, job: _Checkpointing) -> None:
        """Keep the failed halves for a retry after :data:`RETRY_DELAY_S` (they stay readable,
        their records stay in the journal). Logged: each dir's failure when it starts or
        changes (another dir failing meanwhile is not hidden), and the checkpoint's first
        failure and then every :data:`FAILURE_LOG_EVERY`-th — not one line a second while a
        disk stays full."""
        self._failures += 1
        for index, error in job.dir_errors.items():
            self._dir_write_failed(index, error)
            failure = f"{type(error).__name__} {getattr(error, 'errno', None)}"
            if failure != self._dir_failure[index]:
                self._dir_failure[index] = failure
                log.error(
                    "ledger dir %s: flush failed in checkpoint %d: %r", self._dirs[index].directory, job.sequence, error
                )
        if self._failures == 1 or self._failures % FAILURE_LOG_EVERY == 0:
            failed_dirs = [str(d.directory) for d, b in zip(self._dirs, self._unflushed) if b is not None]
            log.error(
                "checkpoint %d failed (%d since the mark last moved), retrying every %.1fs; "
                "dirs with a failed flush: %s: %r",
                job.sequence,
                self._failures,
                RETRY_DELAY_S,
                failed_dirs or "none",
                job.errors[0],
            )
        if self._loop is None or self._closing:
            return
        if self._retry_timer is None:
            self._retry_timer = self._loop.call_later(RETRY_DELAY_S, self._retry_now)
        if any(is_out_of_space(e) for e in job.errors) and self.no_space_listener is not None:
            self.no_space_listener()

    def _dir_write_failed(self, index: int, error: BaseException) -> None:
        """A flush into dir ``index`` failed: the dir is full (no space) or failed (any other
        I/O error), and the adds of its ledgers waiting for room are refused now."""
        if is_out_of_space(error):
            self.dirs_manager.out_of_space(index, error)
        else:
            self.dirs_manager.dir_failed(index, error)
        if not self._writable[index]:
            reason = self.dirs_manager.refusal_reason(index)
            self._dirs[index].refuse_waiting(lambda: BookieReadOnlyError(f"{reason}: its ledgers take no adds here"))

    def _retry_now(self) -> None:
        self._retry_timer = None
        if self._closing:
            return
        self._retry_due = True
        if self._running is None:
            self._start_checkpoint()
        else:
            self._flush_requested = True

    def _completed(self, job: _Checkpointing) -> None:
        """Replay only: every batch flushed, the mark written."""
        for directory, batch in zip(self._dirs, job.batches):
            if batch is not None:
                directory.flush_completed(batch)
        self._last_checkpoint = job.checkpoint
        metrics.CHECKPOINTS.inc()

    # -- checkpoints (flush thread) ----------------------------------------------------------------

    def _flush_blocking(self, job: _Checkpointing) -> None:
        """Flush the dirs' batches, at once (one failing leaves the others flushed), then write
        the mark if it may move. A dir's I/O failure is not raised: the outcome is in
        ``job.flushed`` and ``job.errors``; a bug is, once every dir has finished."""
        started = time.monotonic()
        batches = [batch for batch in job.batches if batch is not None]
        log.debug(
            "checkpoint %d started: %d entries, %d bytes, mark %s",
            job.sequence,
            sum(len(batch.cache) for batch in batches),
            sum(batch.cache.size_bytes for batch in batches),
            job.checkpoint,
        )
        todo = [(index, batch) for index, batch in enumerate(job.batches) if batch is not None]
        job.flushed = [False] * len(job.batches)
        others = (
            [self._dir_flushers.submit(self._flush_dir, job, *item) for item in todo[1:]]
            if self._dir_flushers is not None
            else []
        )  # with one dir there are no others
        try:
            if todo:
                self._flush_dir(job, *todo[0])
        finally:  # even on a BaseException: a dir still flushing must not be retried beside itself
            concurrent.futures.wait(others)
        for future in others:
            future.result()  # a bug in another dir's flush is raised here, once all have finished
        job.errors += [job.dir_errors[index] for index in sorted(job.dir_errors)]
        if not job.failed and job.complete and job.checkpoint != self._persisted and job.persist_mark:
            self._write_marks(job)
        metrics.FLUSH.observe((time.monotonic() - started) * 1000)
        diagnostics.record(
            "checkpoint",
            (time.monotonic() - started) * 1000,
            t=started,
            sequence=job.sequence,
            bytes=sum(batch.cache.size_bytes for batch in batches),
        )
        log.debug(
            "checkpoint %d done in %.1f ms: entry logs %s, mark %s",
            job.sequence,
            (time.monotonic() - started) * 1000,
            sorted({i for b in batches for i in b.logs}),
            job.checkpoint,
        )

    def _write_marks(self, job: _Checkpointing) -> None:
        """Write the lastMark in every dir not failed; a dir whose write fails fails the
        checkpoint (its error in ``job.dir_errors``: the dir is marked failed, the mark written
        again by the next checkpoint, without it)."""
        skipped = job.mark_skipped or [False] * self._n
        for index, (directory, skip) in enumerate(zip(self._dirs, skipped)):
            if skip:
                continue
            try:
                directory.write_last_mark(job.checkpoint)
            except FLUSH_ERRORS as exc:
                job.dir_errors[index] = exc
                job.errors.append(exc)
        if job.failed:
            return
        self._persisted = job.checkpoint
        self._persisted_at = time.monotonic()
        self._source.checkpoint_complete(job.checkpoint)

    def _flush_dir(self, job: _Checkpointing, index: int, batch: FlushBatch) -> None:
        """Flush one dir's batch and note the outcome in ``job``: flushed, or the dir's failure
        (:data:`FLUSH_ERRORS`: ENOSPC, EIO), not raised — the other dirs flush on."""
        try:
            if batch.cache or batch.ledgers:
                self._dirs[index].flush(batch)
        except FLUSH_ERRORS as exc:
            job.dir_errors[index] = exc
            return
        job.flushed[index] = True

    # -- adds, fences, reads: routed to the ledger's dir --------------------------------------------

    def _check_writable(self, index: int, ledger_id: int, recovery: bool) -> None:
        """Raises BookieReadOnlyError when dir ``index`` takes no adds (a recovery add passes a
        full dir, not a failed one)."""
        if self._writable[index]:
            return
        manager = self.dirs_manager
        if recovery and manager.dirs[index] not in manager.failed:
            return
        raise BookieReadOnlyError(f"{manager.refusal_reason(index)}: this bookie takes no adds for ledger {ledger_id}")

    def try_admit(self, ledger_id: int, payload_length: int, recovery: bool = False) -> bool:
        index = ledger_id % self._n
        if not self._writable[index]:
            self._check_writable(index, ledger_id, recovery)
        return self._dirs[index].try_admit(payload_length)

    def try_admit_all(self, ledger_ids: set[int], payload_bytes: int, entries: int) -> bool:
        """Admit the adds of several ledgers together: all of them or none (False: admit them
        one by one). Only when the ledgers share one dir (always, with one ledger dir)."""
        first = next(iter(ledger_ids))
        if self._n > 1 and any((ledger_id - first) % self._n for ledger_id in ledger_ids):
            return False
        if not self._writable[first % self._n]:
            return False  # one by one: each is refused (or, recovery, admitted)
        return self._dirs[first % self._n].try_admit_all(payload_bytes, entries)

    async def admit(
        self, ledger_id: int, payload_length: int, recovery: bool = False, since: float | None = None
    ) -> None:
        index = ledger_id % self._n
        self._check_writable(index, ledger_id, recovery)
        await self._dirs[index].admit(payload_length, recovery, since)

    def refuse_waiting(self, error: Callable[[], BaseException]) -> int:
        return sum(directory.refuse_waiting(error) for directory in self._dirs)

    def cancel_admission(self, ledger_id: int, payload_length: int, entries: int = 1) -> None:
        self._dirs[ledger_id % self._n].cancel_admission(payload_length, entries)

    def add_entries(self, requests: Sequence[Any]) -> None:
        """Each add into its ledger's dir: the whole run in one call with one ledger dir."""
        if self._n == 1:
            self._dirs[0].add_entries(requests)
            return
        for request in requests:
            self._dirs[request.ledger_id % self._n].add_entry(
                request.ledger_id, request.entry_id, request.lac, request.payload
            )

    def fence(self, ledger_id: int) -> bool:
        return self._dir(ledger_id).fence(ledger_id)

    def set_master_key(self, ledger_id: int, master_key: bytes) -> bool:
        return self._dir(ledger_id).set_master_key(ledger_id, master_key)

    def ledger(self, ledger_id: int) -> LedgerState | None:
        return self._dirs[ledger_id % self._n].ledger(ledger_id)

    def read_entries(self, ledger_id: int, first_entry_id: int, count: int, max_bytes: int) -> list:
        return self._dir(ledger_id).read_entries(ledger_id, first_entry_id, count, max_bytes)

    @property
    def ledger_count(self) -> int:
        return sum(d.ledger_count for d in self._dirs)

    @property
    def entry_count(self) -> int:
        return sum(d.entry_count for d in self._dirs)
