"""The broker's admin REST API: Pulsar's ``/admin/v2`` paths for topic stats and partitions.

- ``GET  /admin/v2/{domain}/{tenant}/{ns}/{topic}/stats`` and ``…/internalStats``;
- ``PUT  …/partitions`` (body: the count) creates a partitioned topic, ``POST`` raises its
  count, ``GET`` reads it (``{"partitions": 0}`` when not partitioned), ``DELETE`` removes it;
- ``GET  /admin/v2/brokers/health``: ``ok`` while the broker serves (started, registered, its
  load manager running, not stopping), else 503: a readiness probe (the compose files' health
  check). Lighter than Pulsar's, which also round-trips a message through a heartbeat topic.

A topic served by another broker answers ``307`` to that broker's same URL (as Pulsar does);
tenants, namespaces, bundles and lookup live in :mod:`broker.admin_namespaces`.

Errors answer as Pulsar's do: a JSON ``{"reason": …}`` with 404 (not found), 409 (exists
already), 400 (bad input) or 503 (not available now).

Invariants:

- a topic is loaded for a stats request only if it exists (a persistent one with a managed
  ledger); stats never create a topic;
- every error is a JSON ``{"reason": …}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from minipulsar.broker.namespace.lookup import TopicLookup
from minipulsar.broker.partitions import PartitionedTopics
from minipulsar.broker.topics.base import Topic
from minipulsar.broker.topics.registry import TopicRegistry
from minipulsar.errors import AlreadyExistsError, InvalidCommandError, MiniPulsarError, NotFoundError, NotOwnerError
from minipulsar.topic_name import TopicName

TOPIC = "/admin/v2/{domain:persistent|non-persistent}/{tenant}/{namespace}/{topic}"


def admin_routes(
    topics: TopicRegistry, lookup: TopicLookup, partitions: PartitionedTopics, serving: Callable[[], bool]
) -> list[web.RouteDef]:
    """``serving``: whether the broker serves now (the health check's answer)."""
    handlers = _Handlers(topics, lookup, partitions, serving)
    return [
        web.get(f"{TOPIC}/stats", handlers.stats),
        web.get(f"{TOPIC}/internalStats", handlers.internal_stats),
        web.put(f"{TOPIC}/partitions", handlers.create_partitioned_topic),
        web.post(f"{TOPIC}/partitions", handlers.update_partitioned_topic),
        web.get(f"{TOPIC}/partitions", handlers.get_partitioned_metadata),
        web.delete(f"{TOPIC}/partitions", handlers.delete_partitioned_topic),
        web.get("/admin/v2/brokers/health", handlers.health),
    ]


def _error(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)


def _topic(request: web.Request) -> TopicName:
    info = request.match_info
    try:
        return TopicName.parse(f"{info['domain']}://{info['tenant']}/{info['namespace']}/{info['topic']}")
    except ValueError as error:
        raise web.HTTPBadRequest(text=json.dumps({"reason": str(error)}), content_type="application/json") from error


async def _partition_count(request: web.Request) -> int:
    try:
        count = json.loads(await request.text())
    except (ValueError, RecursionError):  # RecursionError: nested too deep for the parser
        count = None
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise web.HTTPBadRequest(
            text=json.dumps({"reason": "the body must be a positive number of partitions"}),
            content_type="application/json",
        )
    return count


class _Handlers:
    def __init__(
        self, topics: TopicRegistry, lookup: TopicLookup, partitions: PartitionedTopics, serving: Callable[[], bool]
    ) -> None:
        self._topics = topics
        self._lookup = lookup
        self._partitions = partitions
        self._serving = serving

    async def _loaded(self, name: TopicName, authoritative: bool = False) -> Topic | None:
        """The topic if it exists: loaded here, or a persistent one loaded now (as Pulsar does).
        ``authoritative``: a broker that decided placement sent the request here, so take the
        bundle if it is unowned instead of asking placement again."""
        topic = self._topics.loaded_topic(name)
        if topic is None and await self._topics.topic_exists(name):
            if authoritative:
                await self._lookup.lookup(name, authoritative=True)
            topic = await self._topics.get_topic(name)
        return topic

    async def stats(self, request: web.Request) -> web.Response:
        return await self._topic_answer(request, lambda topic: topic.stats())

    async def internal_stats(self, request: web.Request) -> web.Response:
        return await self._topic_answer(request, lambda topic: topic.internal_stats())

    async def _topic_answer(self, request: web.Request, render: Callable[[Topic], dict[str, Any]]) -> web.Response:
        name = _topic(request)
        try:
            topic = await self._loaded(name, request.query.get("authoritative", "false").lower() == "true")
        except NotOwnerError as error:
            return await self._to_owner(request, name, error)
        except MiniPulsarError as error:
            return _error(503, str(error))
        if topic is None:
            return _error(404, f"Topic {name} not found")
        return web.json_response(render(topic))

    async def _to_owner(self, request: web.Request, name: TopicName, error: NotOwnerError) -> web.Response:
        """307 to the broker serving ``name`` (503 while its bundle is moving)."""
        result = await self._lookup.lookup(name)
        if result.kind != "redirect" or not result.http_url:
            return _error(503, str(error))
        location = f"{result.http_url.rstrip('/')}{request.path}?authoritative={str(result.authoritative).lower()}"
        return web.Response(status=307, headers={"Location": location})

    async def create_partitioned_topic(self, request: web.Request) -> web.Response:
        name, count = _topic(request), await _partition_count(request)
        if await self._topics.topic_exists(name):
            return _error(409, f"{name} exists already as a non-partitioned topic")
        try:
            await self._partitions.create(name, count)
        except AlreadyExistsError:
            return _error(409, "Partitioned topic already exists")
        except InvalidCommandError as error:
            return _error(400, str(error))
        return web.Response(status=204)

    async def update_partitioned_topic(self, request: web.Request) -> web.Response:
        name, count = _topic(request), await _partition_count(request)
        try:
            await self._partitions.update(name, count)
        except NotFoundError:
            return _error(404, "Partitioned topic does not exist")
        except InvalidCommandError as error:
            return _error(400, str(error))
        return web.Response(status=204)

    async def get_partitioned_metadata(self, request: web.Request) -> web.Response:
        return web.json_response({"partitions": await self._partitions.partitions(_topic(request))})

    async def delete_partitioned_topic(self, request: web.Request) -> web.Response:
        try:
            await self._partitions.delete(_topic(request))
        except NotFoundError:
            return _error(404, "Partitioned topic does not exist")
        return web.Response(status=204)

    async def health(self, request: web.Request) -> web.Response:
        if not self._serving():
            return _error(503, "the broker is not serving")
        return web.Response(text="ok")
