"""The stats timer: every ``statsUpdateFrequencyInSecs`` the counters become rates.

The hot paths only bump counters (topics, producers, subscriptions, consumers, the entry
cache); this timer turns their growth since the previous round into the per-second rates the
topic stats and /metrics report until the next round, as Pulsar's stats updater does.

Invariants:

- a round's rates are over the time since the previous round, read from the clock;
- one topic whose rates fail to update (a bug) is logged and skipped: the other topics, the
  cache and the next round still run.
"""

from __future__ import annotations

import logging
from typing import Protocol

from minipulsar.broker.topics.registry import LoadedTopics
from minipulsar.clock import MONOTONIC, Clock
from minipulsar.supervision import Periodic, guarded

log = logging.getLogger(__name__)


class RatedCounters(Protocol):
    def update_rates(self, elapsed_s: float) -> None: ...


class StatsUpdater:
    def __init__(self, topics: LoadedTopics, cache: RatedCounters, interval_s: float, clock: Clock = MONOTONIC) -> None:
        self._topics = topics
        self._cache = cache
        self._clock = clock
        self._last_s = clock()
        self._periodic = Periodic("stats update", interval_s, self.run_once, logger=log)

    def start(self) -> None:
        self._last_s = self._clock()
        self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

    def run_once(self) -> None:
        """One round now: rates over the time since the previous round."""
        now_s = self._clock()
        elapsed_s, self._last_s = now_s - self._last_s, now_s
        for topic in self._topics.loaded_topics():
            guarded(log, f"{topic.name}: updating its rates", topic.update_rates, elapsed_s)
        self._cache.update_rates(elapsed_s)
