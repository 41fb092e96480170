"""This broker's own stats over REST: Pulsar's ``/admin/v2/broker-stats/topics`` and minipulsar's
``/admin/v2/broker-stats/bookies``.

- ``GET /admin/v2/broker-stats/topics``: the topics loaded here, in Pulsar's shape (its
  ``PulsarStats`` JSON): ``{namespace: {bundle range: {"persistent": {topic: stats}, "non-persistent":
  {topic: stats}}}}``; ``"persistent"`` is always there (possibly empty), ``"non-persistent"`` only
  with such a topic, as in Pulsar. Each topic's stats carry Pulsar's streaming fields:
  ``publishers``, ``replication`` (empty), ``subscriptions`` (name → ``consumers``, ``msgBacklog``,
  ``msgRateOut``, ``msgThroughputOut``, ``msgRateRedeliver``, ``type``, …), ``producerCount``,
  ``averageMsgSize``, ``msgRateIn``, ``msgRateOut``, ``msgInCount``, ``bytesInCount``,
  ``msgOutCount``, ``bytesOutCount``, ``msgThroughputIn``, ``msgThroughputOut``, ``storageSize``,
  ``backlogSize`` (not Pulsar's ``pendingAddEntriesCount``: the managed ledger does not expose it).
- ``GET /admin/v2/broker-stats/bookies`` (minipulsar's own; Pulsar has no such view): what this
  broker's BookKeeper client thinks of each bookie it knows (registered, or in quarantine):
  ``{bookie: {"quarantined": bool, "quarantineRemainingSeconds": s | null, "pendingRequests": n}}``.

Invariants:

- a topic is listed under the owned bundle that holds it; a topic whose bundle is being unloaded
  is not listed (Pulsar's map is by owned bundle too);
- rates are those of the last ``statsUpdateFrequencyInSecs`` round; the ``…Count`` counters are
  read now (a client computing its own rates differences them);
- the walk yields to the event loop every :data:`SLICE` topics: ten thousand topics do not stall
  publishing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Protocol

from aiohttp import web

from minipulsar.bookkeeper.bookie_registry import BookieSet
from minipulsar.broker.loadbalance.bundle_stats import OwnedBundles
from minipulsar.broker.topics.base import Topic
from minipulsar.broker.topics.registry import LoadedTopics
from minipulsar.broker.topics.topic_stats import topic_stats
from minipulsar.errors import MiniPulsarError

SLICE = 256
"""Topics rendered between two yields to the event loop."""

_SUBSCRIPTION_FIELDS = (
    "msgBacklog",
    "msgRateOut",
    "msgThroughputOut",
    "msgRateRedeliver",
    "type",
    "unackedMessages",
    "blockedSubscriptionOnUnackedMsgs",
)
_CONSUMER_FIELDS = (
    "address",
    "consumerName",
    "availablePermits",
    "msgRateOut",
    "msgThroughputOut",
    "unackedMessages",
    "blockedConsumerOnUnackedMsgs",
)


class BookieClientView(Protocol):
    """What this broker's BookKeeper client knows of the bookies."""

    async def registered(self) -> BookieSet: ...

    def quarantine_remaining_s(self) -> dict[str, float]: ...

    def pending_requests(self, bookie: str) -> int: ...


def streaming_topic_stats(topic: Topic) -> dict[str, Any]:
    """One topic's entry in ``broker-stats/topics`` (Pulsar's ``updateRates`` fields)."""
    stats = topic_stats(topic)
    return {
        "publishers": stats["publishers"],
        "replication": {},
        "subscriptions": {
            name: {
                "consumers": [{key: c[key] for key in _CONSUMER_FIELDS} for c in sub["consumers"]],
                "msgRateExpired": 0.0,
                **{key: sub[key] for key in _SUBSCRIPTION_FIELDS},
            }
            for name, sub in stats["subscriptions"].items()
        },
        "producerCount": len(stats["publishers"]),
        "averageMsgSize": stats["averageMsgSize"],
        "msgRateIn": stats["msgRateIn"],
        "msgRateOut": stats["msgRateOut"],
        "msgInCount": stats["msgInCounter"],
        "bytesInCount": stats["bytesInCounter"],
        "msgOutCount": stats["msgOutCounter"],
        "bytesOutCount": stats["bytesOutCounter"],
        "msgThroughputIn": stats["msgThroughputIn"],
        "msgThroughputOut": stats["msgThroughputOut"],
        "storageSize": stats["storageSize"],
        "backlogSize": stats["backlogSize"],
    }


async def broker_topics_stats(topics: Iterable[Topic], bundles: OwnedBundles) -> dict[str, Any]:
    """``{namespace: {bundle range: {domain: {topic: stats}}}}`` of the topics in owned bundles."""
    result: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for index, topic in enumerate(topics):
        if index and index % SLICE == 0:
            await asyncio.sleep(0)
        bundle = bundles.bundle_of_loaded(topic.name)
        if bundle is None:
            continue
        sections = result.setdefault(bundle.namespace, {}).setdefault(bundle.range_name, {"persistent": {}})
        domain = sections.setdefault(topic.name.domain, {})
        domain[str(topic.name)] = streaming_topic_stats(topic)
    return result


async def bookie_client_stats(bookies: BookieClientView) -> dict[str, dict[str, Any]]:
    """``{bookie: {quarantined, quarantineRemainingSeconds, pendingRequests}}``, sorted by bookie."""
    registered = await bookies.registered()
    remaining = bookies.quarantine_remaining_s()
    known = sorted(registered.writable | registered.read_only | set(remaining))
    return {
        bookie: {
            "quarantined": bookie in remaining,
            "quarantineRemainingSeconds": round(remaining[bookie], 1) if bookie in remaining else None,
            "pendingRequests": bookies.pending_requests(bookie),
        }
        for bookie in known
    }


def broker_stats_routes(topics: LoadedTopics, bundles: OwnedBundles, bookies: BookieClientView) -> list[web.RouteDef]:
    async def topics_handler(request: web.Request) -> web.Response:
        return web.json_response(await broker_topics_stats(topics.loaded_topics(), bundles))

    async def bookies_handler(request: web.Request) -> web.Response:
        try:
            return web.json_response(await bookie_client_stats(bookies))
        except MiniPulsarError as error:  # the bookie registry cannot be read now
            return web.json_response({"reason": str(error)}, status=503)

    return [
        web.get("/admin/v2/broker-stats/topics", topics_handler),
        web.get("/admin/v2/broker-stats/bookies", bookies_handler),
    ]
