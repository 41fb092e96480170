"""BrokerService: one broker process — its listener, topics, metadata session and BookKeeper client."""

from __future__ import annotations

import asyncio
import json
import logging

from aiohttp import web

from minipulsar.config import BrokerConfig
from minipulsar.errors import MiniPulsarError, ServiceNotReadyError
from minipulsar.metadata import MetadataStore, SessionEvent, open_metadata_store
from minipulsar.metrics import HttpServer
from minipulsar.net import Listener
from minipulsar.topic_name import TopicName

from broker.bookkeeper import BookKeeper, BookKeeperSettings
from broker.managed_ledger.entry_cache import EntryCache
from broker.managed_ledger.ledger import ManagedLedger, ManagedLedgerConfig
from broker.server import BrokerConnection
from broker.stats import BrokerCollector
from broker.topics.persistent_topic import PersistentTopic

log = logging.getLogger(__name__)

BROKERS_PATH = "/loadbalance/brokers"


class BrokerService:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.store: MetadataStore | None = None
        self.bookkeeper: BookKeeper | None = None
        self.cache = EntryCache(config.managed_ledger_cache_size_mb * 1024 * 1024)
        self.topics: dict[str, asyncio.Future[PersistentTopic]] = {}
        self._listener = Listener(lambda: BrokerConnection(self))
        self._http = HttpServer(self._admin_routes())
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

    async def start(self) -> None:
        config = self.config
        self.store = await open_metadata_store(config.metadata_url, session_timeout_ms=config.session_timeout_ms)
        self.bookkeeper = BookKeeper(self.store, BookKeeperSettings.from_broker_config(config))
        await self.bookkeeper.start()
        _, self.port = await self._listener.start(config.bind_address, config.port)
        self.http_port = await self._http.start(config.bind_address, config.http_port)
        self._collector = BrokerCollector(self)
        await self._register()
        self.store.add_session_listener(self._session_event)

    def _session_event(self, event: SessionEvent) -> None:
        if event is SessionEvent.SESSION_REESTABLISHED and not self._closing:
            asyncio.get_running_loop().create_task(self._register())

    async def _register(self) -> None:
        """Announce this broker (ephemeral), as Pulsar does under /loadbalance/brokers; again
        after a lost session was replaced, since its ephemeral keys went with it."""
        assert self.store is not None
        info = {"pulsarServiceUrl": self.service_url, "webServiceUrl": self.web_service_url,
                "cluster": self.config.cluster_name}
        await self.store.put(f"{BROKERS_PATH}/{self.host}:{self.http_port}", json.dumps(info).encode(),
                             ephemeral=True)

    async def get_topic(self, name: TopicName) -> PersistentTopic:
        """The loaded topic, loading it (managed ledger + subscriptions) on first use."""
        if self._closing:
            raise ServiceNotReadyError("the broker is shutting down")
        key = str(name)
        loading = self.topics.get(key)
        if loading is None or (loading.done() and loading.exception() is not None):
            loading = asyncio.ensure_future(self._load_topic(name))
            self.topics[key] = loading
        return await asyncio.shield(loading)

    async def _load_topic(self, name: TopicName) -> PersistentTopic:
        assert self.store is not None and self.bookkeeper is not None
        config = self.config
        ledger = ManagedLedger(name.persistence_path, self.store, self.bookkeeper, self.cache,
                               ManagedLedgerConfig(config.ensemble_size, config.write_quorum, config.ack_quorum))
        try:
            await ledger.open()
            topic = await PersistentTopic.load(name, ledger, self.store, config.dispatcher_max_read_batch_size)
        except MiniPulsarError as error:
            log.warning("cannot load topic %s: %s", name, error)
            await ledger.close()
            raise ServiceNotReadyError(f"topic {name} is not available: {error}") from error
        log.info("loaded topic %s (%d ledgers, %d subscriptions)", name, len(ledger.ledgers),
                 len(topic.subscriptions))
        return topic

    def loaded_topics(self) -> list[PersistentTopic]:
        return [f.result() for f in self.topics.values() if f.done() and f.exception() is None]

    async def close(self) -> None:
        self._closing = True
        await self._listener.close()
        for topic in self.loaded_topics():
            await topic.close()
        for loading in self.topics.values():
            loading.cancel()
        if self._collector is not None:
            self._collector.unregister()
        await self._http.close()
        if self.bookkeeper is not None:
            await self.bookkeeper.close()
        if self.store is not None:
            await self.store.close()

    # -- admin ----------------------------------------------------------------------------------

    def _admin_routes(self) -> list[web.RouteDef]:
        return [
            web.get("/admin/v2/persistent/{tenant}/{namespace}/{topic}/stats", self._topic_stats),
            web.get("/admin/v2/brokers/health", self._health),
        ]

    async def _topic_stats(self, request: web.Request) -> web.Response:
        name = TopicName("persistent", request.match_info["tenant"], request.match_info["namespace"],
                         request.match_info["topic"])
        loading = self.topics.get(str(name))
        if loading is None or not loading.done() or loading.exception() is not None:
            return web.json_response({"reason": f"Topic {name} not found"}, status=404)
        return web.json_response(loading.result().stats())

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")
