"""LeastResourceUsageWithWeight (Pulsar PR 16281, PIP-181 — WeChat's fix).

Per broker keep the same moving average of the weighted max resource usage as
ThresholdShedder (restarted when the broker has no bundle or no traffic); pick at random among
the brokers at least ``loadBalancerAverageResourceUsageDifferenceThresholdPercentage`` (10)
points below the candidates' average, or among all candidates when none is. Random choice
among the clearly-underloaded spreads a burst of placements instead of piling them on the one
minimum. As in Pulsar, every call advances the averages (so many placements in one cycle pull
them towards the current reports).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from minipulsar.broker.loadbalance.bundle_data import BundleData
from minipulsar.broker.loadbalance.load_data import LoadData
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings


class LeastResourceUsageWithWeight:
    name = "LeastResourceUsageWithWeight"

    def __init__(self, settings: LoadBalancerSettings, rng: random.Random | None = None) -> None:
        self._settings = settings
        self._rng = rng or random.Random()
        self.averages: dict[str, float] = {}

    def _update(self, broker: str, load_data: LoadData) -> float:
        local = load_data.brokers[broker].local
        previous = self.averages.get(broker)
        if not local.bundles or (local.msg_rate_in == 0 and local.msg_rate_out == 0):
            previous = None  # restarted or idle: its history says nothing about now
        usage = local.max_resource_usage_with_weight(self._settings.weights)
        h = self._settings.history_resource_percentage
        self.averages[broker] = usage if previous is None else h * previous + (1 - h) * usage
        return self.averages[broker]

    def select_broker(
        self, candidates: Sequence[str], bundle: str, bundle_data: BundleData, load_data: LoadData
    ) -> str | None:
        if not candidates:
            return None
        for broker in [b for b in self.averages if b not in load_data.brokers]:
            del self.averages[broker]
        ordered = sorted(candidates)
        usages = {b: self._update(b, load_data) for b in ordered}
        avg = sum(usages.values()) / len(usages)
        margin = self._settings.average_usage_difference_pct / 100.0
        best = [b for b in ordered if usages[b] + margin <= avg]
        return self._rng.choice(best or ordered)
