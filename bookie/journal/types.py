"""The journal's small types: its settings and counters, what callers hand it and are told,
and the records in flight between its two halves (see :mod:`bookie.journal.journal`).

Invariants:
- a :data:`PendingRecord`'s ``size`` is its bytes in the segment: header + payload;
- a :class:`Batch` holds exactly two buffers per record (header, payload), in record order,
  and its ``size`` is the sum of its records' sizes: ready for one ``pwritev``;
- :class:`JournalStats` is written by the journal's writer thread only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from minipulsar.bookie.journal.format import EntryLocation, JournalRecord, LogMark
from minipulsar.bookie.journal.group_commit import FlushReason, GroupCommitPolicy
from minipulsar.config import BookieConfig

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
    remove_from_page_cache: bool = True
    """journalRemoveFromPageCache: drop synced groups' pages from the page cache."""
    direct_io: bool = True
    """minipulsarJournalDirectIO: append with O_DIRECT (bookie/direct_io.py)."""
    reuse_files: bool = True
    """journalReuseFiles: write new segments over trimmed ones (bookie/journal/directory.py)."""

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
            remove_from_page_cache=config.journal_remove_from_page_cache,
            direct_io=config.journal_direct_io,
            reuse_files=config.journal_reuse_files,
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
    """Where durable adds go (the ledger storage; see :meth:`JournalSet.attach_storage`). It may
    also have ``add_entries(requests)``: :meth:`add_entry` for each of a run of
    :class:`AddRequest`, in one call (the journal then uses it)."""

    def add_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes) -> None: ...

    def cancel_admission(self, ledger_id: int, payload_length: int) -> None: ...


class NoStore:
    """A journal on its own (tests, tools): durable adds go nowhere."""

    def add_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes) -> None:
        pass

    def cancel_admission(self, ledger_id: int, payload_length: int) -> None:
        pass


OnDurable = Callable[[EntryLocation | None, BaseException | None], None] | asyncio.Future
"""How a record without a sink is completed: a callback ``(location, None)`` / ``(None, error)``,
or a future resolved with the location (or failed with the error)."""


def complete_on_durable(on_durable: OnDurable, location: EntryLocation | None, error: BaseException | None) -> None:
    """Complete a record without a sink: call it back, or resolve its future (unless done)."""
    if isinstance(on_durable, asyncio.Future):
        if on_durable.done():
            return
        if error is None:
            on_durable.set_result(location)
        else:
            on_durable.set_exception(error)
    else:
        on_durable(location, error)


PendingRecord = tuple[Any, AddSink | None, float, int]
"""One admitted record: ``(request, sink, started, size)``. A plain tuple, not a class: the
loop makes one per add, and a run of them in C (``zip``). With a ``sink``: an add,
``request`` its :class:`AddRequest`, ``started`` the caller's clock when it arrived (handed
back to the sink); without: ``request`` is the :data:`OnDurable` to complete with the
record's location. ``size``: header + payload bytes in the segment."""
RECORD_SIZE = 3
"""Index of ``size`` in a :data:`PendingRecord`."""


class Batch:
    """The records admitted in one loop iteration, handed to the writer thread together."""

    __slots__ = ("buffers", "enqueued_at", "records", "size")

    def __init__(self, records: list[PendingRecord], buffers: list[bytes], size: int, enqueued_at: float) -> None:
        self.records = records
        self.buffers = buffers
        """Header, payload, header, payload, ...: exactly two per record, ready for ``pwritev``."""
        self.size = size
        self.enqueued_at = enqueued_at
        """When its first record was admitted (``time.monotonic``)."""
