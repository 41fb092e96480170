"""LeastLongTermMessageRate (Pulsar's default placement).

Score = the broker's long-term message rate (in+out, summed over its bundles) plus that of the
bundles preallocated to it; a broker whose weighted max usage is above
``loadBalancerBrokerOverloadedThresholdPercentage`` scores +∞. Random among the lowest scores
(all +∞: random among all). Counting preallocations stops a burst of lookups from landing on
one broker before its report catches up. Its blind spot (WeChat): message rate is not machine
load, so paired with a resource-based shedder it may put a bundle back on a hot broker.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from minipulsar.broker.loadbalance.bundle_data import BundleData
from minipulsar.broker.loadbalance.load_data import BrokerData, LoadData
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings


class LeastLongTermMessageRate:
    name = "LeastLongTermMessageRate"

    def __init__(self, settings: LoadBalancerSettings, rng: random.Random | None = None) -> None:
        self._settings = settings
        self._rng = rng or random.Random()

    def score(self, data: BrokerData) -> float:
        if data.local.max_resource_usage_with_weight(self._settings.weights) > self._settings.overload_threshold:
            return math.inf
        preallocated = sum(b.long_term.msg_rate for b in data.preallocated.values())
        return preallocated + data.time_average.long_term_msg_rate

    def select_broker(
        self, candidates: Sequence[str], bundle: str, bundle_data: BundleData, load_data: LoadData
    ) -> str | None:
        if not candidates:
            return None
        scores = {b: self.score(load_data.brokers[b]) for b in sorted(candidates)}
        best_score = min(scores.values())
        best = [b for b, s in scores.items() if s == best_score]
        return self._rng.choice(best)
