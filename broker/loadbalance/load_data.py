"""What the leader knows about the cluster (Pulsar's ``LoadData``): the strategies' only input.

- ``brokers``: broker id (``host:webport``) → its last report, the time averages of its
  bundles, and the bundles preallocated to it (placed, not reported yet);
- ``bundles``: bundle → its short/long-term history;
- ``recently_unloaded``: bundle → when it was last unloaded (seconds on the caller's clock);
  the shedders skip these, and the manager drops entries older than the grace period;
- ``preallocated``: bundle → the broker it was just assigned to.

Invariant: a bundle in ``preallocated`` is in that broker's ``BrokerData.preallocated`` and
nowhere else; both go once the broker reports the bundle or leaves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from minipulsar.broker.loadbalance.bundle_data import BundleData, TimeAverageBrokerData
from minipulsar.broker.loadbalance.load_report import LocalBrokerData


def namespace_of(bundle: str) -> str:
    """``tenant/ns`` of a bundle name ``tenant/ns/0xLLLLLLLL_0xHHHHHHHH``."""
    return bundle.rsplit("/", 1)[0]


@dataclass(slots=True)
class BrokerData:
    local: LocalBrokerData
    time_average: TimeAverageBrokerData = TimeAverageBrokerData()
    preallocated: dict[str, BundleData] = field(default_factory=dict)


@dataclass(slots=True)
class LoadData:
    brokers: dict[str, BrokerData] = field(default_factory=dict)
    bundles: dict[str, BundleData] = field(default_factory=dict)
    recently_unloaded: dict[str, float] = field(default_factory=dict)
    preallocated: dict[str, str] = field(default_factory=dict)

    # -- updates (the manager's updateAll) ------------------------------------------------------

    def update_reports(self, reports: Mapping[str, LocalBrokerData]) -> None:
        """Take the brokers' current reports: brokers gone lose their preallocations, bundles a
        broker now reports stop being preallocated."""
        for broker in list(self.brokers):
            if broker not in reports:
                for bundle in self.brokers.pop(broker).preallocated:
                    self.preallocated.pop(bundle, None)
        for broker, local in reports.items():
            data = self.brokers.get(broker)
            if data is None:
                self.brokers[broker] = BrokerData(local)
            else:
                data.local = local
        for broker, data in self.brokers.items():
            for bundle in [b for b in data.preallocated if b in data.local.bundles]:
                del data.preallocated[bundle]
                if self.preallocated.get(bundle) == broker:
                    del self.preallocated[bundle]

    def update_bundle_data(self) -> None:
        """Fold every report's ``lastStats`` into the bundles' histories (one sample each) and
        recompute each broker's time averages."""
        for data in self.brokers.values():
            for bundle, stats in data.local.last_stats.items():
                history = self.bundles.get(bundle)
                if history is None:
                    history = self.bundles[bundle] = BundleData()
                history.update(stats)
        for data in self.brokers.values():
            data.time_average = TimeAverageBrokerData.of(data.local.bundles, self.bundles)

    def prune_recently_unloaded(self, now_s: float, grace_period_s: float) -> None:
        cutoff = now_s - grace_period_s
        for bundle in [b for b, at in self.recently_unloaded.items() if at < cutoff]:
            del self.recently_unloaded[bundle]

    def preallocate(self, bundle: str, broker: str) -> None:
        """Record that ``bundle`` was assigned to ``broker`` (placement counts it from now on)."""
        previous = self.preallocated.get(bundle)
        if previous is not None and previous in self.brokers:
            self.brokers[previous].preallocated.pop(bundle, None)
        self.preallocated[bundle] = broker
        self.brokers[broker].preallocated[bundle] = self.bundles.get(bundle) or BundleData()

    def forget_preallocation(self, bundle: str) -> None:
        broker = self.preallocated.pop(bundle, None)
        if broker is not None and broker in self.brokers:
            self.brokers[broker].preallocated.pop(bundle, None)

    def forget_bundle(self, bundle: str) -> None:
        """A bundle that was split: its history and preallocation go."""
        self.bundles.pop(bundle, None)
        self.forget_preallocation(bundle)

    # -- queries --------------------------------------------------------------------------------

    def owner_of(self, bundle: str) -> str | None:
        """The broker whose report lists ``bundle`` (None: unowned as far as the reports tell)."""
        for broker, data in self.brokers.items():
            if bundle in data.local.bundles:
                return broker
        return None

    def bundles_of(self, broker: str) -> set[str]:
        """Bundles ``broker`` reports plus those preallocated to it."""
        data = self.brokers[broker]
        return set(data.local.bundles) | set(data.preallocated)

    def bundle_history(self, bundle: str) -> BundleData:
        return self.bundles.get(bundle) or BundleData()

    def namespace_bundle_counts(self, brokers: Iterable[str], namespace: str) -> dict[str, int]:
        """Per broker, how many bundles of ``namespace`` it serves or is about to."""
        return {b: sum(1 for bundle in self.bundles_of(b) if namespace_of(bundle) == namespace) for b in brokers}
