"""Rack-aware ensemble placement: the replicas of every entry on distinct racks.

Entry ``e`` is written to the ``write_quorum`` bookies at ensemble positions ``e mod E`` …
``e + Qw - 1 mod E``: a *write-quorum window*. Two positions share a window exactly when their
cyclic distance is below Qw, so the goal is that such positions never hold the same rack.

How an ensemble is chosen (BookKeeper's RackawareEnsemblePlacementPolicy):

1. Candidates are grouped by ``view.rack_of(bookie)``. With fewer than two racks among them
   the choice is plain random (as BookKeeper does), weighted by :meth:`weights` if any.
2. Otherwise a rack is fixed for each position first (:func:`arrange_racks`): a bounded
   depth-first search for an arrangement in which every window spans Qw distinct racks,
   preferring racks used least so far (so each next bookie comes from a rack not used yet
   while possible); if none exists or the search budget runs out, a greedy arrangement that
   gives each position the rack with the fewest clashes inside its windows, so windows span
   as many racks as the candidates allow. Either way rack ``r`` is used at most as many
   times as it has candidates, so the arrangement can always be filled.
3. Each position then takes a random bookie of its rack (weighted by :meth:`weights`).

A replacement prefers, in order: a rack with no clash in the failed position's windows and
equal to the failed bookie's rack (the ensemble keeps its spread), any rack without a clash,
then the rack with the fewest clashes.

Invariant: when an arrangement with every window on distinct racks exists among the
candidates (enough racks, each with enough bookies), :meth:`new_ensemble` returns one unless
the search spends :data:`SEARCH_NODES_MAX` steps first. Feasible layouts are found within 20
steps (checked against brute force on a few hundred random layouts with E <= 6); the budget
only bounds the time spent proving that an odd layout has none (a few ms at worst).
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence

from minipulsar.bookkeeper.cluster_view import ClusterView
from minipulsar.bookkeeper.placement import EnsemblePlacementPolicy, check_quorums, check_replacement

SEARCH_NODES_MAX = 2_000
"""Positions the rack search may try per decision before it settles for the greedy
arrangement: a few milliseconds at worst, and far more than feasible layouts need."""


class RackawareEnsemblePlacementPolicy(EnsemblePlacementPolicy):
    """Ensembles whose write-quorum windows span distinct racks (see the module docstring)."""

    def weights(self, candidates: Sequence[str], view: ClusterView) -> Mapping[str, float] | None:
        """Relative chance of each candidate within its rack; None means uniform (here, always)."""
        return None

    def new_ensemble(
        self, ensemble_size: int, write_quorum: int, ack_quorum: int, view: ClusterView, exclude: Collection[str] = ()
    ) -> list[str]:
        check_quorums(ensemble_size, write_quorum, ack_quorum)
        candidates = self.require_candidates(ensemble_size, view, exclude, purpose="a new ensemble")
        weights = self.weights(candidates, view)
        by_rack = group_by_rack(candidates, view)
        if len(by_rack) < 2:
            return self._draw(candidates, ensemble_size, weights)
        capacity = {rack: len(bookies) for rack, bookies in by_rack.items()}
        ensemble = []
        for rack in arrange_racks(ensemble_size, write_quorum, capacity, self._rng.random):
            (bookie,) = self._draw(by_rack[rack], 1, weights)
            by_rack[rack].remove(bookie)
            ensemble.append(bookie)
        assert len(set(ensemble)) == ensemble_size, ensemble
        return ensemble

    def replace_bookie(
        self,
        ensemble: Sequence[str],
        index: int,
        write_quorum: int,
        ack_quorum: int,
        view: ClusterView,
        exclude: Collection[str] = (),
    ) -> str:
        check_replacement(ensemble, index, write_quorum, ack_quorum)
        candidates = self.require_candidates(1, view, (*exclude, *ensemble), purpose=f"replacing {ensemble[index]}")
        failed_rack = view.rack_of(ensemble[index])
        clashes = Counter(view.rack_of(ensemble[j]) for j in window_neighbours(index, len(ensemble), write_quorum))

        def preference(bookie: str) -> tuple[int, int]:
            rack = view.rack_of(bookie)
            return clashes[rack], rack != failed_rack

        best = min(map(preference, candidates))
        preferred = [bookie for bookie in candidates if preference(bookie) == best]
        (bookie,) = self._draw(preferred, 1, self.weights(candidates, view))
        return bookie

    def _draw(self, pool: Sequence[str], count: int, weights: Mapping[str, float] | None) -> list[str]:
        """``count`` distinct bookies of ``pool``: uniform, or roulette by ``weights`` without replacement."""
        if weights is None:
            return self._rng.sample(pool, count)
        assert all(weights[bookie] > 0 for bookie in pool), weights
        remaining, chosen = list(pool), []
        for _ in range(count):
            cumulative = list(itertools.accumulate(weights[bookie] for bookie in remaining))
            spin = self._rng.random() * cumulative[-1]
            chosen.append(remaining.pop(min(bisect.bisect_right(cumulative, spin), len(remaining) - 1)))
        return chosen


def group_by_rack(bookies: Sequence[str], view: ClusterView) -> dict[str, list[str]]:
    """Rack → its bookies, both in the order given (sorted candidates give a stable order)."""
    by_rack: dict[str, list[str]] = defaultdict(list)
    for bookie in bookies:
        by_rack[view.rack_of(bookie)].append(bookie)
    return dict(by_rack)


def window_neighbours(position: int, ensemble_size: int, write_quorum: int) -> Iterator[int]:
    """Positions other than ``position`` that share a write-quorum window with it (cyclic distance < Qw)."""
    for other in range(ensemble_size):
        distance = abs(other - position)
        if other != position and min(distance, ensemble_size - distance) < write_quorum:
            yield other


def arrange_racks(
    ensemble_size: int,
    write_quorum: int,
    capacity: Mapping[str, int],
    random_key: Callable[[], float],
    *,
    search_nodes_max: int = SEARCH_NODES_MAX,
) -> list[str]:
    """The rack of each ensemble position (module docstring, step 2).

    Args:
        capacity: rack → how many candidate bookies it has; their sum is at least ``ensemble_size``.
        random_key: draws the random tie-break between equally good racks (``rng.random``).

    Returns:
        ``ensemble_size`` racks, rack ``r`` at most ``capacity[r]`` times; every window on
        distinct racks when the search finds such an arrangement.
    """
    assert sum(capacity.values()) >= ensemble_size, (capacity, ensemble_size)
    tie_break = {rack: random_key() for rack in sorted(capacity)}
    neighbours = [list(window_neighbours(i, ensemble_size, write_quorum)) for i in range(ensemble_size)]
    arrangement: list[str | None] = [None] * ensemble_size
    used: Counter[str] = Counter()
    nodes = 0

    def search(position: int) -> bool:
        nonlocal nodes
        if position == ensemble_size:
            return True
        nodes += 1
        if nodes > search_nodes_max:
            return False
        taken = {arrangement[j] for j in neighbours[position]}
        options = [rack for rack in capacity if used[rack] < capacity[rack] and rack not in taken]
        for rack in sorted(options, key=lambda r: (used[r], tie_break[r])):
            arrangement[position] = rack
            used[rack] += 1
            if search(position + 1):
                return True
            used[rack] -= 1
            arrangement[position] = None
        return False

    # Fewer racks than Qw: no window can be spread, so skip straight to the greedy arrangement.
    if len(capacity) >= write_quorum and search(0):
        return [rack for rack in arrangement if rack is not None]
    return _greedy_racks(ensemble_size, capacity, neighbours, tie_break)


def _greedy_racks(
    ensemble_size: int, capacity: Mapping[str, int], neighbours: Sequence[Sequence[int]], tie_break: Mapping[str, float]
) -> list[str]:
    """Each position in turn takes the rack with the fewest clashes in its windows, then the least used."""
    arrangement: list[str] = []
    used: Counter[str] = Counter()
    for position in range(ensemble_size):
        placed = [arrangement[j] for j in neighbours[position] if j < position]
        options = [rack for rack in capacity if used[rack] < capacity[rack]]
        rack = min(options, key=lambda r: (placed.count(r), used[r], tie_break[r]))
        arrangement.append(rack)
        used[rack] += 1
    return arrangement
