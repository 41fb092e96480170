"""Ensemble placement: which bookies a new ledger (or an ensemble change) uses.

Policies are pure: a decision is a function of a :class:`ClusterView` snapshot and the
policy's random generator, nothing else (no I/O, no clock, no asyncio), so brokers can be
simulated and tested with hand-made views and a seeded ``random.Random``.

Invariants every policy keeps:

- a new ensemble is ``ensemble_size`` *distinct* bookies from ``view.writable``;
- a bookie that is read-only, quarantined or in ``exclude`` is never chosen, not even by
  :func:`select_ensemble`'s fallback, which only drops the quarantine (BookKeeper retries
  ``newEnsemble`` "including quarantined bookies" when excluding them leaves too few);
- a replacement is never already in the ensemble;
- too few candidates raise :class:`NotEnoughBookiesError` saying how many were needed,
  how many were available, and where the others went;
- candidates are considered in sorted order, so a seeded generator gives the same choice in
  every process (frozenset iteration order depends on ``PYTHONHASHSEED``).

The ``ensemblePlacementPolicy`` setting names the policy (:mod:`.placement_policies`):
``DefaultEnsemblePlacementPolicy`` (random, here), ``RackawareEnsemblePlacementPolicy``
(rackaware.py) and ``LoadAwareEnsemblePlacementPolicy`` (load_aware.py, BP-65 / BIGO).
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import random
from collections.abc import Collection, Sequence

from minipulsar.bookkeeper.cluster_view import ClusterView
from minipulsar.errors import NotEnoughBookiesError

logger = logging.getLogger(__name__)


class EnsemblePlacementPolicy(abc.ABC):
    """Chooses bookies for new ensembles and ensemble changes.

    Subclasses narrow or weigh :meth:`candidates`; the base keeps the invariants of the
    module docstring (distinct, writable, not read-only, quarantined or excluded).
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    @abc.abstractmethod
    def new_ensemble(
        self, ensemble_size: int, write_quorum: int, ack_quorum: int, view: ClusterView, exclude: Collection[str] = ()
    ) -> list[str]:
        """E distinct bookies from ``view.writable``, never read-only, quarantined or excluded ones.

        Position matters: entry ``e`` goes to the ``write_quorum`` bookies starting at
        ``e mod E``, so a policy may arrange the list (rack-aware does).

        Raises:
            NotEnoughBookiesError: fewer candidates than ``ensemble_size`` (the message says
                how many were needed and available, and why the others were skipped).
            ValueError: quorums that do not satisfy E >= Qw >= Qa >= 1.
        """

    @abc.abstractmethod
    def replace_bookie(
        self,
        ensemble: Sequence[str],
        index: int,
        write_quorum: int,
        ack_quorum: int,
        view: ClusterView,
        exclude: Collection[str] = (),
    ) -> str:
        """A writable bookie not in ``ensemble``, ``exclude`` or quarantine, to take ``ensemble[index]``'s place.

        Raises:
            NotEnoughBookiesError: no candidate is left.
            ValueError: bad quorums or an index outside the ensemble.
        """

    def unusable(self, view: ClusterView) -> frozenset[str]:
        """Writable bookies this policy refuses for its own reasons (none here)."""
        return frozenset()

    def candidates(self, view: ClusterView, exclude: Collection[str] = ()) -> list[str]:
        """Bookies a new ensemble may use, sorted: writable, not read-only, quarantined, excluded or unusable."""
        skipped = view.read_only | view.quarantined | frozenset(exclude) | self.unusable(view)
        return sorted(view.writable - skipped)

    def require_candidates(
        self, needed: int, view: ClusterView, exclude: Collection[str], *, purpose: str
    ) -> list[str]:
        """:meth:`candidates`, or NotEnoughBookiesError when fewer than ``needed`` remain."""
        candidates = self.candidates(view, exclude)
        require_candidates(needed, candidates, view, exclude, purpose=purpose, unusable=self.unusable(view))
        return candidates


class DefaultEnsemblePlacementPolicy(EnsemblePlacementPolicy):
    """BookKeeper's default: a uniformly random choice among the candidates."""

    def new_ensemble(
        self, ensemble_size: int, write_quorum: int, ack_quorum: int, view: ClusterView, exclude: Collection[str] = ()
    ) -> list[str]:
        check_quorums(ensemble_size, write_quorum, ack_quorum)
        candidates = self.require_candidates(ensemble_size, view, exclude, purpose="a new ensemble")
        return self._rng.sample(candidates, ensemble_size)

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
        return self._rng.choice(candidates)


