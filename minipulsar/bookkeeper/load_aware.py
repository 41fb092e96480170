"""Load-aware ensemble placement: BIGO's bookie load balancing (BP-65).

Every broker polls each bookie's load report every ``bookieLoadPollIntervalSeconds`` and
decides alone, at every ledger creation, from the last report per bookie. Two figures make a
bookie's load (BIGO): the write throughput of its JOURNAL DISK, every writer of it counted
(``journal_disk_write_bytes_per_s``: HDD journals are the bottleneck, and BIGO's bookies share
one journal disk by three, so a bookie whose own journal is quiet can sit on a disk its
neighbours saturate), and ledger-disk usage (``ledger_dirs_used_fraction``). A bookie that
cannot measure its disk (no block device) is weighed by its own journal bytes
(``journal_write_bytes_per_s``), a lower bound of its disk's: see
:attr:`BookieLoadReport.journal_load_bytes_per_s`. In a cluster where only some bookies
measure their disk, the others' lower bounds make them look lighter than they may be.

Scoring, for the candidates whose report is *fresh* (``view.now_s - received_at_s`` at most
``stale_after_s``):

- each figure is made relative to the mean over those candidates, so 1.0 is an average
  bookie whatever the hardware: ``journal = t / max(mean t, 1 MB/s)`` (``t`` the journal
  throughput above) and
  ``disk = u / max(mean u, 0.05)`` (the floors keep an idle cluster's noise, 0.1 vs 0.3 MB/s,
  from looking like a 3x imbalance);
- ``load = 0.7·journal + 0.3·disk``: journal throughput is what drives add latency; disk
  usage moves slowly and the bookie turns read-only on its own before a disk fills;
- ``weight = 1 / (0.2 + load)``, but at least a tenth of the best candidate's weight.

The weight is a roulette chance, not a ranking: per pick, a bookie at half the average load
gets about 1.7x the chance of an average one and one at twice the average about 0.55x, and
near-equal bookies get near-equal chances (10 % more load is about 8 % less chance). So brokers that
read the same reports and decide at the same moment spread their ledgers in proportion
instead of herding onto the one lightest bookie, and no candidate's chance is ever zero.

Unknown loads: a bookie without a fresh report gets the mean weight of the known ones
(neither preferred nor avoided). When most candidates are unknown (fewer than half fresh),
the choice is uniformly random, as BookKeeper's disk-weighted placement does without
information. A fresh report with ``read_only=True`` makes the bookie unusable (the registry
may lag the bookie's own state by a session timeout); a stale one is ignored like the rest
of that report, since the registry is then the newer source.

Racks still come first: this policy is rack-aware (rackaware.py), and the weights choose
among the bookies of each rack, or among all candidates when they share one rack.

Invariants:

- every candidate keeps a chance to be picked (at least a tenth of the best weight);
- a bookie without a fresh report gets the mean weight of the known ones (or, when fewer than
  half are fresh, every candidate is picked at random).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping, Sequence

from minipulsar.bookkeeper.cluster_view import BookieLoadReport, ClusterView
from minipulsar.bookkeeper.rackaware import RackawareEnsemblePlacementPolicy

JOURNAL_SHARE = 0.7
DISK_SHARE = 0.3
JOURNAL_MEAN_MIN_BYTES_PER_S = 1_000_000.0
"""Below an average of 1 MB/s journals count as idle: differences are noise, not load."""
DISK_MEAN_MIN_FRACTION = 0.05
LOAD_SOFTENING = 0.2
"""Keeps an idle bookie's weight finite (1 / 0.2 = 5) so it is not the only choice."""
WEIGHT_FLOOR_FRACTION = 0.1
"""Every candidate gets at least this fraction of the best one's weight (BP-65's floor of 10/100)."""
KNOWN_FRACTION_MIN = 0.5
"""Below this fraction of candidates with fresh reports, place at random."""


class LoadAwareEnsemblePlacementPolicy(RackawareEnsemblePlacementPolicy):
    """Prefers lightly loaded bookies by weighted roulette (see the module docstring)."""

    def __init__(self, rng: random.Random | None = None, stale_after_s: float = 15.0) -> None:
        super().__init__(rng)
        if stale_after_s <= 0:
            raise ValueError(f"stale_after_s must be > 0, got {stale_after_s}")
        self.stale_after_s = stale_after_s

    def unusable(self, view: ClusterView) -> frozenset[str]:
        """Bookies whose fresh load report says read-only."""
        reports = fresh_reports(view, self.stale_after_s)
        return frozenset(bookie for bookie, report in reports.items() if report.read_only)

    def weights(self, candidates: Sequence[str], view: ClusterView) -> Mapping[str, float] | None:
        return load_weights(candidates, view, self.stale_after_s)


def fresh_reports(view: ClusterView, stale_after_s: float) -> dict[str, BookieLoadReport]:
    """The reports received at most ``stale_after_s`` before ``view.now_s``."""
    return {
        bookie: report for bookie, report in view.loads.items() if view.now_s - report.received_at_s <= stale_after_s
    }


def load_weights(candidates: Sequence[str], view: ClusterView, stale_after_s: float) -> dict[str, float] | None:
    """Roulette weight per candidate, or None (uniform) when fewer than half have a fresh report.

    Invariant: every weight is > 0 and at least :data:`WEIGHT_FLOOR_FRACTION` of the largest.
    """
    reports = fresh_reports(view, stale_after_s)
    known = {bookie: reports[bookie] for bookie in candidates if bookie in reports}
    if not known or len(known) < KNOWN_FRACTION_MIN * len(candidates):
        return None
    journal_mean = max(
        statistics.fmean(r.journal_load_bytes_per_s for r in known.values()), JOURNAL_MEAN_MIN_BYTES_PER_S
    )
    disk_mean = max(statistics.fmean(_disk_fraction(r) for r in known.values()), DISK_MEAN_MIN_FRACTION)
    raw = {
        bookie: 1.0
        / (
            LOAD_SOFTENING
            + JOURNAL_SHARE * r.journal_load_bytes_per_s / journal_mean
            + DISK_SHARE * _disk_fraction(r) / disk_mean
        )
        for bookie, r in known.items()
    }
    floor = WEIGHT_FLOOR_FRACTION * max(raw.values())
    weights = {bookie: max(weight, floor) for bookie, weight in raw.items()}
    unknown_weight = statistics.fmean(weights.values())
    return {bookie: weights.get(bookie, unknown_weight) for bookie in candidates}


def _disk_fraction(report: BookieLoadReport) -> float:
    return min(max(report.ledger_dirs_used_fraction, 0.0), 1.0)
