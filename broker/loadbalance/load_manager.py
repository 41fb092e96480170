"""The load manager of one broker (Pulsar's ``ModularLoadManagerImpl``).

Every broker:

- publishes its load report (:class:`~broker.loadbalance.reporter.LoadReporter`);
- keeps a :class:`~broker.loadbalance.load_data.LoadData` of every broker's report, refreshed
  when anything changes under ``/loadbalance/brokers`` and after every reconnection of the
  metadata session (changes notified meanwhile were lost); each refresh folds one sample of
  every reported bundle into its history, as Pulsar's ``updateAll`` does;
- runs for leader (:class:`~broker.loadbalance.leader.LeaderElection`).

The leader also:

- every ``loadBalancerSheddingIntervalMinutes``: one shedding cycle
  (:func:`~broker.loadbalance.unload_planner.plan_unloads`) whose unloads go to the bundle's
  owner — :meth:`NamespaceService.unload_bundle` here, or its admin REST
  ``PUT /admin/v2/namespaces/{tenant}/{ns}/{range}/unload?destinationBroker=…`` — then, when
  ``loadBalancerAutoBundleSplitEnabled``, the split check (:mod:`.bundle_split`);
- every ``loadBalancerResourceQuotaUpdateIntervalMinutes``: writes the bundle histories to
  ``/loadbalance/bundle-data/…`` (and reads them back when it becomes leader);
- answers :meth:`select_broker_for` for the lookups of unowned bundles (the namespace service
  forwards them to the leader).

Invariants:

- shedding, splits and bundle-data writes run on the leader only;
- a bundle unloads on its owner: here through the namespace service, elsewhere through that
  broker's admin REST;
- a failed cycle is logged and the next one runs on time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from minipulsar.broker.identity import BrokerIdentity
from minipulsar.broker.loadbalance.bundle_data import (
    BROKER_TIME_AVERAGE_PATH,
    BUNDLE_DATA_PATH,
    BundleData,
    bundle_data_path,
)
from minipulsar.broker.loadbalance.bundle_split import find_bundles_to_split
from minipulsar.broker.loadbalance.leader import LeaderElection
from minipulsar.broker.loadbalance.load_data import LoadData, namespace_of
from minipulsar.broker.loadbalance.load_report import LocalBrokerData
from minipulsar.broker.loadbalance.metrics import LoadBalancerCollector, LoadBalancerCounters
from minipulsar.broker.loadbalance.placement.pipeline import select_broker
from minipulsar.broker.loadbalance.reporter import BROKERS_PATH, LoadReporter
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings
from minipulsar.broker.loadbalance.shedding.threshold import BrokerUsageHistory
from minipulsar.broker.loadbalance.strategies import create_strategies
from minipulsar.broker.loadbalance.unload_planner import PlannedUnload, plan_unloads, unload_done
from minipulsar.broker.namespace.bundles import NamespaceBundles
from minipulsar.broker.namespace.remote import RemoteAdmin
from minipulsar.clock import MONOTONIC, Clock
from minipulsar.errors import MiniPulsarError, ServiceNotReadyError
from minipulsar.metadata import MetadataStore, Notification, SessionEvent
from minipulsar.supervision import Periodic, spawn

log = logging.getLogger(__name__)


class BundleOperations(Protocol):
    """What the load manager asks of this broker's namespace service."""

    async def unload_bundle(self, bundle: str, destination_broker: str | None = None) -> None: ...

    async def split_bundle(self, bundle: str, algorithm: str | None = None, unload: bool = False) -> object: ...

    async def bundles(self, namespace: str) -> NamespaceBundles: ...


