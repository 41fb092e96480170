"""``python_gc_collection_seconds``: the pause of every cyclic garbage collection of this
process, by generation — the Python counterpart of the JVM's ``jvm_gc_collection_seconds``.

A ``gc.callbacks`` entry (:class:`GcPauses`) times each collection from its ``start`` phase to
its ``stop`` phase and counts it in plain lists; a collector exports them when /metrics is
scraped as a histogram (``_bucket{generation, le}``, ``_count``, ``_sum``; seconds, as the
name says). Every server process installs it once, at start (:func:`install`, from
:func:`minipulsar.cli.common.run_server`).

The callback takes no lock on purpose: a collection runs inside whatever allocation triggered
it, and a prometheus-client ``observe`` (a locked update) made there could wait for a lock the
interrupted code itself holds.

Invariants:

- generations 0, 1 and 2 are exported from install on, before their first collection;
- collections never nest and run with the GIL held, whatever thread triggers them: one start
  time suffices and the counts need no lock (a scrape reads them as they are);
- installed at most once per process.
"""

from __future__ import annotations

import gc
from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import CollectorRegistry
from prometheus_client.utils import floatToGoString

from minipulsar.clock import MONOTONIC, Clock

NAME = "python_gc_collection_seconds"
BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""From a 0.1 ms young collection to a multi-second full one of a huge heap."""
GENERATIONS = (0, 1, 2)


class GcPauses:
    """The ``gc.callbacks`` entry and the histogram's collector at once."""

    def __init__(self, clock: Clock = MONOTONIC) -> None:
        self._clock = clock
        self._started_s = 0.0
        self.counts = {generation: [0] * (len(BUCKETS_S) + 1) for generation in GENERATIONS}
        """Per generation, per bucket (not cumulative; the last one is +Inf)."""
        self.sums_s = dict.fromkeys(GENERATIONS, 0.0)

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started_s = self._clock()
            return
        pause_s = self._clock() - self._started_s
        generation = info.get("generation", 0)
        if generation in self.counts:
            self.counts[generation][bisect_left(BUCKETS_S, pause_s)] += 1
            self.sums_s[generation] += pause_s

    def describe(self) -> list[HistogramMetricFamily]:
        return [self._family()]

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = self._family()
        edges = [*(floatToGoString(b) for b in BUCKETS_S), "+Inf"]
        for generation in GENERATIONS:
            cumulative, buckets = 0, []
            for edge, count in zip(edges, list(self.counts[generation]), strict=True):
                cumulative += count
                buckets.append((edge, float(cumulative)))
            family.add_metric([str(generation)], buckets, self.sums_s[generation])
        yield family

    def _family(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(NAME, "Pause of each cyclic garbage collection (s)", labels=["generation"])


class _Installed:
    pauses: GcPauses | None = None


_INSTALLED = _Installed()


def install(registry: CollectorRegistry = REGISTRY) -> GcPauses:
    """Time every collection of this process from now on and export the histogram
    (idempotent: the first call's :class:`GcPauses` is returned again)."""
    if _INSTALLED.pauses is None:
        pauses = GcPauses()
        registry.register(pauses)
        gc.callbacks.append(pauses)
        _INSTALLED.pauses = pauses
    return _INSTALLED.pauses
