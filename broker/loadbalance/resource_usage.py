"""One resource's usage against its limit (Pulsar's ``ResourceUsage``) and the weights that turn
a broker's five resources into the single score the strategies compare.

Units are the producer's business (CPU in percent of one core, memory in MB, bandwidth in
kbit/s): only ``usage / limit`` matters. A limit of 0 means "unknown" and reads as 0 % usage.

Invariant: a usage percent is ``100 · usage / limit``, and 0 when the limit is unknown (0).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    usage: float = 0.0
    limit: float = 0.0

    @property
    def percent_usage(self) -> float:
        """``100 · usage / limit``; 0 when the limit is unknown (≤ 0)."""
        return 100.0 * self.usage / self.limit if self.limit > 0 else 0.0

    def to_json(self) -> dict[str, float]:
        return {"usage": self.usage, "limit": self.limit}

    @classmethod
    def from_json(cls, value: object) -> ResourceUsage:
        if not isinstance(value, dict):
            return cls()
        return cls(float(value.get("usage", 0.0) or 0.0), float(value.get("limit", 0.0) or 0.0))


@dataclass(frozen=True, slots=True)
class ResourceWeights:
    """loadBalancerCPUResourceWeight, …MemoryResourceWeight, …DirectMemoryResourceWeight,
    …BandwithInResourceWeight, …BandwithOutResourceWeight (1.0 each, as PR 6772 shipped them)."""

    cpu: float = 1.0
    memory: float = 1.0
    direct_memory: float = 1.0
    bandwidth_in: float = 1.0
    bandwidth_out: float = 1.0

    def without_memory(self) -> ResourceWeights:
        """AvgShedder's score leaves heap memory out (PIP-364)."""
        return ResourceWeights(self.cpu, 0.0, self.direct_memory, self.bandwidth_in, self.bandwidth_out)


@dataclass(frozen=True, slots=True)
class SystemResourceUsage:
    """The five resources a broker reports (``LocalBrokerData.cpu`` … ``bandwidthOut``)."""

    cpu: ResourceUsage = ResourceUsage()
    memory: ResourceUsage = ResourceUsage()
    direct_memory: ResourceUsage = ResourceUsage()
    bandwidth_in: ResourceUsage = ResourceUsage()
    bandwidth_out: ResourceUsage = ResourceUsage()

    def max_resource_usage(self) -> float:
        """``max(percent usages) / 100``: OverloadShedder's and the placement overload check's figure."""
        return (
            max(
                self.cpu.percent_usage,
                self.memory.percent_usage,
                self.direct_memory.percent_usage,
                self.bandwidth_in.percent_usage,
                self.bandwidth_out.percent_usage,
            )
            / 100.0
        )

    def max_resource_usage_with_weight(self, weights: ResourceWeights) -> float:
        """``max(percent usage · weight) / 100``: the score ThresholdShedder, the placement
        strategies and AvgShedder compare."""
        return (
            max(
                self.cpu.percent_usage * weights.cpu,
                self.memory.percent_usage * weights.memory,
                self.direct_memory.percent_usage * weights.direct_memory,
                self.bandwidth_in.percent_usage * weights.bandwidth_in,
                self.bandwidth_out.percent_usage * weights.bandwidth_out,
            )
            / 100.0
        )
