"""BrokerTopics: loading topics on the owner of their bundle, and the questions asked of topics by name.

A topic loads only on the broker owning its namespace bundle (:mod:`broker.namespace`): the
first PRODUCER/SUBSCRIBE (or lookup) of an unowned bundle acquires it when placement picks
this broker, otherwise the client gets NotOwner and looks the topic up again. A persistent
topic opens its managed ledger, its durable subscriptions and (``brokerDeduplicationEnabled``)
its deduplication state; a non-persistent one opens nothing. Every managed ledger shares one
:class:`~broker.managed_ledger.timers.LedgerTimers` (rollover checks, the retention walk): a
loaded topic adds no task and no timer of its own.

Invariants:

- at most ``maxConcurrentTopicLoadRequest`` topics load at once;
- a topic an unload took out of the :class:`~broker.topics.registry.TopicMap` while it loaded
  is never handed out: the caller gets NotOwner and looks it up again;
- a partitioned topic never loads (its partitions do);
- once :meth:`close` began, nothing loads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from minipulsar.bookkeeper import BookKeeper
from minipulsar.broker.dedup import MessageDeduplication
from minipulsar.broker.managed_ledger.config import ManagedLedgerConfig
from minipulsar.broker.managed_ledger.entry_cache import EntryCache
from minipulsar.broker.managed_ledger.info import managed_ledger_path
from minipulsar.broker.managed_ledger.ledger import LatencyObserver, ManagedLedger
from minipulsar.broker.managed_ledger.timers import LedgerTimers
from minipulsar.broker.partitions import PartitionedTopics, partition_index
from minipulsar.broker.topic_list import topics_of_namespace
from minipulsar.broker.topics.base import Topic
from minipulsar.broker.topics.dispatch_settings import DispatchSettings
from minipulsar.broker.topics.frozen_heap import FrozenHeap
from minipulsar.broker.topics.non_persistent_topic import NonPersistentTopic
from minipulsar.broker.topics.persistent_topic import PersistentTopic
from minipulsar.broker.topics.registry import TopicMap
from minipulsar.clock import MONOTONIC, Clock
from minipulsar.config import BrokerConfig
from minipulsar.errors import InvalidCommandError, MiniPulsarError, NotOwnerError, ServiceNotReadyError
from minipulsar.metadata import MetadataStore
from minipulsar.supervision import Periodic
from minipulsar.topic_name import TopicName

log = logging.getLogger(__name__)


class TopicOwnership(Protocol):
    """Whether this broker serves a topic's bundle (the namespace service)."""

    async def ensure_owned(self, topic: TopicName) -> None:
        """Return when this broker serves ``topic``'s bundle (acquiring it if placement says so);
        raise NotOwnerError otherwise."""
        ...

    def check_serving(self, topic: TopicName) -> None:
        """Raise NotOwnerError unless this broker serves ``topic``'s bundle now."""
        ...


class TopicLoadMetrics(Protocol):
    """``pulsar_broker_topic_load_pending_requests`` and ``pulsar_topic_load_times``."""

    topic_load_pending: int

    def topic_loaded(self, elapsed_ms: float) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicSettings:
    """How topics are loaded and created, taken once from BrokerConfig."""

    managed_ledger: ManagedLedgerConfig
    dispatch: DispatchSettings
    max_concurrent_loads: int = 5_000
    """maxConcurrentTopicLoadRequest."""
    deduplication_enabled: bool = False
    """brokerDeduplicationEnabled."""
    deduplication_entries_interval: int = 1000
    """brokerDeduplicationEntriesInterval: persisted entries between snapshots."""
    deduplication_max_producers: int = 10_000
    """brokerDeduplicationMaxNumberOfProducers."""
    deduplication_snapshot_interval_s: float = 120.0
    """brokerDeduplicationSnapshotIntervalSeconds (0: none by time)."""
    auto_create_partitioned: bool = False
    """allowAutoTopicCreationType=partitioned: a topic asked for before it exists is created partitioned."""
    default_num_partitions: int = 1
    """defaultNumPartitions: the partitions of such a topic."""

    @classmethod
    def from_config(cls, config: BrokerConfig) -> TopicSettings:
        return cls(
            managed_ledger=ManagedLedgerConfig.from_broker_config(config),
            dispatch=DispatchSettings.from_config(config),
            max_concurrent_loads=config.max_concurrent_topic_load_request,
            deduplication_enabled=config.deduplication_enabled,
            deduplication_entries_interval=config.deduplication_entries_interval,
            deduplication_max_producers=config.deduplication_max_producers,
            deduplication_snapshot_interval_s=config.deduplication_snapshot_interval_s,
            auto_create_partitioned=config.allow_auto_topic_creation_type == "partitioned",
            default_num_partitions=config.default_num_partitions,
        )


