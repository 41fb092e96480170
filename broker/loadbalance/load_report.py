"""A broker's load report (Pulsar's ``LocalBrokerData``) and the rule for when to rewrite it.

The report is the JSON value of the broker's ephemeral ``/loadbalance/brokers/{host}:{webport}``
key, with Pulsar's field names: service URLs, five resource usages, aggregate
message rates and throughputs, counts, the owned bundles and per-bundle stats (``lastStats``).
Invariant: the aggregates are the sums over ``lastStats`` — :meth:`LocalBrokerData.build`
computes them, nothing else sets them.

:func:`needs_update` is Pulsar's ``needBrokerDataUpdate`` (§1.3): write when the last write is
older than ``loadBalancerReportUpdateMaxIntervalMinutes`` or when any figure moved by more than
``loadBalancerReportUpdateThresholdPercentage``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from minipulsar.broker.loadbalance.resource_usage import ResourceUsage, ResourceWeights, SystemResourceUsage


@dataclass(frozen=True, slots=True)
class NamespaceBundleStats:
    """One bundle's traffic on its owner, summed over the bundle's loaded topics."""

    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_in: float = 0.0
    """Bytes per second published."""
    msg_throughput_out: float = 0.0
    """Bytes per second dispatched."""
    topics: int = 0
    consumer_count: int = 0
    producer_count: int = 0
    cache_size: int = 0

    @property
    def msg_rate(self) -> float:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def msg_throughput(self) -> float:
        return self.msg_throughput_in + self.msg_throughput_out

    def to_json(self) -> dict[str, Any]:
        return {
            "msgRateIn": self.msg_rate_in,
            "msgRateOut": self.msg_rate_out,
            "msgThroughputIn": self.msg_throughput_in,
            "msgThroughputOut": self.msg_throughput_out,
            "topics": self.topics,
            "consumerCount": self.consumer_count,
            "producerCount": self.producer_count,
            "cacheSize": self.cache_size,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> NamespaceBundleStats:
        return cls(
            float(value.get("msgRateIn", 0.0)),
            float(value.get("msgRateOut", 0.0)),
            float(value.get("msgThroughputIn", 0.0)),
            float(value.get("msgThroughputOut", 0.0)),
            int(value.get("topics", 0)),
            int(value.get("consumerCount", 0)),
            int(value.get("producerCount", 0)),
            int(value.get("cacheSize", 0)),
        )


@dataclass(frozen=True, slots=True)
class LocalBrokerData:
    web_service_url: str = ""
    pulsar_service_url: str = ""
    cluster: str = ""
    usage: SystemResourceUsage = SystemResourceUsage()
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0
    num_topics: int = 0
    num_bundles: int = 0
    num_consumers: int = 0
    num_producers: int = 0
    bundles: frozenset[str] = frozenset()
    """Bundles this broker owns (possibly with no topic loaded yet)."""
    last_stats: Mapping[str, NamespaceBundleStats] = field(default_factory=dict)
    """Bundle → its stats, for the bundles with loaded topics."""
    last_bundle_gains: frozenset[str] = frozenset()
    last_bundle_losses: frozenset[str] = frozenset()
    last_update_ms: int = 0
    broker_version: str = "minipulsar"

    @classmethod
    def build(
        cls,
        *,
        web_service_url: str,
        pulsar_service_url: str,
        cluster: str,
        usage: SystemResourceUsage,
        bundles: frozenset[str] | set[str],
        last_stats: Mapping[str, NamespaceBundleStats],
        last_update_ms: int,
    ) -> LocalBrokerData:
        """A report whose aggregates are the sums of ``last_stats``; ``bundles`` also takes in
        every bundle that has stats (a bundle with traffic is owned)."""
        stats = list(last_stats.values())
        owned = frozenset(bundles) | frozenset(last_stats)
        return cls(
            web_service_url=web_service_url,
            pulsar_service_url=pulsar_service_url,
            cluster=cluster,
            usage=usage,
            msg_rate_in=sum(s.msg_rate_in for s in stats),
            msg_rate_out=sum(s.msg_rate_out for s in stats),
            msg_throughput_in=sum(s.msg_throughput_in for s in stats),
            msg_throughput_out=sum(s.msg_throughput_out for s in stats),
            num_topics=sum(s.topics for s in stats),
            num_bundles=len(owned),
            num_consumers=sum(s.consumer_count for s in stats),
            num_producers=sum(s.producer_count for s in stats),
            bundles=owned,
            last_stats=dict(last_stats),
            last_update_ms=last_update_ms,
        )

    def with_changes_since(self, previous: LocalBrokerData | None) -> LocalBrokerData:
        """This report with ``lastBundleGains``/``Losses`` relative to ``previous`` (the last one written)."""
        before = previous.bundles if previous is not None else frozenset()
        return replace(self, last_bundle_gains=self.bundles - before, last_bundle_losses=before - self.bundles)

    @property
    def msg_rate(self) -> float:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def msg_throughput(self) -> float:
        return self.msg_throughput_in + self.msg_throughput_out

    def max_resource_usage(self) -> float:
        return self.usage.max_resource_usage()

    def max_resource_usage_with_weight(self, weights: ResourceWeights) -> float:
        return self.usage.max_resource_usage_with_weight(weights)

    # -- JSON (Pulsar's field names) ------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        u = self.usage
        return {
            "webServiceUrl": self.web_service_url,
            "pulsarServiceUrl": self.pulsar_service_url,
            "cluster": self.cluster,
            "persistentTopicsEnabled": True,
            "nonPersistentTopicsEnabled": True,
            "cpu": u.cpu.to_json(),
            "memory": u.memory.to_json(),
            "directMemory": u.direct_memory.to_json(),
            "bandwidthIn": u.bandwidth_in.to_json(),
            "bandwidthOut": u.bandwidth_out.to_json(),
            "msgRateIn": self.msg_rate_in,
            "msgRateOut": self.msg_rate_out,
            "msgThroughputIn": self.msg_throughput_in,
            "msgThroughputOut": self.msg_throughput_out,
            "numTopics": self.num_topics,
            "numBundles": self.num_bundles,
            "numConsumers": self.num_consumers,
            "numProducers": self.num_producers,
            "bundles": sorted(self.bundles),
            "lastBundleGains": sorted(self.last_bundle_gains),
            "lastBundleLosses": sorted(self.last_bundle_losses),
            "lastStats": {bundle: stats.to_json() for bundle, stats in sorted(self.last_stats.items())},
            "lastUpdate": self.last_update_ms,
            "brokerVersionString": self.broker_version,
        }

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> LocalBrokerData:
        """Tolerant of missing fields: a broker that registered but has not reported yet shows
        its URLs and zeros."""
        usage = SystemResourceUsage(
            ResourceUsage.from_json(value.get("cpu")),
            ResourceUsage.from_json(value.get("memory")),
            ResourceUsage.from_json(value.get("directMemory")),
            ResourceUsage.from_json(value.get("bandwidthIn")),
            ResourceUsage.from_json(value.get("bandwidthOut")),
        )
        stats = {bundle: NamespaceBundleStats.from_json(s) for bundle, s in (value.get("lastStats") or {}).items()}
        return cls(
            web_service_url=str(value.get("webServiceUrl", "")),
            pulsar_service_url=str(value.get("pulsarServiceUrl", "")),
            cluster=str(value.get("cluster", "")),
            usage=usage,
            msg_rate_in=float(value.get("msgRateIn", 0.0)),
            msg_rate_out=float(value.get("msgRateOut", 0.0)),
            msg_throughput_in=float(value.get("msgThroughputIn", 0.0)),
            msg_throughput_out=float(value.get("msgThroughputOut", 0.0)),
            num_topics=int(value.get("numTopics", 0)),
            num_bundles=int(value.get("numBundles", 0)),
            num_consumers=int(value.get("numConsumers", 0)),
            num_producers=int(value.get("numProducers", 0)),
            bundles=frozenset(value.get("bundles") or ()),
            last_stats=stats,
            last_bundle_gains=frozenset(value.get("lastBundleGains") or ()),
            last_bundle_losses=frozenset(value.get("lastBundleLosses") or ()),
            last_update_ms=int(value.get("lastUpdate", 0)),
            broker_version=str(value.get("brokerVersionString", "minipulsar")),
        )

    @classmethod
    def from_bytes(cls, raw: bytes) -> LocalBrokerData:
        """Raises ValueError on bytes that are not a JSON object."""
        value = json.loads(raw.decode() if raw else "{}")
        if not isinstance(value, dict):
            raise ValueError("a broker load report must be a JSON object")
        return cls.from_json(value)


# -- when to rewrite ------------------------------------------------------------------------------


def percent_change(old: float, new: float) -> float:
    """Pulsar's ``percentChange``: ``100·|old−new|/old``; 0 when both are 0, +∞ when only old is."""
    if old == 0:
        return 0.0 if new == 0 else math.inf
    return 100.0 * abs(old - new) / old


def max_change_pct(last: LocalBrokerData, current: LocalBrokerData) -> float:
    """The largest relative change between two reports (Pulsar's ``needBrokerDataUpdate``)."""
    return max(
        100.0 * abs(last.max_resource_usage() - current.max_resource_usage()),
        percent_change(last.msg_rate, current.msg_rate),
        percent_change(last.msg_throughput, current.msg_throughput),
        percent_change(last.num_bundles, current.num_bundles),
    )


def needs_update(
    last: LocalBrokerData | None,
    current: LocalBrokerData,
    elapsed_s: float,
    threshold_pct: float,
    max_interval_minutes: float,
) -> bool:
    """True when ``current`` should be written: nothing written yet, the last write is older
    than the max interval, or some figure moved by more than ``threshold_pct``."""
    if last is None or elapsed_s > max_interval_minutes * 60.0:
        return True
    return max_change_pct(last, current) > threshold_pct
