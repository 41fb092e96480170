"""The ``ensemblePlacementPolicy`` setting: a policy by its name, short or BookKeeper's full one.

Invariant: only the three policies minipulsar has are accepted; any other name is a
ConfigError naming them.
"""

from __future__ import annotations

import random

from minipulsar.bookkeeper.load_aware import LoadAwareEnsemblePlacementPolicy
from minipulsar.bookkeeper.placement import DefaultEnsemblePlacementPolicy, EnsemblePlacementPolicy
from minipulsar.bookkeeper.rackaware import RackawareEnsemblePlacementPolicy
from minipulsar.errors import ConfigError

BOOKKEEPER_CLIENT_PACKAGE = "org.apache.bookkeeper.client."
"""BookKeeper's package prefix: ``ensemblePlacementPolicy`` may name a class the Java way."""


def placement_policy(
    name: str, rng: random.Random | None = None, *, load_stale_after_s: float = 15.0
) -> EnsemblePlacementPolicy:
    """The policy the ``ensemblePlacementPolicy`` setting names (short or ``org.apache.bookkeeper.client.`` name).

    Args:
        load_stale_after_s: load-aware only: a load report older than this counts as unknown
            (the caller derives it from ``bookieLoadPollIntervalSeconds``, e.g. three polls).

    Raises:
        ConfigError: an unknown policy name.
    """
    short_name = name.removeprefix(BOOKKEEPER_CLIENT_PACKAGE)
    if short_name == "DefaultEnsemblePlacementPolicy":
        return DefaultEnsemblePlacementPolicy(rng)
    if short_name == "RackawareEnsemblePlacementPolicy":
        return RackawareEnsemblePlacementPolicy(rng)
    if short_name == "LoadAwareEnsemblePlacementPolicy":
        return LoadAwareEnsemblePlacementPolicy(rng, stale_after_s=load_stale_after_s)
    raise ConfigError(
        f"ensemblePlacementPolicy: unknown policy {name!r}; expected DefaultEnsemblePlacementPolicy, "
        f"RackawareEnsemblePlacementPolicy or LoadAwareEnsemblePlacementPolicy"
    )
