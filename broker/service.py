"""BrokerService: the composition root of one broker process.

It builds the broker's components, hands each what it needs, starts them and stops them; it
holds no logic of its own. What they are:

- the metadata session and the BookKeeper client;
- the entry cache and the broker-wide publish buffer, shared by every topic and connection;
- the frozen heap: loaded topics leave the garbage collector's scans (:mod:`broker.topics.frozen_heap`);
- the topics (:class:`~broker.topics.broker_topics.BrokerTopics`), loaded on the owner of their
  bundle, and the namespace service (:class:`~broker.namespace.service.NamespaceService`):
  bundles, ownership, lookup, unload;
- the load manager (:mod:`broker.loadbalance`) with its load reporter, which reads the stats
  timer's per-bundle sums (one walk of the topics per stats round, not one per report);
- the client listener, the HTTP port (admin REST, /metrics, the web console), the stats timer
  and the metrics.

Invariants:

- both ports are bound before anything that names the broker is built: the
  :class:`~broker.identity.BrokerIdentity` carries the real ports (0 in the config: any free one);
- nothing is served before the namespace service started, and the broker registers under
  ``/loadbalance/brokers`` only once both ports serve;
- a clean shutdown stops the load manager first (no shedding meanwhile), then unloads every
  bundle, so clients move to other brokers while this one still talks to them.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

from aiohttp import web

from minipulsar.bookkeeper import BookKeeper, BookKeeperSettings
from minipulsar.broker.admin import admin_routes
from minipulsar.broker.admin_bookies import ClusterBookies, bookie_routes
from minipulsar.broker.admin_namespaces import namespace_routes
from minipulsar.broker.broker_stats import broker_stats_routes
from minipulsar.broker.connection_counts import ConnectionCounts
from minipulsar.broker.console.gather import BrokerRest, ClusterGatherer, SnapshotCache
from minipulsar.broker.console.routes import console_routes
from minipulsar.broker.identity import BrokerIdentity
from minipulsar.broker.loadbalance.load_manager import LoadManager
from minipulsar.broker.loadbalance.reporter import LoadReporter
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings
from minipulsar.broker.managed_ledger import metrics as ml_metrics
from minipulsar.broker.managed_ledger.entry_cache import EntryCache
from minipulsar.broker.namespace.service import NamespaceService
from minipulsar.broker.namespace.settings import NamespaceSettings
from minipulsar.broker.publish_buffer import PublishBuffer
from minipulsar.broker.publish_latency import LatencyWindow
from minipulsar.broker.registration import BrokerRegistration
from minipulsar.broker.server import BrokerConnection, ConnectionSettings
from minipulsar.broker.stats import BrokerCollector
from minipulsar.broker.stats_updater import StatsUpdater
from minipulsar.broker.throttling import ConnectionThrottling
from minipulsar.broker.topics.broker_topics import BrokerTopics, TopicSettings
from minipulsar.broker.topics.frozen_heap import FrozenHeap
from minipulsar.broker.topics.registry import TopicMap
from minipulsar.broker.web_server import WebServer
from minipulsar.config import BrokerConfig
from minipulsar.metadata import MetadataStore, open_metadata_store
from minipulsar.net import Listener

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Components:
    """What :meth:`BrokerService.start` built once the identity was known."""

    identity: BrokerIdentity
    topics: BrokerTopics
    namespaces: NamespaceService
    registration: BrokerRegistration
    load_manager: LoadManager
    stats: StatsUpdater
    collector: BrokerCollector


class BrokerService:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.host = config.advertised_address or config.bind_address
        """The address this broker advertises in its URLs."""
        self.port = 0
        """The bound client port, once started."""
        self.http_port = 0
        """The bound HTTP port, once started."""
        self.serving = False
        """Started to the end (registered, load manager running) and not closing: what
        ``/admin/v2/brokers/health`` answers."""
        self._cache = EntryCache.from_config(config)
        self._publish_buffer = PublishBuffer.from_megabytes(config.max_message_publish_buffer_size_mb)
        self._throttling = ConnectionThrottling()
        self._connection_counts = ConnectionCounts()
        self._publish_latency = LatencyWindow()
        self._write_latency = ml_metrics.STORAGE_WRITE_LATENCY.labels(config.cluster_name)
        """Created now: exported from start, before the first add."""
        self._connection_settings = ConnectionSettings.from_config(config)
        self._listener = Listener(self._new_connection)
        self._web = WebServer()
        self._console_rest = BrokerRest()
        self._store: MetadataStore | None = None
        self._bookkeeper: BookKeeper | None = None
        self._components: _Components | None = None

    def _new_connection(self) -> BrokerConnection:
        assert self._components is not None, "connections are accepted only once the broker is built"
        built = self._components
        return BrokerConnection(
            self._connection_settings,
            built.topics,
            built.namespaces,
            self._publish_buffer,
            self._throttling,
            self._publish_latency,
            self._connection_counts,
        )

    async def start(self) -> None:
        config = self.config
        self._store = store = await open_metadata_store(
            config.metadata_url, session_timeout_ms=config.session_timeout_ms
        )
        rng = None if config.random_seed is None else random.Random(config.random_seed)
        self._bookkeeper = BookKeeper(store, BookKeeperSettings.from_broker_config(config), rng)
        await self._bookkeeper.start()
        self._cache.start()
        _, self.port = await self._listener.start(config.bind_address, config.port, serve=False)
        self.http_port = self._web.bind(config.bind_address, config.http_port)
        identity = BrokerIdentity.of(self.host, self.port, self.http_port)
        built = self._components = self._build(store, self._bookkeeper, identity)
        built.stats.start()
        await built.namespaces.start()
        await self._listener.serve()
        await self._web.serve(self._routes(store, built))
        await built.registration.start()
        await built.load_manager.start()
        self.serving = True

    def _build(self, store: MetadataStore, bookkeeper: BookKeeper, identity: BrokerIdentity) -> _Components:
        config = self.config
        heap = FrozenHeap()
        topic_map = TopicMap(on_taken=heap.unloaded)
        namespaces = NamespaceService(store, identity, topic_map, NamespaceSettings.from_config(config))
        topics = BrokerTopics(
            topic_map,
            namespaces,
            namespaces.metrics,
            store,
            bookkeeper,
            self._cache,
            TopicSettings.from_config(config),
            heap=heap,
            write_latency=self._write_latency,
        )
        stats = StatsUpdater(
            topics, self._cache, config.stats_update_frequency_s, bundles=namespaces, windows=[self._publish_latency]
        )
        balancing = LoadBalancerSettings.from_config(config)
        reporter = LoadReporter(
            store,
            identity,
            balancing,
            config.cluster_name,
            topics,
            namespaces,
            (self._cache, self._publish_buffer),
            bundle_stats=stats.bundle_stats,
        )
        load_manager = LoadManager(
            store,
            identity,
            balancing,
            namespaces,
            reporter,
            cluster_name=config.cluster_name,
            expose_bundles_metrics=config.expose_bundles_metrics_in_prometheus,
        )
        namespaces.placement = load_manager
        return _Components(
            identity=identity,
            topics=topics,
            namespaces=namespaces,
            registration=BrokerRegistration(store, identity, config.cluster_name),
            load_manager=load_manager,
            stats=stats,
            collector=BrokerCollector(
                config.cluster_name,
                topics,
                self._cache,
                self._publish_buffer,
                self._throttling,
                self._publish_latency,
                self._connection_counts,
            ),
        )

    def _routes(self, store: MetadataStore, built: _Components) -> list[web.RouteDef]:
        assert self._bookkeeper is not None
        bk = self._bookkeeper
        bookies = ClusterBookies(store, bk.registry, bk.bookies, bk.quarantine)
        cluster_name, broker_id = self.config.cluster_name, built.identity.broker_id
        gatherer = ClusterGatherer(cluster_name, broker_id, built.namespaces.directory, bookies, self._console_rest)
        return [
            *admin_routes(built.topics, built.namespaces, built.topics.partitioned_topics, lambda: self.serving),
            *namespace_routes(
                built.namespaces,
                built.identity,
                self.config.cluster_name,
                store,
                lambda: built.load_manager.reporter.current,
            ),
            *broker_stats_routes(built.topics, built.namespaces, bookies),
            *bookie_routes(bookies),
            *console_routes(SnapshotCache(gatherer.gather)),
        ]

    async def close(self) -> None:
        self.serving = False
        built = self._components
        if built is not None:
            built.topics.stop_loading()
            built.registration.close()
            await built.stats.stop()
            await built.load_manager.close()  # first: no shedding while bundles unload
            await built.namespaces.close()  # unload: clients move elsewhere while we still talk to them
        await self._listener.close()
        if built is not None:
            await built.topics.close()
            built.collector.unregister()
        await self._web.close()
        await self._console_rest.close()
        await self._cache.stop()
        if self._bookkeeper is not None:
            await self._bookkeeper.close()
        if self._store is not None:
            await self._store.close()
