"""The broker's topics by name: what the namespace service, the connections and the stats ask for.

:class:`TopicMap` holds each topic loaded here, or being loaded, as a future; the loader
(:class:`~broker.topics.broker_topics.BrokerTopics`) puts them in, an unload takes them out.

Invariants:

- a name maps to one future at a time; a future that failed counts as absent (the next
  request loads the topic again);
- :meth:`TopicMap.take_topics` removes every matching entry before anything awaits, so a
  client attaching concurrently finds nothing instead of a closing topic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from minipulsar.broker.topics.base import Topic
from minipulsar.topic_name import TopicName


class LoadedTopics(Protocol):
    """The topics loaded on this broker."""

    def loaded_topics(self) -> list[Topic]: ...

    def loaded_topic(self, name: TopicName) -> Topic | None: ...

    def take_topics(self, belongs: Callable[[TopicName], bool]) -> list[asyncio.Future[Topic]]:
        """Remove the topics (loaded or loading) whose name ``belongs``, for an unload to close."""
        ...


class TopicRegistry(LoadedTopics, Protocol):
    """Loaded topics, and loading them on first use (on the owner of their bundle only)."""

    async def get_topic(self, name: TopicName) -> Topic: ...

    async def topic_exists(self, name: TopicName) -> bool: ...

    async def partition_metadata(self, name: TopicName) -> int:
        """PARTITIONED_METADATA: the partition count (0: not partitioned)."""
        ...

    async def topics_of_namespace(self, namespace: str, mode: str) -> list[str]:
        """GET_TOPICS_OF_NAMESPACE: full topic names of ``tenant/ns`` in ``mode``."""
        ...


class TopicMap:
    """Name → the topic's loading future (see the module docstring)."""

    def __init__(self, on_taken: Callable[[], None] | None = None) -> None:
        """``on_taken``: called when topics are taken out (to be closed), e.g. to let the
        garbage collector see them again (:class:`~broker.topics.frozen_heap.FrozenHeap`)."""
        self._topics: dict[str, asyncio.Future[Topic]] = {}
        self._on_taken = on_taken

    def loading(self, name: TopicName) -> asyncio.Future[Topic] | None:
        """The future of ``name``, unless there is none or it failed."""
        future = self._topics.get(str(name))
        if future is None or (future.done() and future.exception() is not None):
            return None
        return future

    def put(self, name: TopicName, future: asyncio.Future[Topic]) -> None:
        self._topics[str(name)] = future

    def holds(self, name: TopicName, future: asyncio.Future[Topic]) -> bool:
        """``future`` is still the one of ``name`` (no unload took it meanwhile)."""
        return self._topics.get(str(name)) is future

    def loaded_topics(self) -> list[Topic]:
        return [f.result() for f in self._topics.values() if f.done() and f.exception() is None]

    def loaded_topic(self, name: TopicName) -> Topic | None:
        future = self._topics.get(str(name))
        if future is None or not future.done() or future.exception() is not None:
            return None
        return future.result()

    def take_topics(self, belongs: Callable[[TopicName], bool]) -> list[asyncio.Future[Topic]]:
        taken = [self._topics.pop(key) for key in [k for k in self._topics if belongs(TopicName.parse(k))]]
        if taken and self._on_taken is not None:
            self._on_taken()
        return taken

    def take_all(self) -> list[asyncio.Future[Topic]]:
        taken, self._topics = list(self._topics.values()), {}
        if taken and self._on_taken is not None:
            self._on_taken()
        return taken
