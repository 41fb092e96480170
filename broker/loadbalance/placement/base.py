"""The placement strategy interface (Pulsar's ``ModularLoadManagerStrategy``).

``select_broker`` picks one of ``candidates`` (already filtered by the pipeline in
:mod:`.pipeline`) for a bundle. Pure but for its own history and random generator (seeded in
tests and in ``bench/lb_sim.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from minipulsar.broker.loadbalance.bundle_data import BundleData
from minipulsar.broker.loadbalance.load_data import LoadData


class PlacementStrategy(Protocol):
    name: str

    def select_broker(
        self, candidates: Sequence[str], bundle: str, bundle_data: BundleData, load_data: LoadData
    ) -> str | None:
        """One of ``candidates``, or None when there is none."""
        ...
