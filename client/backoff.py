"""Backoff between retries: exponential from ``initial_s`` to ``max_s``, with jitter.

Pulsar's client ``Backoff``: the delay doubles per failure from 100 ms up to a cap (30 s in
the versions the reference cites) and a random part is taken off, so that a herd of clients
that lost the same broker at the same instant does not come back at the same instant.
Here each delay is drawn uniformly from ``[delay / 2, delay]`` ("equal jitter"): never
more than the exponential schedule, never less than half of it.
"""

from __future__ import annotations

import random

INITIAL_BACKOFF_S = 0.1  # Pulsar: initialBackoffIntervalNanos = 100 ms
MAX_BACKOFF_S = 30.0  # Pulsar: maxBackoffIntervalNanos (30 s in older clients, 60 s in newer)


class Backoff:
    """Invariant: ``next()`` returns a value in ``[min(d, max_s) / 2, min(d, max_s)]`` where
    ``d = initial_s * 2**failures_so_far``; ``reset()`` starts over."""

    __slots__ = ("_next_s", "_random", "initial_s", "max_s")

    def __init__(
        self, initial_s: float = INITIAL_BACKOFF_S, max_s: float = MAX_BACKOFF_S, rng: random.Random | None = None
    ) -> None:
        if not 0 < initial_s <= max_s:
            raise ValueError(f"backoff needs 0 < initial_s <= max_s, got {initial_s}, {max_s}")
        self.initial_s = initial_s
        self.max_s = max_s
        self._next_s = initial_s
        self._random = rng or random.Random()

    def next(self) -> float:
        """The delay before the next attempt."""
        delay_s = self._next_s
        self._next_s = min(self._next_s * 2, self.max_s)
        return delay_s - self._random.uniform(0, delay_s / 2)

    def reset(self) -> None:
        self._next_s = self.initial_s
