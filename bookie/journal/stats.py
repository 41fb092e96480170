"""A journal's counters, for tests, diagnostics and the load report.

Invariants:
- written by the journal's writer thread only (its directory's rolls included);
- ``group_sizes`` holds at most the last :data:`GROUP_SIZES_KEPT` groups' record counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minipulsar.bookie.journal.group_commit import FlushReason

GROUP_SIZES_KEPT = 1000


@dataclass(slots=True)
class JournalStats:
    groups: int = 0
    records: int = 0
    bytes_written: int = 0
    syncs: int = 0
    rolls: int = 0
    flushes: dict[FlushReason, int] = field(default_factory=lambda: dict.fromkeys(FlushReason, 0))
    """Groups flushed, per reason (BookKeeper's ``JOURNAL_NUM_FLUSH_*``)."""
    group_sizes: list[int] = field(default_factory=list)
    """Records of the last groups (see :data:`GROUP_SIZES_KEPT`)."""

    def group_written(self, records: int, group_bytes: int, reason: FlushReason) -> None:
        self.groups += 1
        self.records += records
        self.bytes_written += group_bytes
        self.flushes[reason] += 1
        if len(self.group_sizes) >= GROUP_SIZES_KEPT:
            del self.group_sizes[: GROUP_SIZES_KEPT // 2]
        self.group_sizes.append(records)