class LoadManager:
    """Args:
    store: the metadata store (reports, leader key, bundle histories).
    identity: this broker.
    settings: the load balancer's knobs.
    namespaces: this broker's namespace service, which carries out unloads and splits here.
    reporter: this broker's load reporter.
    cluster_name, expose_bundles_metrics: for the metrics (``exposeBundlesMetricsInPrometheus``).
    """

    def __init__(
        self,
        store: MetadataStore,
        identity: BrokerIdentity,
        settings: LoadBalancerSettings,
        namespaces: BundleOperations,
        reporter: LoadReporter,
        *,
        cluster_name: str,
        expose_bundles_metrics: bool = False,
        clock: Clock = MONOTONIC,
    ) -> None:
        self._store = store
        self._namespaces = namespaces
        self._cluster_name = cluster_name
        self._expose_bundles_metrics = expose_bundles_metrics
        self._clock = clock
        self.broker_id = identity.broker_id
        self.settings = settings
        self.load_data = LoadData()
        self.shedder, self.placement = create_strategies(settings)
        self.usage_history = BrokerUsageHistory(settings)
        """Moving averages of every broker's weighted usage, as the leader sees them (metrics)."""
        self.counters = LoadBalancerCounters()
        self.reporter = reporter
        self.election = LeaderElection(store, identity.broker_id, identity.web_service_url, self._leadership)
        self._collector: LoadBalancerCollector | None = None
        self._cycles = [
            self._leader_periodic("_leader_cycle", settings.shedding_interval_minutes, self._leader_cycle),
            self._leader_periodic(
                "write_bundle_data", settings.resource_quota_update_interval_minutes, self.write_bundle_data
            ),
        ]
        self._refreshing: asyncio.Task[None] | None = None
        self._taking_over: asyncio.Task[None] | None = None
        self._refresh_again = False
        self._closed = False
        self._remote: RemoteAdmin | None = None

    @property
    def is_leader(self) -> bool:
        return self.election.is_leader

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.reporter.start()
        self._store.watch(BROKERS_PATH, self._brokers_changed)
        self._store.add_session_listener(self._session_event)
        await self.refresh()
        self._collector = LoadBalancerCollector(self, self._cluster_name, self._expose_bundles_metrics)
        if self.settings.enabled:
            await self.election.start()
            for cycle in self._cycles:
                cycle.start()

    async def close(self) -> None:
        self._closed = True
        for cycle in self._cycles:
            await cycle.stop()
        tasks = [t for t in (self._refreshing, self._taking_over) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.election.close()
        await self.reporter.close()
        if self._collector is not None:
            self._collector.unregister()
        if self._remote is not None:
            await self._remote.close()

    def _leader_periodic(self, name: str, minutes: float, action: Callable[[], Awaitable[object]]) -> Periodic:
        """Every ``minutes``, on the leader only: ``action``; a failed round does not end the next."""

        async def round_() -> None:
            try:
                await action()
            except MiniPulsarError as error:
                log.warning("load manager: %s failed: %s", name, error)

        return Periodic(f"load manager: {name}", minutes * 60, round_, logger=log, skip=lambda: not self.is_leader)

    def _leadership(self, is_leader: bool) -> None:
        if is_leader and not self._closed:
            self._taking_over = spawn(self._became_leader(), name="load manager: taking over", logger=log)

    async def _became_leader(self) -> None:
        try:
            await self.read_bundle_data()
            await self.refresh()
        except MiniPulsarError as error:
            log.warning("load manager: reading the bundle histories failed: %s", error)

    # -- the view of the cluster ----------------------------------------------------------------

    def _session_event(self, event: SessionEvent) -> None:
        if event in (SessionEvent.RECONNECTED, SessionEvent.SESSION_REESTABLISHED):
            self._brokers_changed(None)  # notifications may have been lost while disconnected

    def _brokers_changed(self, notification: Notification | None) -> None:
        if self._closed:
            return
        if self._refreshing is not None and not self._refreshing.done():
            self._refresh_again = True
            return
        self._refreshing = spawn(self._refresh_rounds(), name="load manager: refresh", logger=log)

    async def _refresh_rounds(self) -> None:
        while True:
            self._refresh_again = False
            try:
                await self.refresh()
            except MiniPulsarError as error:
                log.info("load manager: refreshing the broker reports failed: %s", error)
            if not self._refresh_again or self._closed:
                return

    async def refresh(self) -> None:
        """Read every broker's report; fold one sample of each reported bundle into its history."""
        reports: dict[str, LocalBrokerData] = {}
        for broker in await self._store.children(BROKERS_PATH):
            found = await self._store.get(f"{BROKERS_PATH}/{broker}")
            if found is None:
                continue
            try:
                reports[broker] = LocalBrokerData.from_bytes(found.value)
            except (ValueError, TypeError, AttributeError) as error:
                log.warning("load report of %s is unreadable: %s", broker, error)
        self.load_data.update_reports(reports)
        self.load_data.update_bundle_data()

    def broker_web_url(self, broker_id: str) -> str | None:
        data = self.load_data.brokers.get(broker_id)
        return (data.local.web_service_url or None) if data is not None else None

    # -- placement ------------------------------------------------------------------------------

    def select_broker_for(self, bundle: str) -> str | None:
        """The broker (``host:webport``) an unowned bundle should go to; None when the load
        manager has no view (the caller then takes the bundle itself). Meaningful on the leader.
        The answer is remembered (preallocated) until that broker reports the bundle."""
        if not self.settings.enabled:
            return None
        data = self.load_data
        preallocated = data.preallocated.get(bundle)
        if preallocated is not None and preallocated in data.brokers:
            return preallocated
        started = time.perf_counter()
        chosen = select_broker(bundle, data, self.placement, self.settings)
        if chosen is not None:
            data.preallocate(bundle, chosen)
        self.counters.assignments += 1
        self.counters.assignment_seconds += time.perf_counter() - started
        return chosen

    # -- shedding -------------------------------------------------------------------------------

    async def _leader_cycle(self) -> None:
        await self.do_load_shedding()
        await self.check_bundle_split()

    async def do_load_shedding(self) -> list[PlannedUnload]:
        """One shedding cycle (leader): plan, then unload through each bundle's owner. Returns
        the unloads done."""
        if not (self.settings.enabled and self.settings.shedding_enabled):
            return []
        await self.refresh()
        self.usage_history.update(self.load_data)
        now_s = self._clock()
        done: list[PlannedUnload] = []
        for unload in plan_unloads(self.load_data, self.shedder, self.placement, self.settings, now_s):
            ok = await self._unload(unload)
            unload_done(self.load_data, unload, ok, now_s)
            if ok:
                done.append(unload)
                self.counters.unload_bundle_total[unload.reason] += 1
        self.counters.unload_broker_total += len({u.broker for u in done})
        return done

    async def _unload(self, unload: PlannedUnload) -> bool:
        log.info(
            "%s: unloading %s from %s to %s (%s)",
            self.shedder.name,
            unload.bundle,
            unload.broker,
            unload.destination,
            unload.reason,
        )
        try:
            if unload.broker == self.broker_id:
                await self._namespaces.unload_bundle(unload.bundle, destination_broker=unload.destination)
            else:
                await self._admin_put(unload.broker, unload.bundle, "unload", f"destinationBroker={unload.destination}")
        except MiniPulsarError as error:
            log.warning("unloading %s from %s failed: %s", unload.bundle, unload.broker, error)
            self.counters.unload_failures += 1
            return False
        return True

    async def _admin_put(self, broker: str, bundle: str, verb: str, query: str) -> None:
        """``PUT {broker's web URL}/admin/v2/namespaces/{tenant}/{ns}/{range}/{verb}?{query}``."""
        web_url = self.broker_web_url(broker)
        if web_url is None:
            raise ServiceNotReadyError(f"broker {broker} has no load report")
        if self._remote is None:
            self._remote = RemoteAdmin()
        await self._remote.put(f"{web_url}/admin/v2/namespaces/{bundle}/{verb}?{query}")

    # -- auto split -----------------------------------------------------------------------------

    async def check_bundle_split(self) -> list[str]:
        """Split the bundles that grew too big (leader, ``loadBalancerAutoBundleSplitEnabled``)."""
        if not (self.settings.enabled and self.settings.auto_bundle_split_enabled) or len(self.load_data.brokers) < 2:
            return []  # as Pulsar: with one broker a split balances nothing
        counts = await self._namespace_bundle_counts()
        split: list[str] = []
        unload = self.settings.auto_unload_split_bundles
        for bundle, broker in find_bundles_to_split(self.load_data, self.settings, counts).items():
            self.load_data.forget_bundle(bundle)  # Pulsar drops the history first, split or not
            await self._delete_quietly(bundle_data_path(bundle))
            try:
                if broker == self.broker_id:
                    await self._namespaces.split_bundle(bundle, unload=unload)
                else:
                    await self._admin_put(broker, bundle, "split", f"unload={str(unload).lower()}")
            except MiniPulsarError as error:
                log.warning("splitting %s on %s failed: %s", bundle, broker, error)
                continue
            log.info("split %s (owner %s, unload=%s)", bundle, broker, unload)
            self.counters.bundles_split_total += 1
            split.append(bundle)
        return split

    async def _namespace_bundle_counts(self) -> dict[str, int]:
        counts = {}
        for namespace in {namespace_of(b) for d in self.load_data.brokers.values() for b in d.local.last_stats}:
            try:
                counts[namespace] = len((await self._namespaces.bundles(namespace)).bundles)
            except MiniPulsarError:
                continue
        return counts

    # -- bundle histories in the metadata store -------------------------------------------------

    async def write_bundle_data(self) -> None:
        """Leader: every bundle's history and every broker's time averages to the store."""
        for bundle, data in list(self.load_data.bundles.items()):
            await self._store.put(bundle_data_path(bundle), data.to_bytes())
        for broker, broker_data in list(self.load_data.brokers.items()):
            await self._store.put(
                f"{BROKER_TIME_AVERAGE_PATH}/{broker}", json.dumps(broker_data.time_average.to_json()).encode()
            )

    async def read_bundle_data(self) -> None:
        """New leader: take the histories the previous leader wrote (not those known already)."""
        for tenant in await self._store.children(BUNDLE_DATA_PATH):
            for namespace in await self._store.children(f"{BUNDLE_DATA_PATH}/{tenant}"):
                for bundle_range in await self._store.children(f"{BUNDLE_DATA_PATH}/{tenant}/{namespace}"):
                    bundle = f"{tenant}/{namespace}/{bundle_range}"
                    if bundle in self.load_data.bundles:
                        continue
                    found = await self._store.get(bundle_data_path(bundle))
                    if found is None:
                        continue
                    try:
                        self.load_data.bundles[bundle] = BundleData.from_bytes(found.value)
                    except (ValueError, TypeError):
                        log.warning("bundle data of %s is unreadable; starting it afresh", bundle)

    async def _delete_quietly(self, path: str) -> None:
        try:
            await self._store.delete(path)
        except MiniPulsarError:
            pass
