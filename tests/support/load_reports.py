"""Builders of load reports and LoadData for the load-balancer unit tests (no tests here)."""

from __future__ import annotations

from minipulsar.broker.loadbalance.load_data import LoadData
from minipulsar.broker.loadbalance.load_report import LocalBrokerData, NamespaceBundleStats
from minipulsar.broker.loadbalance.resource_usage import ResourceUsage, SystemResourceUsage

MB = 1024 * 1024
NS = "public/default"


def bundle(index: int, namespace: str = NS) -> str:
    return f"{namespace}/0x{index:08x}_0x{index + 1:08x}"


def stats(rate: float = 0.0, throughput: float = 0.0, topics: int = 1) -> NamespaceBundleStats:
    """Half in, half out."""
    return NamespaceBundleStats(rate / 2, rate / 2, throughput / 2, throughput / 2, topics, 1, 1)


def report(
    cpu: float = 0.0,
    memory: float = 0.0,
    direct: float = 0.0,
    bw_in: float = 0.0,
    bw_out: float = 0.0,
    bundles: dict[str, NamespaceBundleStats] | None = None,
    owned: set[str] | None = None,
    name: str = "b",
) -> LocalBrokerData:
    """A report with these percent usages and per-bundle stats."""
    usage = SystemResourceUsage(
        ResourceUsage(cpu, 100),
        ResourceUsage(memory, 100),
        ResourceUsage(direct, 100),
        ResourceUsage(bw_in, 100),
        ResourceUsage(bw_out, 100),
    )
    return LocalBrokerData.build(
        web_service_url=f"http://{name}:8080",
        pulsar_service_url=f"pulsar://{name}:6650",
        cluster="test",
        usage=usage,
        bundles=owned or set(),
        last_stats=bundles or {},
        last_update_ms=0,
    )


def load_data(reports: dict[str, LocalBrokerData], samples: int = 1) -> LoadData:
    """LoadData with these reports, each bundle's history fed ``samples`` times."""
    data = LoadData()
    data.update_reports(reports)
    for _ in range(samples):
        data.update_bundle_data()
    return data


def broker_with(
    usage: float,
    bundle_throughputs: dict[str, float],
    name: str = "b",
    rate_per_byte: float = 0.001,
    memory: float = 0.0,
    direct: float = 0.0,
    bw_in: float = 0.0,
    bw_out: float = 0.0,
) -> LocalBrokerData:
    """A broker at ``usage`` % CPU (and the other usages given) owning bundles with these
    throughputs (B/s)."""
    bundles = {b: stats(t * rate_per_byte, t) for b, t in bundle_throughputs.items()}
    return report(cpu=usage, memory=memory, direct=direct, bw_in=bw_in, bw_out=bw_out, bundles=bundles, name=name)
