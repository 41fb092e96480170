"""The stats timer: every ``statsUpdateFrequencyInSecs`` the counters become rates.

The hot paths only bump counters (topics, producers, subscriptions, consumers, the entry
cache); this timer turns their growth since the previous round into the per-second rates the
topic stats and /metrics report until the next round, as Pulsar's stats updater does. The same
walk sums the topics of each owned bundle for the load report (Pulsar's ``getBundleStats``
likewise reads what its stats update computed): the load reporter, which looks every few
seconds, reads that sum instead of walking every topic itself.

A round walks the topics in slices of :data:`SLICE`, yielding to the event loop between
slices: with ten thousand topics a round costs tens of milliseconds of CPU, which must not
stall the publishes of every topic at once.

The round also ends the interval of what is reported per interval: each persistent topic's
write-latency buckets (in its ``update_rates``) and the broker's latency windows
(``windows``: the publish-latency summary), which roll over once the topics are done.

Invariants:

- a round's rates are over the time since the previous round, read from the clock once at
  its start;
- one topic whose rates fail to update (a bug) is logged and skipped: the other topics, the
  cache and the next round still run;
- the bundle sums are those of the last complete round (before the first, computed on demand).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Protocol

from minipulsar.broker.loadbalance.bundle_stats import OwnedBundles, add, bundle_name_of, collect_bundle_stats
from minipulsar.broker.loadbalance.bundle_stats import topic_stats as bundle_topic_stats
from minipulsar.broker.loadbalance.load_report import NamespaceBundleStats
from minipulsar.broker.topics.registry import LoadedTopics
from minipulsar.clock import MONOTONIC, Clock
from minipulsar.supervision import Periodic, guarded

log = logging.getLogger(__name__)

SLICE = 256
"""Topics updated between two yields to the event loop (a few milliseconds of work)."""


class RatedCounters(Protocol):
    def update_rates(self, elapsed_s: float) -> None: ...


class RolledWindow(Protocol):
    def rollover(self) -> None: ...


class StatsUpdater:
    def __init__(
        self,
        topics: LoadedTopics,
        cache: RatedCounters,
        interval_s: float,
        clock: Clock = MONOTONIC,
        bundles: OwnedBundles | None = None,
        windows: Sequence[RolledWindow] = (),
    ) -> None:
        """``bundles``: the owned bundles (the namespace service), to sum each one's topics; None:
        no bundle sums. ``windows``: rolled over at the end of every round."""
        self._topics = topics
        self._cache = cache
        self._windows = tuple(windows)
        self._clock = clock
        self._bundles = bundles
        self._bundle_stats: dict[str, NamespaceBundleStats] | None = None
        self._last_s = clock()
        self._periodic = Periodic("stats update", interval_s, self._round, logger=log)

    def start(self) -> None:
        self._last_s = self._clock()
        self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

    def bundle_stats(self) -> dict[str, NamespaceBundleStats]:
        """Bundle → the sum of its loaded topics' stats, as of the last round."""
        if self._bundle_stats is None:
            assert self._bundles is not None, "built without bundles"
            return collect_bundle_stats(self._topics.loaded_topics(), self._bundles)
        return self._bundle_stats

    def run_once(self) -> None:
        """One whole round now, without yielding: rates over the time since the previous round."""
        for _ in self._slices():
            pass

    async def _round(self) -> None:
        for _ in self._slices():
            await asyncio.sleep(0)

    def _slices(self) -> Iterator[None]:
        """One round; yields between slices of :data:`SLICE` topics."""
        now_s = self._clock()
        elapsed_s, self._last_s = now_s - self._last_s, now_s
        bundles = self._bundles
        totals: dict[str, NamespaceBundleStats] = defaultdict(NamespaceBundleStats)
        topics = self._topics.loaded_topics()
        for start in range(0, len(topics), SLICE):
            if start:
                yield
            for topic in topics[start : start + SLICE]:
                guarded(log, f"{topic.name}: updating its rates", topic.update_rates, elapsed_s)
                if bundles is not None:
                    bundle = bundle_name_of(topic, bundles)
                    if bundle is not None:
                        totals[bundle] = add(totals[bundle], bundle_topic_stats(topic))
        self._cache.update_rates(elapsed_s)
        for window in self._windows:
            window.rollover()
        if bundles is not None:
            self._bundle_stats = dict(totals)
