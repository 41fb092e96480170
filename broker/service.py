"""BrokerService: one broker process — its listener, topics, metadata session and BookKeeper client.

A topic loads only on the broker owning its namespace bundle (:mod:`broker.namespace`): the first
PRODUCER/SUBSCRIBE (or lookup) of an unowned bundle acquires it when placement picks this broker,
otherwise the client gets NotOwner and looks the topic up again. Unloading a bundle takes its
topics out of :attr:`BrokerService.topics` at once (:meth:`BrokerService.take_topics`), so a
client attaching concurrently fails instead of landing on a closing topic. A clean shutdown
unloads every bundle first, so clients move to other brokers.

It also owns what every connection shares: the broker-wide publish buffer
(``maxMessagePublishBufferSizeInMB``), the count of throttled connections, partition metadata,
and the timer that turns the topics' counters into rates every ``statsUpdateFrequencyInSecs``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from minipulsar.broker.admin import admin_routes
from minipulsar.broker.admin_namespaces import namespace_routes
from minipulsar.broker.bookkeeper import BookKeeper, BookKeeperSettings
from minipulsar.broker.dedup import MessageDeduplication
from minipulsar.broker.loadbalance.load_manager import LoadManager
from minipulsar.broker.managed_ledger.entry_cache import EntryCache
from minipulsar.broker.managed_ledger.info import managed_ledger_path
from minipulsar.broker.managed_ledger.ledger import ManagedLedger, ManagedLedgerConfig
from minipulsar.broker.namespace.service import NamespaceService
from minipulsar.broker.partitions import PartitionedTopics, partition_index
from minipulsar.broker.publish_buffer import PublishBuffer
from minipulsar.broker.server import BrokerConnection
from minipulsar.broker.stats import BrokerCollector
from minipulsar.broker.topics.dispatch_settings import DispatchSettings
from minipulsar.broker.topics.non_persistent_topic import NonPersistentTopic
from minipulsar.broker.topics.persistent_topic import PersistentTopic
from minipulsar.config import BrokerConfig
from minipulsar.errors import InvalidCommandError, MiniPulsarError, NotOwnerError, ServiceNotReadyError
from minipulsar.metadata import MetadataStore, SessionEvent, open_metadata_store
from minipulsar.metrics import HttpServer
from minipulsar.net import Listener
from minipulsar.topic_name import TopicName

log = logging.getLogger(__name__)

BROKERS_PATH = "/loadbalance/brokers"

Topic = PersistentTopic | NonPersistentTopic


class BrokerService:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.store: MetadataStore | None = None
        self.bookkeeper: BookKeeper | None = None
        self.cache = EntryCache(config.managed_ledger_cache_size_mb * 1024 * 1024)
        self.topics: dict[str, asyncio.Future[Topic]] = {}
        self.publish_buffer = PublishBuffer.from_megabytes(config.max_message_publish_buffer_size_mb)
        self.throttled_connections = 0
        """Connections not read right now (either limit); pulsar_broker_throttled_connections."""
        self.connection_pauses = 0
        """Times a connection stopped reading for maxPendingPublishRequestsPerConnection."""
        self.partitioned_topics: PartitionedTopics | None = None
        self.cache_rates = (0.0, 0.0)
        """Entry-cache (hits, misses) per second over the last stats interval."""
        self.namespaces: NamespaceService | None = None
        """Bundles, ownership, lookup; set in :meth:`start` once the URLs are known."""
        self.load_manager = None
        """The load manager (broker/loadbalance/), when one runs: NamespaceService asks it to place
        unowned bundles (``select_broker_for``, ``is_leader``)."""
        self._topic_loads = asyncio.Semaphore(config.max_concurrent_topic_load_request)
        self._listener = Listener(lambda: BrokerConnection(self))
        self._http = HttpServer([*admin_routes(self), *namespace_routes(self)])
        self._stats_task: asyncio.Task[None] | None = None
        self.host = config.advertised_address or config.bind_address
        self.port = 0
        self.http_port = 0
        self._collector: BrokerCollector | None = None
        self._closing = False

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.host}:{self.port}"

    @property
    def web_service_url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    @property
    def broker_id(self) -> str:
        """``host:webport``: this broker's name under /loadbalance/brokers (Pulsar's broker id)."""
        return f"{self.host}:{self.http_port}"

    async def start(self) -> None:
        config = self.config
        self.store = await open_metadata_store(config.metadata_url, session_timeout_ms=config.session_timeout_ms)
        self.partitioned_topics = PartitionedTopics(self.store)
        self.bookkeeper = BookKeeper(self.store, BookKeeperSettings.from_broker_config(config))
        await self.bookkeeper.start()
        self.cache.start(config)  # the broker's cache settings + periodic eviction
        _, self.port = await self._listener.start(config.bind_address, config.port)
        self.http_port = await self._http.start(config.bind_address, config.http_port)
        self._collector = BrokerCollector(self)
        self._stats_task = asyncio.get_running_loop().create_task(self._update_stats())
        self.namespaces = NamespaceService(self)
        await self.namespaces.start()
        await self._register()
        self.store.add_session_listener(self._session_event)
        # load manager (broker/loadbalance/): reports, leader election, shedding, placement
        self.load_manager = LoadManager(self)
        await self.load_manager.start()

    def _session_event(self, event: SessionEvent) -> None:
        if event is SessionEvent.SESSION_REESTABLISHED and not self._closing:
            asyncio.get_running_loop().create_task(self._register())

    async def _register(self) -> None:
        """Announce this broker (ephemeral), as Pulsar does under /loadbalance/brokers; again
        after a lost session was replaced, since its ephemeral keys went with it."""
        assert self.store is not None
        info = {
            "pulsarServiceUrl": self.service_url,
            "webServiceUrl": self.web_service_url,
            "cluster": self.config.cluster_name,
        }
        await self.store.put(f"{BROKERS_PATH}/{self.broker_id}", json.dumps(info).encode(), ephemeral=True)

    async def get_topic(self, name: TopicName) -> Topic:
        """The loaded topic, loading it (managed ledger + subscriptions) on first use, on the owner
        of its bundle only.

        Raises:
            InvalidCommandError: ``name`` is a partitioned topic (use its partitions).
            NotOwnerError: another broker serves (or should serve) the topic's bundle, or it is
                being unloaded: look the topic up again.
            ServiceNotReadyError: the broker is closing or the topic cannot be loaded.
        """
        if self._closing:
            raise ServiceNotReadyError("the broker is shutting down")
        if self.namespaces is None:
            raise ServiceNotReadyError("the broker is starting")
        key = str(name)
        loading = self.topics.get(key)
        if loading is None or (loading.done() and loading.exception() is not None):
            await self.namespaces.ensure_owned(name)
            loading = self.topics.get(key)
            if loading is None or (loading.done() and loading.exception() is not None):
                loading = asyncio.ensure_future(self._load_topic(name))
                self.topics[key] = loading
        else:
            self.namespaces.check_serving(name)
        topic = await asyncio.shield(loading)
        if self.topics.get(key) is not loading:
            raise NotOwnerError(f"{name} was unloaded from this broker; look it up again")
        return topic

    def take_topics(self, belongs) -> list[asyncio.Future[Topic]]:
        """Remove the topics whose name ``belongs(TopicName)`` from the topic map (loaded or loading)
        and return them, for an unload to close."""
        taken = []
        for key in [k for k in self.topics if belongs(TopicName.parse(k))]:
            taken.append(self.topics.pop(key))
        return taken

    async def _load_topic(self, name: TopicName) -> Topic:
        assert self.namespaces is not None
        metrics = self.namespaces.metrics
        metrics.topic_load_pending += 1
        started = time.monotonic()
        try:
            async with self._topic_loads:  # maxConcurrentTopicLoadRequest
                topic = await self._open_topic(name)
        finally:
            metrics.topic_load_pending -= 1
        metrics.topic_loaded((time.monotonic() - started) * 1000)
        return topic

    async def _open_topic(self, name: TopicName) -> Topic:
        assert self.store is not None and self.bookkeeper is not None and self.partitioned_topics is not None
        partitions = await self.partitioned_topics.partitions(name)
        if partitions:
            raise InvalidCommandError(
                f"{name} is a partitioned topic with {partitions} partitions; "
                f"use {name.partition(0)} … {name.partition(partitions - 1)}"
            )
        if not name.is_persistent:
            return NonPersistentTopic(name)
        config = self.config
        ledger = ManagedLedger(
            name.persistence_path,
            self.store,
            self.bookkeeper,
            self.cache,
            ManagedLedgerConfig.from_broker_config(config),
        )
        try:
            await ledger.open()
            topic = await PersistentTopic.load(name, ledger, self.store, DispatchSettings.from_config(config))
            if config.deduplication_enabled:
                topic.deduplication = MessageDeduplication(
                    name.persistence_path,
                    self.store,
                    config.deduplication_entries_interval,
                    config.deduplication_max_producers,
                )
                await topic.deduplication.recover(ledger)
        except MiniPulsarError as error:
            log.warning("cannot load topic %s: %s", name, error)
            await ledger.close()
            raise ServiceNotReadyError(f"topic {name} is not available: {error}") from error
        log.info("loaded topic %s (%d ledgers, %d subscriptions)", name, len(ledger.ledgers), len(topic.subscriptions))
        return topic

    def loaded_topics(self) -> list[Topic]:
        return [f.result() for f in self.topics.values() if f.done() and f.exception() is None]

    def loaded_topic(self, name: TopicName) -> Topic | None:
        loading = self.topics.get(str(name))
        if loading is None or not loading.done() or loading.exception() is not None:
            return None
        return loading.result()

    async def topic_exists(self, name: TopicName) -> bool:
        """Loaded here, or (persistent) has a managed ledger in the metadata store."""
        assert self.store is not None
        if self.loaded_topic(name) is not None:
            return True
        return name.is_persistent and await self.store.exists(managed_ledger_path(name.persistence_path))

    async def partition_metadata(self, name: TopicName) -> int:
        """PARTITIONED_METADATA: the partition count (0: not partitioned). With
        ``allowAutoTopicCreationType=partitioned`` a topic that does not exist yet is created
        partitioned, with ``defaultNumPartitions``."""
        assert self.partitioned_topics is not None
        partitions = await self.partitioned_topics.partitions(name)
        if (
            partitions == 0
            and self.config.allow_auto_topic_creation_type == "partitioned"
            and partition_index(name) < 0
            and not await self.topic_exists(name)
        ):
            try:
                await self.partitioned_topics.create(name, self.config.default_num_partitions)
            except MiniPulsarError:  # created meanwhile (by another client): read what won
                pass
            partitions = await self.partitioned_topics.partitions(name)
        return partitions

    # -- stats ----------------------------------------------------------------------------------

    async def _update_stats(self) -> None:
        """Every statsUpdateFrequencyInSecs: counters → rates, per topic and for the cache."""
        interval_s = self.config.stats_update_frequency_s
        last = time.monotonic()
        hits, misses = self.cache.hits, self.cache.misses
        while True:
            await asyncio.sleep(interval_s)
            now = time.monotonic()
            elapsed_s, last = now - last, now
            for topic in self.loaded_topics():
                try:
                    topic.update_rates(elapsed_s)
                except Exception:  # one topic's bad stats must not stop everyone's rates
                    log.exception("%s: updating its rates failed", topic.name)
            cache = self.cache
            self.cache_rates = ((cache.hits - hits) / elapsed_s, (cache.misses - misses) / elapsed_s)
            hits, misses = cache.hits, cache.misses

    async def close(self) -> None:
        self._closing = True
        if self._stats_task is not None:
            self._stats_task.cancel()
        if self.load_manager is not None:  # load manager first: no shedding while bundles unload
            await self.load_manager.close()
        if self.namespaces is not None:  # unload first: clients move elsewhere while we still talk to them
            await self.namespaces.close()
        await self._listener.close()
        for topic in self.loaded_topics():
            await topic.close()
        for loading in self.topics.values():
            loading.cancel()
        if self._collector is not None:
            self._collector.unregister()
        await self._http.close()
        await self.cache.stop()
        if self.bookkeeper is not None:
            await self.bookkeeper.close()
        if self.store is not None:
            await self.store.close()