# -- the BookKeeper client's entry points -------------------------------------------------------


def select_ensemble(
    policy: EnsemblePlacementPolicy,
    ensemble_size: int,
    write_quorum: int,
    ack_quorum: int,
    view: ClusterView,
    exclude: Collection[str] = (),
) -> list[str]:
    """``policy.new_ensemble`` without quarantined bookies, else with them (BookKeeper's fallback).

    Quarantine steers new ledgers away from a faulty bookie but never makes a ledger
    uncreatable: when excluding the quarantined leaves too few bookies, the choice is made
    again as if nothing were quarantined. Read-only and excluded bookies stay out.

    Raises:
        NotEnoughBookiesError: too few bookies even counting the quarantined ones.
    """
    try:
        return policy.new_ensemble(ensemble_size, write_quorum, ack_quorum, view, exclude)
    except NotEnoughBookiesError:
        if not view.quarantined:
            raise
        logger.info(
            "not enough bookies outside quarantine %s for an ensemble of %d; using quarantined ones",
            sorted(view.quarantined),
            ensemble_size,
        )
        return policy.new_ensemble(ensemble_size, write_quorum, ack_quorum, _unquarantined(view), exclude)


def select_replacement(
    policy: EnsemblePlacementPolicy,
    ensemble: Sequence[str],
    index: int,
    write_quorum: int,
    ack_quorum: int,
    view: ClusterView,
    exclude: Collection[str] = (),
) -> str:
    """``policy.replace_bookie`` without quarantined bookies, else with them (see :func:`select_ensemble`).

    Raises:
        NotEnoughBookiesError: no writable bookie outside the ensemble and ``exclude``.
    """
    try:
        return policy.replace_bookie(ensemble, index, write_quorum, ack_quorum, view, exclude)
    except NotEnoughBookiesError:
        if not view.quarantined:
            raise
        logger.info(
            "no bookie outside quarantine %s to replace %s; using a quarantined one",
            sorted(view.quarantined),
            ensemble[index],
        )
        return policy.replace_bookie(ensemble, index, write_quorum, ack_quorum, _unquarantined(view), exclude)


def _unquarantined(view: ClusterView) -> ClusterView:
    return dataclasses.replace(view, quarantined=frozenset())


# -- shared checks ------------------------------------------------------------------------------


def check_quorums(ensemble_size: int, write_quorum: int, ack_quorum: int) -> None:
    """Raises ValueError unless E >= Qw >= Qa >= 1 (BookKeeper refuses such ledgers too)."""
    if not ensemble_size >= write_quorum >= ack_quorum >= 1:
        raise ValueError(
            f"need ensemble size >= write quorum >= ack quorum >= 1, "
            f"got E={ensemble_size} Qw={write_quorum} Qa={ack_quorum}"
        )


def check_replacement(ensemble: Sequence[str], index: int, write_quorum: int, ack_quorum: int) -> None:
    """Raises ValueError for bad quorums or an index outside ``ensemble``."""
    check_quorums(len(ensemble), write_quorum, ack_quorum)
    if not 0 <= index < len(ensemble):
        raise ValueError(f"bookie index {index} outside an ensemble of {len(ensemble)}")


def require_candidates(
    needed: int,
    candidates: Collection[str],
    view: ClusterView,
    exclude: Collection[str],
    *,
    purpose: str,
    unusable: Collection[str] = (),
) -> None:
    """Raises NotEnoughBookiesError when fewer than ``needed`` candidates remain, saying why.

    Args:
        unusable: bookies a policy dropped for its own reasons (e.g. a read-only load report).
    """
    if len(candidates) >= needed:
        return
    excluded = frozenset(exclude)
    reasons = [f"{len(view.writable)} writable"]
    for label, bookies in (
        ("read-only", view.read_only),
        ("quarantined", view.quarantined),
        ("excluded", excluded),
        ("unusable by the policy", frozenset(unusable)),
    ):
        skipped = (view.writable & bookies) - set(candidates)
        if skipped:
            reasons.append(f"{len(skipped)} {label} {sorted(skipped)}")
    raise NotEnoughBookiesError(f"{purpose} needs {needed} bookies, {len(candidates)} available ({', '.join(reasons)})")
