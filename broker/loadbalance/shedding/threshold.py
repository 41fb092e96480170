"""ThresholdShedder (Pulsar PR 6772, BIGO; Pulsar's default shedder since 2.10).

Each cycle, per broker: ``h ← first ? u : H·h + (1 − H)·u`` with ``u`` the weighted max resource
usage and ``H = loadBalancerHistoryResourcePercentage`` (0.9). A broker with
``h ≥ avg(h) + loadBalancerBrokerThresholdShedderPercentage`` sheds its largest bundles until
``(h − avg − threshold + 5 %)`` of its throughput is picked — unless that is under
``loadBalancerBundleUnloadMinThroughputThreshold`` (10 MB/s). With ``lowerBoundarySheddingEnabled``
(PR 17456), when nothing was picked and some broker is below ``avg − threshold``, the busiest
broker sheds ``threshold / 2`` of its throughput.

The moving average is the point (a single sample does not move bundles) and the weakness
(PIP-364): after a shed it still remembers the old load, so it keeps shedding.
"""

from __future__ import annotations

from minipulsar.broker.loadbalance.load_data import LoadData
from minipulsar.broker.loadbalance.settings import MB, LoadBalancerSettings
from minipulsar.broker.loadbalance.shedding.base import OVERLOADED, UNDERLOADED, Unload, pick_by_throughput

MARGIN = 0.05


class BrokerUsageHistory:
    """Per broker, the moving average of its weighted max resource usage (fraction)."""

    def __init__(self, settings: LoadBalancerSettings) -> None:
        self._settings = settings
        self.averages: dict[str, float] = {}

    def update(self, load_data: LoadData) -> dict[str, float]:
        """Fold in every broker's current report; brokers gone are forgotten."""
        history = self._settings.history_resource_percentage
        for broker in [b for b in self.averages if b not in load_data.brokers]:
            del self.averages[broker]
        for broker, data in load_data.brokers.items():
            usage = data.local.max_resource_usage_with_weight(self._settings.weights)
            previous = self.averages.get(broker)
            self.averages[broker] = usage if previous is None else history * previous + (1 - history) * usage
        return self.averages


class ThresholdShedder:
    name = "ThresholdShedder"

    def __init__(self, settings: LoadBalancerSettings) -> None:
        self._settings = settings
        self.history = BrokerUsageHistory(settings)

    def find_bundles_for_unloading(self, load_data: LoadData, now_s: float) -> list[Unload]:
        averages = self.history.update(load_data)
        if not averages:
            return []
        avg = sum(averages.values()) / len(averages)
        if avg == 0:
            return []
        threshold = self._settings.threshold_shedder_pct / 100.0
        unloads: list[Unload] = []
        for broker in sorted(averages):
            if averages[broker] >= avg + threshold:
                unloads.extend(self._shed(broker, load_data, averages[broker] - avg - threshold + MARGIN, OVERLOADED))
        if not unloads and self._settings.lower_boundary_shedding_enabled:
            unloads = self._shed_for_underloaded(load_data, averages, avg, threshold)
        return unloads

    def _shed(self, broker: str, load_data: LoadData, fraction: float, reason: str) -> list[Unload]:
        data = load_data.brokers[broker]
        need = data.local.msg_throughput * fraction
        if need < self._settings.bundle_unload_min_throughput_mb * MB or len(data.local.bundles) <= 1:
            return []
        return [Unload(broker, bundle, reason) for bundle in pick_by_throughput(data, load_data, need)]

    def _shed_for_underloaded(
        self, load_data: LoadData, averages: dict[str, float], avg: float, threshold: float
    ) -> list[Unload]:
        """PR 17456: someone is below the band while nobody is above it — take a little from
        the busiest broker (Pulsar advances the averages once more here; we do not)."""
        if not any(h < avg - threshold for h in averages.values()):
            return []
        busiest = max(sorted(averages), key=lambda b: averages[b])
        if averages[busiest] <= avg - threshold:
            return []
        return self._shed(busiest, load_data, threshold * 0.5, UNDERLOADED)
