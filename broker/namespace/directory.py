"""Where the other brokers are: their registrations under ``/loadbalance/brokers`` and the leader.

- ``/loadbalance/brokers/{host}:{webport}`` (ephemeral) — a live broker; its JSON value holds at least
  ``pulsarServiceUrl`` and ``webServiceUrl`` (the load manager adds its load report to it);
- ``/loadbalance/leader`` (ephemeral) — the load-manager leader, Pulsar's ``LeaderBroker`` JSON
  ``{"brokerId": "host:webport", "serviceUrl": "http://host:webport"}``.

A broker id is the registration's child name, ``host:webport``.

Invariant: read-only: it reads the keys other components write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from minipulsar.metadata import MetadataStore

BROKERS_PATH = "/loadbalance/brokers"
LEADER_PATH = "/loadbalance/leader"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: str
    service_url: str
    """``pulsar://host:port``"""
    web_service_url: str
    """``http://host:port``"""


def broker_id_of(web_service_url: str) -> str:
    """``http://host:8080`` → ``host:8080``."""
    return web_service_url.split("://", 1)[-1].rstrip("/")


class BrokerDirectory:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def broker_ids(self) -> list[str]:
        """Live brokers (registered now), sorted."""
        return await self._store.children(BROKERS_PATH)

    async def broker(self, broker_id: str) -> BrokerInfo | None:
        """A live broker's URLs, or None when it is not registered (or its value is unreadable)."""
        found = await self._store.get(f"{BROKERS_PATH}/{broker_id}")
        if found is None:
            return None
        try:
            data = json.loads(found.value)
            return BrokerInfo(broker_id, str(data["pulsarServiceUrl"]), str(data["webServiceUrl"]))
        except (ValueError, KeyError, TypeError):
            return None

    async def report(self, broker_id: str) -> dict | None:
        """The broker's registration value as written (its load report), or None."""
        found = await self._store.get(f"{BROKERS_PATH}/{broker_id}")
        if found is None:
            return None
        try:
            data = json.loads(found.value)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    async def leader(self) -> BrokerInfo | None:
        """The load-manager leader if one is elected and still registered, else None."""
        found = await self._store.get(LEADER_PATH)
        if found is None:
            return None
        try:
            data = json.loads(found.value)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        broker_id = data.get("brokerId") or (broker_id_of(data["serviceUrl"]) if data.get("serviceUrl") else None)
        if not isinstance(broker_id, str) or not broker_id:
            return None
        return await self.broker(broker_id)
