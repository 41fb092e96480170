"""Entry-log garbage: which logs go, which get rewritten, and the rewrite itself (compaction).

Selection (pure, BookKeeper's ``doGcEntryLogs`` / ``doCompactEntryLogs``), over the logs below
the one flushes append to now (that one, and any newer, is never touched):

- a log whose live bytes are 0 is deleted (:func:`logs_to_delete`);
- a log whose live fraction is above 0 and below the threshold of the compaction that is due
  is rewritten, emptiest first (:func:`logs_to_compact`).

The rewrite of one log (:class:`EntryLogCompactor`), in an order where a crash at any instant
loses nothing:

1. GC thread: the entries the index points at in the old log, in file order;
2. per chunk, throttled: the GC thread reads them (CRC-checked); the flush thread appends
   copies to the current entry log and fsyncs it, *then* in one transaction points each entry
   at its copy (compare-and-set: an entry re-added or deleted meanwhile keeps its newer state)
   and moves its bytes from the old log's usage to the new one's;
3. flush thread: the old log's usage rows go, then its file (fsync of the directory).

A crash after the copies were written leaves unreferenced bytes (dead: a later round reclaims
them); after a chunk's commit its entries are read from their copies; after the usage rows went,
the old file is a log without live bytes, deleted by the next round. Live entries stay
readable throughout: see :mod:`bookie.storage.single_directory` for reads that race the delete.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from minipulsar.bookie.storage.entry_log import split_location
from minipulsar.bookie.storage.entry_logger import CorruptEntryError
from minipulsar.bookie.storage.single_directory import CompactedEntry, EntryLogUsage, SingleDirectoryDbLedgerStorage

log = logging.getLogger(__name__)

RunBlocking = Callable[..., Awaitable[Any]]
"""``await run(fn, *args)``: run blocking ``fn`` on some thread (the GC's, or the flush thread)."""

CHUNK_ENTRIES_MAX = 1000
CHUNK_BYTES_MAX = 4 * 1024 * 1024
"""A chunk is copied, fsynced and committed at once: this bounds how long one compaction job
holds the flush thread (checkpoints queue behind it)."""


# -- selection (pure) ---------------------------------------------------------------------------


def logs_to_delete(usages: Sequence[EntryLogUsage]) -> list[EntryLogUsage]:
    """The logs holding no live bytes."""
    return [usage for usage in usages if usage.live_bytes <= 0]


def logs_to_compact(usages: Sequence[EntryLogUsage], threshold: float) -> list[EntryLogUsage]:
    """The logs with live data whose live fraction is below ``threshold``, emptiest first (most
    space back for the least copying)."""
    chosen = [usage for usage in usages if usage.live_bytes > 0 and usage.usage < threshold]
    return sorted(chosen, key=lambda usage: (usage.usage, usage.log_id))


# -- throttling -----------------------------------------------------------------------------------


class CompactionThrottle:
    """BookKeeper's compaction rate limit: ``compactionRateByEntries`` entries/s, or
    ``compactionRateByBytes`` bytes/s with ``isThrottleByBytes``.

    A pacer: each chunk may start once the previous ones' cost has elapsed at the rate, so the
    average rate never exceeds it and a burst is at most one chunk (at most one second's worth).
    """

    def __init__(self, rate_per_s: float, by_bytes: bool, clock: Callable[[], float] = time.monotonic) -> None:
        assert rate_per_s > 0, rate_per_s
        self.rate_per_s = rate_per_s
        self.by_bytes = by_bytes
        self._clock = clock
        self._next_start = 0.0

    def chunk_caps(self) -> tuple[int, int]:
        """(entries, bytes) one chunk may hold: at most one second's worth of the rate, within
        :data:`CHUNK_ENTRIES_MAX` / :data:`CHUNK_BYTES_MAX` (a chunk always takes one entry)."""
        if self.by_bytes:
            return CHUNK_ENTRIES_MAX, max(1, min(CHUNK_BYTES_MAX, int(self.rate_per_s)))
        return max(1, min(CHUNK_ENTRIES_MAX, int(self.rate_per_s))), CHUNK_BYTES_MAX

    def delay_s(self, entries: int, size_bytes: int) -> float:
        """Reserve a chunk's cost; how long to wait before copying it."""
        now = self._clock()
        start = max(now, self._next_start)
        self._next_start = start + (size_bytes if self.by_bytes else entries) / self.rate_per_s
        return start - now

    async def acquire(self, entries: int, size_bytes: int) -> None:
        delay = self.delay_s(entries, size_bytes)
        if delay > 0:
            await asyncio.sleep(delay)


# -- the rewrite ----------------------------------------------------------------------------------


@dataclass(slots=True)
class CompactionStats:
    logs_compacted: int = 0
    entries_moved: int = 0
    bytes_moved: int = 0
    """Record bytes copied into new logs."""
    reclaimed_bytes: int = 0
    """Compacted logs' sizes minus what was copied out of them."""

    def add(self, other: CompactionStats) -> None:
        self.logs_compacted += other.logs_compacted
        self.entries_moved += other.entries_moved
        self.bytes_moved += other.bytes_moved
        self.reclaimed_bytes += other.reclaimed_bytes


class CompactionAborted(Exception):
    """A compaction stopped before its old log could go (time bound, or a read that failed)."""


class EntryLogNotCompacted(CompactionAborted):
    """This one log cannot be compacted now (an entry failed its checks, or the index still
    points into it afterwards): it stays, and the compaction goes on with the next log — as
    BookKeeper's GC logs a failed ``compactEntryLog`` and moves on. One damaged record must
    not stop every later compaction of every dir."""


class EntryLogCompactor:
    def __init__(
        self,
        run_on_gc_thread: RunBlocking,
        run_exclusive: RunBlocking,
        throttle: CompactionThrottle,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``run_on_gc_thread``: where scans and reads run; ``run_exclusive``: the flush thread
        (:meth:`~bookie.storage.db_ledger_storage.DbLedgerStorage.run_exclusive`)."""
        self._gc_thread = run_on_gc_thread
        self._exclusive = run_exclusive
        self.throttle = throttle
        self._clock = clock

    async def compact(
        self, directory: SingleDirectoryDbLedgerStorage, usage: EntryLogUsage, deadline: float | None = None
    ) -> CompactionStats:
        """Copy the live entries of ``usage.log_id`` into the current entry log, then delete it.

        Raises:
            CompactionAborted: ``deadline`` (clock time) passed first; what was moved stays
                moved, the old log stays (a later round goes on).
            EntryLogNotCompacted: an entry could not be read, or the log is still referenced
                after the move: the same, for this log only.
        """
        log_id = usage.log_id
        started = self._clock()
        live = await self._gc_thread(directory.live_entries, log_id)
        entries_max, bytes_max = self.throttle.chunk_caps()
        stats = CompactionStats()
        next_index = 0
        while next_index < len(live):
            if deadline is not None and self._clock() >= deadline:
                raise CompactionAborted(f"entry log {log_id:x}: compaction time bound reached")
            entries, next_index = await self._gc_thread(
                _read_chunk, directory, live, next_index, entries_max, bytes_max
            )
            await self.throttle.acquire(len(entries), sum(len(entry[3]) for entry in entries))
            new_locations = await self._exclusive(directory.write_compacted, entries)
            moved, moved_bytes = await self._exclusive(directory.commit_compacted, log_id, entries, new_locations)
            stats.entries_moved += moved
            stats.bytes_moved += moved_bytes
        if not await self._exclusive(delete_log, directory, log_id):
            raise EntryLogNotCompacted(f"entry log {log_id:x}: still referenced after compaction")
        stats.logs_compacted = 1
        stats.reclaimed_bytes = max(0, usage.size_bytes - stats.bytes_moved)
        log.info(
            "%s: compacted entry log %x (usage %.3f): %d entries, %d bytes moved, %d bytes reclaimed in %.2fs",
            directory.directory,
            log_id,
            usage.usage,
            stats.entries_moved,
            stats.bytes_moved,
            stats.reclaimed_bytes,
            self._clock() - started,
        )
        return stats


def _read_chunk(
    directory: SingleDirectoryDbLedgerStorage,
    live: list[tuple[int, int, int]],
    start: int,
    entries_max: int,
    bytes_max: int,
) -> tuple[list[CompactedEntry], int]:
    """GC thread: read ``live[start:]`` until a cap is reached; returns the entries and the
    index to go on from.

    Raises:
        EntryLogNotCompacted: an entry failed its checks (the old log must not go).
    """
    entries: list[CompactedEntry] = []
    size = 0
    index = start
    while index < len(live) and len(entries) < entries_max and (not entries or size < bytes_max):
        ledger_id, entry_id, location = live[index]
        try:
            payload = directory.read_at(location, ledger_id, entry_id)
        except CorruptEntryError as exc:
            raise EntryLogNotCompacted(f"entry log {split_location(location)[0]:x}: {exc}") from exc
        entries.append((ledger_id, entry_id, location, payload))
        size += len(payload)
        index += 1
    return entries, index


def delete_log(directory: SingleDirectoryDbLedgerStorage, log_id: int) -> bool:
    """Flush thread: the log's usage rows first, then its file (a crash between leaves a file
    without rows: dead, deleted by the next round). False if the index still points into it."""
    if not directory.forget_entry_log(log_id):
        return False
    directory.remove_entry_log(log_id)
    return True
