"""AvgShedder (PIP-364, Pulsar PRs 22946/22949): shedder AND placement in one.

Shedding: score every broker ``100 · max(cpu, directMemory, bwIn, bwOut)`` (weighted, no heap
memory, no moving average), sort, and pair the lowest with the highest, the second lowest
with the second highest… A pair whose gap is ≥ ``loadBalancerAvgShedderLowThreshold`` (15)
counts a hit for both brokers, ≥ ``…HighThreshold`` (40) a "high" hit too; a pair fires once
a broker has ``…HitCountHighThreshold`` (2) high hits or ``…HitCountLowThreshold`` (8) hits —
a gap must persist, so one noisy sample moves nothing. A firing pair moves
``maxUnloadPercentage`` of the difference in message rate (or, if that is under
``minUnloadMessage``, in throughput) from the high broker to the low one, and the
destination is **planned**: placement sends the bundle to the low broker.

Placement: the planned broker when there is one and it is a candidate; otherwise a broker
chosen by the hash of a random number (not of the bundle, so a dead broker's bundles scatter),
remembered as the bundle's plan.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence

from minipulsar.broker.loadbalance.bundle_data import BundleData
from minipulsar.broker.loadbalance.load_data import LoadData
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings
from minipulsar.broker.loadbalance.shedding.base import BALANCED, Unload


class AvgShedder:
    name = "AvgShedder"

    def __init__(self, settings: LoadBalancerSettings, rng: random.Random | None = None) -> None:
        self._settings = settings
        self._weights = settings.weights.without_memory()
        self._rng = rng or random.Random()
        self.plan: dict[str, str] = {}
        """Bundle → the broker placement sends it to."""
        self.hits_high: dict[str, int] = {}
        self.hits_low: dict[str, int] = {}
        self.scores: dict[str, float] = {}

    # -- shedding -------------------------------------------------------------------------------

    def find_bundles_for_unloading(self, load_data: LoadData, now_s: float) -> list[Unload]:
        self.scores = {
            b: 100.0 * d.local.max_resource_usage_with_weight(self._weights) for b, d in load_data.brokers.items()
        }
        pairs = self._pairs(sorted(self.scores, key=lambda b: (self.scores[b], b)))
        if not pairs:
            self.hits_high.clear()
            self.hits_low.clear()
            return []
        unloads: list[Unload] = []
        for low, high in pairs:
            if self._fires(low, high):
                for broker in (low, high):
                    self.hits_high.pop(broker, None)
                    self.hits_low.pop(broker, None)
                unloads.extend(self._shed(low, high, load_data))
        return unloads

    def _pairs(self, ranked: list[str]) -> list[tuple[str, str]]:
        s, pairs = self._settings, []
        i, j = 0, len(ranked) - 1
        while i <= j:
            low, high = ranked[i], ranked[j]
            gap = self.scores[high] - self.scores[low]
            if gap < s.avg_shedder_low_threshold:
                for counts in (self.hits_high, self.hits_low):
                    counts.pop(low, None)
                    counts.pop(high, None)
            else:
                pairs.append((low, high))
                for broker in {low, high}:
                    self.hits_low[broker] = self.hits_low.get(broker, 0) + 1
                    if gap >= s.avg_shedder_high_threshold:
                        self.hits_high[broker] = self.hits_high.get(broker, 0) + 1
                    else:
                        self.hits_high.pop(broker, None)
            i, j = i + 1, j - 1
        return pairs

    def _fires(self, low: str, high: str) -> bool:
        s = self._settings
        return any(
            self.hits_high.get(b, 0) >= s.avg_shedder_hit_count_high_threshold
            or self.hits_low.get(b, 0) >= s.avg_shedder_hit_count_low_threshold
            for b in (low, high)
        )

    def _shed(self, low: str, high: str, load_data: LoadData) -> list[Unload]:
        s = self._settings
        low_data, high_data = load_data.brokers[low].local, load_data.brokers[high].local
        rate_need = (high_data.msg_rate - low_data.msg_rate) * s.max_unload_percentage
        tput_need = (high_data.msg_throughput - low_data.msg_throughput) * s.max_unload_percentage
        if rate_need > s.min_unload_message:
            by_rate, need = True, rate_need
        elif tput_need > s.min_unload_message_throughput:
            by_rate, need = False, tput_need
        else:
            return []
        ranked = []
        for bundle in high_data.bundles:
            if bundle in load_data.bundles and bundle not in load_data.recently_unloaded:
                short = load_data.bundles[bundle].short_term
                ranked.append((short.msg_rate if by_rate else short.msg_throughput, bundle))
        ranked.sort(key=lambda item: (-item[0], item[1]))
        unloads = []
        for traffic, bundle in ranked:
            if 0 < traffic <= need:
                unloads.append(Unload(high, bundle, BALANCED))
                self.plan[bundle] = low
                need -= traffic
        return unloads

    # -- placement ------------------------------------------------------------------------------

    def select_broker(
        self, candidates: Sequence[str], bundle: str, bundle_data: BundleData, load_data: LoadData
    ) -> str | None:
        if not candidates:
            return None
        planned = self.plan.get(bundle)
        if planned is not None and planned in candidates:
            return planned
        ranked = sorted(candidates)
        index = zlib.crc32(str(self._rng.randint(-(2**31), 2**31 - 1)).encode()) % len(ranked)
        self.plan[bundle] = ranked[index]
        return ranked[index]
