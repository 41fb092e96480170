"""What the load-balancer scenarios share: time-scaled settings, per-broker load, lookups.

The load manager runs on Pulsar's schedules scaled down by their own keys (fractions of a
minute are allowed): :data:`TIME_SCALED` is what every variant of a load-balancer scenario
sets, whatever it tests. The brokers report bandwidth against a tiny NIC
(``loadBalancerOverrideBrokerNicSpeedGbps``) so that a few hundred KB/s of lab traffic reads
as a loaded machine, and the bandwidth — not the noisy CPU figure of processes sharing two
cores — is the resource the shedders see.

Invariant: nothing here changes a broker; it reads the brokers' load reports and asks for
lookups (which make the broker asked own the bundle when it is unowned and it is the only one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from minipulsar.lab.cluster import Server
from minipulsar.lab.probes import Http
from minipulsar.lab.result import Series

TIME_SCALED: Mapping[str, object] = {
    "loadBalancerSheddingIntervalMinutes": 0.03,  # Pulsar: 1 min → 1.8 s
    "loadBalancerSheddingGracePeriodMinutes": 0.1,  # Pulsar: 30 min → 6 s
    "loadBalancerReportUpdateMinIntervalMillis": 300,
    "loadBalancerReportUpdateMaxIntervalMinutes": 0.05,  # Pulsar: 15 min → 3 s
    "loadBalancerHostUsageCheckIntervalMinutes": 0.01,
    "loadBalancerHistoryResourcePercentage": 0.5,  # Pulsar: 0.9 per minute; here per 1.8 s cycle
    "loadBalancerBundleUnloadMinThroughputThreshold": 0,  # Pulsar: 10 MB/s; lab traffic is KB/s
    "loadBalancerResourceQuotaUpdateIntervalMinutes": 0.2,
    "statsUpdateFrequencyInSecs": 0.5,
}


async def load_reports(http: Http, brokers: Sequence[Server | None]) -> list[dict[str, object] | None]:
    """Each broker's ``GET /admin/v2/broker-stats/load-report`` (None: stopped or no answer)."""
    reports: list[dict[str, object] | None] = []
    for broker in brokers:
        found = None if broker is None else await http.json(f"{broker.http_url}/admin/v2/broker-stats/load-report")
        reports.append(found if isinstance(found, dict) else None)
    return reports


def msg_rate_in(report: Mapping[str, object] | None) -> float:
    """The report's ``msgRateIn`` (0 for a stopped broker)."""
    value = (report or {}).get("msgRateIn", 0.0)
    return float(value) if isinstance(value, int | float) else 0.0


async def lookup(http: Http, broker: Server, topic: str) -> bool:
    """HTTP lookup of ``persistent://public/default/<topic>`` at ``broker`` (True: answered 200)."""
    found = await http.json(f"{broker.http_url}/lookup/v2/topic/persistent/public/default/{topic}")
    return found is not None


def window(series: Series, start_s: float, end_s: float) -> list[float]:
    return [value for at, value in series.points if start_s <= at <= end_s]
