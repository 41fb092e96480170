"""This broker's load reporter: builds its ``LocalBrokerData`` and writes it when it matters.

Every ``loadBalancerReportUpdateMinIntervalMillis`` (Pulsar: a fixed 5 s) the reporter rebuilds
the report and writes it to its ephemeral ``/loadbalance/brokers/{host}:{webport}`` key when
:func:`~broker.loadbalance.load_report.needs_update` says so (15 minutes passed, or a figure
moved by 10 %), or when the key is not the one it wrote last (missing, or rewritten by the
broker's registration after a new metadata session). CPU and memory are re-sampled every
``loadBalancerHostUsageCheckIntervalMinutes``.

Invariant: ``last_written`` is what the key holds as far as this broker knows, and
``_written_version`` the key's version after that write.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from minipulsar.broker.loadbalance.bundle_stats import collect_bundle_stats, owned_bundle_names
from minipulsar.broker.loadbalance.host_usage import MB, HostUsage
from minipulsar.broker.loadbalance.load_report import LocalBrokerData, needs_update
from minipulsar.broker.loadbalance.resource_usage import SystemResourceUsage
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings
from minipulsar.errors import MiniPulsarError

if TYPE_CHECKING:
    from minipulsar.broker.service import BrokerService

log = logging.getLogger(__name__)

BROKERS_PATH = "/loadbalance/brokers"


class LoadReporter:
    def __init__(
        self,
        service: BrokerService,
        settings: LoadBalancerSettings,
        written: Callable[[LocalBrokerData], None] = lambda _: None,
    ) -> None:
        self._service = service
        self._settings = settings
        self._written = written
        self.host = HostUsage(settings.nic_speed_gbps)
        self.current: LocalBrokerData | None = None
        self.last_written: LocalBrokerData | None = None
        self.writes = 0
        self._written_at = -float("inf")
        self._written_version: int | None = None
        self._sampled_at = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    @property
    def path(self) -> str:
        return f"{BROKERS_PATH}/{self._service.broker_id}"

    async def start(self) -> None:
        await self.host.start()
        await self.update(force=True)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        interval_s = self._settings.report_update_min_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                if time.monotonic() - self._sampled_at >= self._settings.host_usage_check_interval_minutes * 60:
                    await self.host.sample()
                    self._sampled_at = time.monotonic()
                await self.update()
            except MiniPulsarError as error:  # metadata store unreachable: the next tick retries
                log.info("load report not written: %s", error)
            except Exception:  # a bug here must not stop the reports for good
                log.exception("load report update failed")

    def build(self) -> LocalBrokerData:
        """The report as of now (no I/O)."""
        service = self._service
        namespaces = getattr(service, "namespaces", None)
        stats = collect_bundle_stats(service.loaded_topics(), namespaces)
        host = self.host
        throughput_in = sum(s.msg_throughput_in for s in stats.values())
        throughput_out = sum(s.msg_throughput_out for s in stats.values())
        config = service.config
        direct_limit = (config.managed_ledger_cache_size_mb + max(config.max_message_publish_buffer_size_mb, 0)) * MB
        usage = SystemResourceUsage(
            host.cpu,
            host.memory,
            host.direct_memory(service.cache.size_bytes + service.publish_buffer.size_bytes, direct_limit),
            host.bandwidth(throughput_in),
            host.bandwidth(throughput_out),
        )
        return LocalBrokerData.build(
            web_service_url=service.web_service_url,
            pulsar_service_url=service.service_url,
            cluster=config.cluster_name,
            usage=usage,
            bundles=owned_bundle_names(namespaces),
            last_stats=stats,
            last_update_ms=int(time.time() * 1000),
        )

    async def update(self, force: bool = False) -> bool:
        """Rebuild the report; write it if needed. True when written."""
        store = self._service.store
        assert store is not None
        current = self.current = self.build()
        elapsed_s = time.monotonic() - self._written_at
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
        self.last_written, self._written_at, self._written_version = report, time.monotonic(), stat.version
        self.writes += 1
        self._written(report)
        return True