def _retrieved(loading: asyncio.Future[Topic]) -> None:
    """A failed load is answered to whoever waits (and logged by the loader); with no one left
    waiting (their requests timed out), asyncio must not log it again as never retrieved."""
    if not loading.cancelled():
        loading.exception()


class BrokerTopics:
    """The :class:`~broker.topics.registry.TopicRegistry` of one broker."""

    def __init__(
        self,
        topics: TopicMap,
        ownership: TopicOwnership,
        metrics: TopicLoadMetrics,
        store: MetadataStore,
        bookkeeper: BookKeeper,
        cache: EntryCache,
        settings: TopicSettings,
        clock: Clock = MONOTONIC,
        heap: FrozenHeap | None = None,
        write_latency: LatencyObserver | None = None,
    ) -> None:
        """``heap``: told of every topic loaded (the topics then leave the garbage collector's
        scans); None: nothing is frozen. ``write_latency``: every managed ledger's write
        latencies (``pulsar_storage_write_latency_ms``); None: only their own buckets."""
        self._write_latency = write_latency
        self._topics = topics
        self._ownership = ownership
        self._metrics = metrics
        self._store = store
        self._bookkeeper = bookkeeper
        self._cache = cache
        self._settings = settings
        self._clock = clock
        self.partitioned_topics = PartitionedTopics(store)
        self._loads = asyncio.Semaphore(settings.max_concurrent_loads)
        self._closing = False
        self.ledger_timers = LedgerTimers(settings.managed_ledger.retention_check_interval_s)
        self._heap = heap
        """The timed work of every managed ledger loaded here."""
        self._dedup_snapshots = Periodic(
            "deduplication snapshots", settings.deduplication_snapshot_interval_s, self._snapshot_dedup, logger=log
        )
        """Pulsar's checkMessageDeduplicationInfo: a changed deduplication state is snapshot at
        least this often, so the pulsar.dedup cursor holds back trimming for a bounded time."""

    # -- loaded topics --------------------------------------------------------------------------

    def loaded_topics(self) -> list[Topic]:
        return self._topics.loaded_topics()

    def loaded_topic(self, name: TopicName) -> Topic | None:
        return self._topics.loaded_topic(name)

    def take_topics(self, belongs: Callable[[TopicName], bool]) -> list[asyncio.Future[Topic]]:
        return self._topics.take_topics(belongs)

    # -- loading --------------------------------------------------------------------------------

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
        loading = self._topics.loading(name)
        if loading is None:
            await self._ownership.ensure_owned(name)
            loading = self._topics.loading(name)
            if loading is None:
                loading = asyncio.ensure_future(self._load_topic(name))
                loading.add_done_callback(_retrieved)
                self._topics.put(name, loading)
        else:
            self._ownership.check_serving(name)
        topic = await asyncio.shield(loading)
        if not self._topics.holds(name, loading):
            raise NotOwnerError(f"{name} was unloaded from this broker; look it up again")
        return topic

    async def _load_topic(self, name: TopicName) -> Topic:
        metrics = self._metrics
        metrics.topic_load_pending += 1
        started = self._clock()
        try:
            async with self._loads:  # maxConcurrentTopicLoadRequest
                topic = await self._open_topic(name)
        finally:
            metrics.topic_load_pending -= 1
        metrics.topic_loaded((self._clock() - started) * 1000)
        if self._heap is not None:
            self._heap.loaded()
        return topic

    async def _open_topic(self, name: TopicName) -> Topic:
        partitions = await self.partitioned_topics.partitions(name)
        if partitions:
            raise InvalidCommandError(
                f"{name} is a partitioned topic with {partitions} partitions; "
                f"use {name.partition(0)} … {name.partition(partitions - 1)}"
            )
        if not name.is_persistent:
            return NonPersistentTopic(name)
        return await self._open_persistent_topic(name)

    async def _open_persistent_topic(self, name: TopicName) -> PersistentTopic:
        settings = self._settings
        ledger = ManagedLedger(
            name.persistence_path,
            self._store,
            self._bookkeeper,
            self._cache,
            settings.managed_ledger,
            self.ledger_timers,
            self._write_latency,
        )
        try:
            await ledger.open()
            topic = await PersistentTopic.load(name, ledger, self._store, settings.dispatch)
            if settings.deduplication_enabled:
                topic.deduplication = MessageDeduplication(
                    name.persistence_path,
                    self._store,
                    settings.deduplication_entries_interval,
                    settings.deduplication_max_producers,
                )
                await topic.deduplication.recover(ledger)
                if settings.deduplication_snapshot_interval_s > 0 and not self._dedup_snapshots.running:
                    self._dedup_snapshots.start()
            else:
                await MessageDeduplication.forget(ledger, self._store)
        except MiniPulsarError as error:
            log.warning("cannot load topic %s: %s", name, error)
            await ledger.close()
            raise ServiceNotReadyError(f"topic {name} is not available: {error}") from error
        log.info("loaded topic %s (%d ledgers, %d subscriptions)", name, len(ledger.ledgers), len(topic.subscriptions))
        return topic

    async def _snapshot_dedup(self) -> None:
        deduplicating = [
            topic.deduplication
            for topic in self.loaded_topics()
            if isinstance(topic, PersistentTopic) and topic.deduplication is not None
        ]
        await asyncio.gather(*(dedup.snapshot_if_changed() for dedup in deduplicating))

    # -- questions by name ----------------------------------------------------------------------

    async def topic_exists(self, name: TopicName) -> bool:
        """Loaded here, or (persistent) has a managed ledger in the metadata store."""
        if self.loaded_topic(name) is not None:
            return True
        return name.is_persistent and await self._store.exists(managed_ledger_path(name.persistence_path))

    async def partition_metadata(self, name: TopicName) -> int:
        """The partition count (0: not partitioned). With ``allowAutoTopicCreationType=partitioned``
        a topic that does not exist yet is created partitioned, with ``defaultNumPartitions``."""
        partitioned = self.partitioned_topics
        partitions = await partitioned.partitions(name)
        if (
            partitions == 0
            and self._settings.auto_create_partitioned
            and partition_index(name) < 0
            and not await self.topic_exists(name)
        ):
            try:
                await partitioned.create(name, self._settings.default_num_partitions)
            except MiniPulsarError:  # created meanwhile (by another client): read what won
                pass
            partitions = await partitioned.partitions(name)
        return partitions

    async def topics_of_namespace(self, namespace: str, mode: str) -> list[str]:
        loaded = [topic.name for topic in self.loaded_topics()]
        return await topics_of_namespace(self._store, namespace, mode, loaded)

    # -- lifecycle ------------------------------------------------------------------------------

    def stop_loading(self) -> None:
        """The broker is shutting down: load nothing more."""
        self._closing = True

    async def close(self) -> None:
        """Load nothing more; close every topic still loaded (an unload took the others already)."""
        self.stop_loading()
        for topic in self.loaded_topics():
            await topic.close()
        for loading in self._topics.take_all():
            loading.cancel()
        await self._dedup_snapshots.stop()
        await self.ledger_timers.close()
        if self._heap is not None:
            self._heap.close()
