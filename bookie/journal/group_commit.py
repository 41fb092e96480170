"""When the journal writes and syncs its pending records: BookKeeper's group-commit rules.

Pure logic: the journal thread owns the control flow and asks :meth:`GroupCommitPolicy.should_flush`
after every drain of its queue. A group is flushed when ANY of these holds (first match wins,
and is counted per reason, as BookKeeper's ``JOURNAL_NUM_FLUSH_*`` counters do):

1. the pending bytes reached ``journalBufferedWritesThreshold``;
2. the pending records reached ``journalBufferedEntriesThreshold`` (0 = no limit);
3. the oldest pending record has waited ``journalMaxGroupWaitMSec``;
4. the queue is empty and ``journalFlushWhenQueueEmpty`` is set.

Whatever arrives while a group is being written and synced forms the next group, so under
load groups grow by themselves even with a zero wait.

``journalAdaptiveGroupWrites`` (BookKeeper's "group force writes", default true) decides how
far a group may grow past those limits. True: once a flush is due, the writer sweeps in
everything already queued, so one write and one fsync cover whatever piled up meanwhile (the
group adapts to the load; BookKeeper's force-write thread likewise drains every pending
request into one fsync). False: a group is closed as soon as it reaches
``journalBufferedWritesThreshold`` or ``journalBufferedEntriesThreshold``
(:meth:`GroupCommitPolicy.group_full`); what is left in the queue forms the next groups, each
with its own write and fsync: smaller, more regular groups, more fsyncs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class FlushReason(enum.Enum):
    MAX_OUTSTANDING_BYTES = "max_outstanding_bytes"
    """BookKeeper: JOURNAL_NUM_FLUSH_MAX_OUTSTANDING_BYTES."""
    MAX_ENTRIES = "max_entries"
    MAX_WAIT = "max_wait"
    """BookKeeper: JOURNAL_NUM_FLUSH_MAX_WAIT."""
    EMPTY_QUEUE = "empty_queue"
    """BookKeeper: JOURNAL_NUM_FLUSH_EMPTY_QUEUE."""
    SHUTDOWN = "shutdown"
    """The journal is closing: everything pending is written before the thread exits."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupCommitPolicy:
    max_group_wait_s: float = 0.001
    """journalMaxGroupWaitMSec (Pulsar's bookkeeper.conf: 1 ms): latency traded for bigger groups."""
    buffered_writes_threshold_bytes: int = 512 * 1024
    """journalBufferedWritesThreshold (512 KiB in BookKeeper and Pulsar)."""
    buffered_entries_threshold: int = 0
    """journalBufferedEntriesThreshold (0 = off, as in BookKeeper)."""
    flush_when_queue_empty: bool = False
    """journalFlushWhenQueueEmpty (false in BookKeeper and Pulsar)."""
    adaptive_group_writes: bool = True
    """journalAdaptiveGroupWrites (true in BookKeeper and Pulsar): see the module docstring."""

    def __post_init__(self) -> None:
        if self.max_group_wait_s < 0:
            raise ValueError(f"max_group_wait_s must be >= 0, got {self.max_group_wait_s}")
        if self.buffered_writes_threshold_bytes < 1:
            raise ValueError("buffered_writes_threshold_bytes must be >= 1")

    def should_flush(
        self, entries: int, pending_bytes: int, oldest_wait_s: float, queue_empty: bool
    ) -> FlushReason | None:
        """The reason to flush the ``entries`` pending records now, or None to keep waiting."""
        if entries == 0:
            return None
        if pending_bytes >= self.buffered_writes_threshold_bytes:
            return FlushReason.MAX_OUTSTANDING_BYTES
        if self.buffered_entries_threshold and entries >= self.buffered_entries_threshold:
            return FlushReason.MAX_ENTRIES
        if oldest_wait_s >= self.max_group_wait_s:
            return FlushReason.MAX_WAIT
        if queue_empty and self.flush_when_queue_empty:
            return FlushReason.EMPTY_QUEUE
        return None

    def group_full(self, entries: int, pending_bytes: int) -> bool:
        """True when a group must take no more records: only without adaptive group writes,
        once a size threshold is reached."""
        if self.adaptive_group_writes:
            return False
        return pending_bytes >= self.buffered_writes_threshold_bytes or (
            self.buffered_entries_threshold > 0 and entries >= self.buffered_entries_threshold
        )

    def wait_s(self, oldest_wait_s: float) -> float:
        """How long the thread may block for more records before the oldest one is due."""
        return max(0.0, self.max_group_wait_s - oldest_wait_s)
