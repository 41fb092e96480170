"""What a placement policy knows about the bookies when it picks an ensemble.

A :class:`ClusterView` is an immutable snapshot assembled by the BookKeeper client from the
bookie registry (``/ledgers/available``), the rack mapping, the load poller and the quarantine.
Policies are pure functions of a view (plus their random generator), so they can be tested
with hand-made views and an injected clock.

Invariant: a view never changes; the bookies it calls writable, read-only and quarantined are
those the client saw when it was assembled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_RACK = "/default-rack"


@dataclass(frozen=True, slots=True)
class BookieLoadReport:
    """The last load report (BOOKIE_INFO) received from one bookie."""

    journal_write_bytes_per_s: float
    """Journal bytes this bookie wrote per second over its last few seconds."""
    ledger_dirs_used_fraction: float
    """Used fraction of the bookie's ledger disks, 0..1."""
    received_at_s: float
    """When the report arrived, on the same clock as :attr:`ClusterView.now_s`."""
    read_only: bool = False
    journal_disk_write_bytes_per_s: float | None = None
    """Bytes per second written to the disk holding the bookie's journal by every writer of it,
    neighbour bookies sharing that disk included (BP-65's ``writeBytePerSecond``, what BIGO
    balances); None when the bookie cannot measure it (no block device)."""

    @property
    def journal_load_bytes_per_s(self) -> float:
        """The journal throughput placement weighs: the journal disk's when known, else this
        bookie's own journal bytes (a lower bound of its disk's), never negative."""
        if self.journal_disk_write_bytes_per_s is not None:
            return max(self.journal_disk_write_bytes_per_s, 0.0)
        return max(self.journal_write_bytes_per_s, 0.0)


@dataclass(frozen=True, slots=True)
class ClusterView:
    writable: frozenset[str]
    """Bookie ids registered under ``/ledgers/available`` (the only candidates for new ensembles)."""
    read_only: frozenset[str] = frozenset()
    """Bookie ids under ``/ledgers/available/readonly``: readable, never chosen for writes."""
    racks: Mapping[str, str] = field(default_factory=dict)
    """Bookie id → rack (``/region/rack`` style); a missing bookie is in :data:`DEFAULT_RACK`."""
    loads: Mapping[str, BookieLoadReport] = field(default_factory=dict)
    quarantined: frozenset[str] = frozenset()
    now_s: float = 0.0

    def rack_of(self, bookie: str) -> str:
        return self.racks.get(bookie) or DEFAULT_RACK
