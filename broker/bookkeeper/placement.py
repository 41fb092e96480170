"""Ensemble placement: which bookies a new ledger uses.

First cut: BookKeeper's DefaultEnsemblePlacementPolicy — a random choice among the writable
bookies registered under ``/ledgers/available`` (read-only ones live one level down, under
``readonly``, and are skipped). Rack-aware and load-aware policies come later.
"""

from __future__ import annotations

import random

from minipulsar.errors import NotEnoughBookiesError
from minipulsar.metadata.store import MetadataStore

AVAILABLE_PATH = "/ledgers/available"
READONLY_NAME = "readonly"


async def writable_bookies(store: MetadataStore) -> list[str]:
    return [name for name in await store.children(AVAILABLE_PATH) if name != READONLY_NAME]


class DefaultEnsemblePlacementPolicy:
    def __init__(self, store: MetadataStore, rng: random.Random | None = None) -> None:
        self._store = store
        self._rng = rng or random.Random()

    async def new_ensemble(self, ensemble_size: int, exclude: set[str] = frozenset()) -> list[str]:
        """``ensemble_size`` distinct writable bookies.

        Raises:
            NotEnoughBookiesError: fewer writable bookies than the ensemble needs.
        """
        candidates = [b for b in await writable_bookies(self._store) if b not in exclude]
        if len(candidates) < ensemble_size:
            raise NotEnoughBookiesError(
                f"need {ensemble_size} writable bookies, {len(candidates)} available: {sorted(candidates)}")
        return self._rng.sample(candidates, ensemble_size)
