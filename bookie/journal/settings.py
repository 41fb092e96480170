"""A journal's settings: BookKeeper's journal keys, one field each.

Invariant: one :class:`JournalSettings` serves every journal of a bookie, frozen once built.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minipulsar.bookie.journal.group_commit import GroupCommitPolicy
from minipulsar.config import BookieConfig

MIB = 1024 * 1024


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
