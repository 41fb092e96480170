"""This broker's load reporter: builds its ``LocalBrokerData`` and writes it when it matters.

Every ``loadBalancerReportUpdateMinIntervalMillis`` (Pulsar: a fixed 5 s) the reporter rebuilds
the report and writes it to its ephemeral ``/loadbalance/brokers/{host}:{webport}`` key when
:func:`~broker.loadbalance.load_report.needs_update` says so (15 minutes passed, or a figure
moved by 10 %), or when the key is not the one it wrote last (missing, or rewritten by the
broker's registration after a new metadata session). CPU and memory are re-sampled every
``loadBalancerHostUsageCheckIntervalMinutes``. The per-bundle stats (``lastStats``) are those of
the broker's last stats round (``statsUpdateFrequencyInSecs``, as in Pulsar): a report never
walks every topic.

Invariant: ``last_written`` is what the key holds as far as this broker knows, and
``_written_version`` the key's version after that write.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from minipulsar.broker.identity import BrokerIdentity
from minipulsar.broker.loadbalance.bundle_stats import OwnedBundles, collect_bundle_stats, owned_bundle_names
from minipulsar.broker.loadbalance.host_usage import HostUsage
from minipulsar.broker.loadbalance.load_report import LocalBrokerData, NamespaceBundleStats, needs_update
from minipulsar.broker.loadbalance.resource_usage import SystemResourceUsage
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings
from minipulsar.broker.topics.registry import LoadedTopics
from minipulsar.clock import MONOTONIC, Clock
from minipulsar.errors import MiniPulsarError
from minipulsar.metadata import MetadataStore
from minipulsar.supervision import Periodic

log = logging.getLogger(__name__)

BROKERS_PATH = "/loadbalance/brokers"


class DirectBuffer(Protocol):
    """Memory the broker holds outside the interpreter's objects (entry cache, publish buffer)."""

    @property
    def size_bytes(self) -> int: ...

    @property
    def max_bytes(self) -> int:
        """Its limit; 0 or less: none."""
        ...


class LoadReporter:
    """Args:
    store: where the report is written.
    identity: this broker (the report's key and URLs).
    settings: the load balancer's knobs.
    cluster_name: the report's cluster.
    topics: the topics loaded here (their rates make the bundle stats).
    bundles: the bundles this broker serves.
    direct_buffers: what counts as direct memory, and its limit (the sum of theirs).
    """

    def __init__(
        self,
        store: MetadataStore,
        identity: BrokerIdentity,
        settings: LoadBalancerSettings,
        cluster_name: str,
        topics: LoadedTopics,
        bundles: OwnedBundles,
        direct_buffers: Sequence[DirectBuffer],
        *,
        written: Callable[[LocalBrokerData], None] = lambda _: None,
        clock: Clock = MONOTONIC,
        bundle_stats: Callable[[], dict[str, NamespaceBundleStats]] | None = None,
    ) -> None:
        """``bundle_stats``: the per-bundle sums of the last stats round (the broker's stats
        updater), so that a report every few seconds does not walk every topic; None: summed
        from ``topics`` at each build."""
        self._store = store
        self._identity = identity
        self._settings = settings
        self._cluster_name = cluster_name
        self._topics = topics
        self._bundles = bundles
        self._direct_buffers = direct_buffers
        self._written = written
        self._clock = clock
        self._bundle_stats = bundle_stats
        self.host = HostUsage(settings.nic_speed_gbps)
        self.current: LocalBrokerData | None = None
        self.last_written: LocalBrokerData | None = None
        self.writes = 0
        self._written_at = -float("inf")
        self._written_version: int | None = None
        self._sampled_at = clock()
        self._periodic = Periodic(
            "load report update", settings.report_update_min_interval_ms / 1000, self._tick, logger=log
        )

    @property
    def path(self) -> str:
        return f"{BROKERS_PATH}/{self._identity.broker_id}"

    async def start(self) -> None:
        await self.host.start()
        await self.update(force=True)
        self._periodic.start()

    async def close(self) -> None:
        await self._periodic.stop()

    async def _tick(self) -> None:
        """Every ``loadBalancerReportUpdateMinIntervalMillis``: re-sample the host when due, then
        write the report if it changed enough."""
        try:
            if self._clock() - self._sampled_at >= self._settings.host_usage_check_interval_minutes * 60:
                await self.host.sample()
                self._sampled_at = self._clock()
            await self.update()
        except MiniPulsarError as error:  # metadata store unreachable: the next tick retries
            log.info("load report not written: %s", error)

    def build(self) -> LocalBrokerData:
        """The report as of now (no I/O)."""
        if self._bundle_stats is not None:
            stats = self._bundle_stats()
        else:
            stats = collect_bundle_stats(self._topics.loaded_topics(), self._bundles)
        host = self.host
        throughput_in = sum(s.msg_throughput_in for s in stats.values())
        throughput_out = sum(s.msg_throughput_out for s in stats.values())
        direct_used = sum(buffer.size_bytes for buffer in self._direct_buffers)
        direct_limit = sum(max(buffer.max_bytes, 0) for buffer in self._direct_buffers)
        usage = SystemResourceUsage(
            host.cpu,
            host.memory,
            host.direct_memory(direct_used, direct_limit),
            host.bandwidth(throughput_in),
            host.bandwidth(throughput_out),
        )
        return LocalBrokerData.build(
            web_service_url=self._identity.web_service_url,
            pulsar_service_url=self._identity.service_url,
            cluster=self._cluster_name,
            usage=usage,
            bundles=owned_bundle_names(self._bundles),
            last_stats=stats,
            last_update_ms=int(time.time() * 1000),
        )

    async def update(self, force: bool = False) -> bool:
        """Rebuild the report; write it if needed. True when written."""
        store = self._store
        current = self.current = self.build()
        elapsed_s = self._clock() - self._written_at
        if not force and not needs_update(
            self.last_written,
            current,
            elapsed_s,
            self._settings.report_update_threshold_pct,
            self._settings.report_update_max_interval_minutes,
        ):
            found = await store.get(self.path)
            if found is not None and found.version == self._written_version:
                return False
            log.info(
                "load report key %s was %s; writing it again", self.path, "missing" if found is None else "rewritten"
            )
        report = current.with_changes_since(self.last_written)
        stat = await store.put(self.path, report.to_bytes(), ephemeral=True)
        self.last_written, self._written_at, self._written_version = report, self._clock(), stat.version
        self.writes += 1
        self._written(report)
        return True
