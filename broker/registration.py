"""This broker's entry under ``/loadbalance/brokers``, as Pulsar registers its brokers.

The key ``/loadbalance/brokers/{host}:{webport}`` is ephemeral: it lives with the broker's
metadata session, so a broker that dies leaves the list once its session expires.

Invariants:

- the value names the broker's binary and web URLs and its cluster (other brokers' directory
  reads them);
- after a lost session was replaced (its ephemeral keys went with it) the key is written
  again, unless the broker is closing; if that write fails, the load reporter's next write of
  the same key (its report) restores it.
"""

from __future__ import annotations

import json
import logging

from minipulsar.broker.identity import BrokerIdentity
from minipulsar.broker.loadbalance.reporter import BROKERS_PATH
from minipulsar.errors import MiniPulsarError
from minipulsar.metadata import MetadataStore, SessionEvent
from minipulsar.supervision import spawn

log = logging.getLogger(__name__)


class BrokerRegistration:
    def __init__(self, store: MetadataStore, identity: BrokerIdentity, cluster_name: str) -> None:
        self._store = store
        self._identity = identity
        self._cluster_name = cluster_name
        self._closing = False

    async def start(self) -> None:
        await self._register()
        self._store.add_session_listener(self._session_event)

    def close(self) -> None:
        """Register no more (the key goes with the session)."""
        self._closing = True

    def _session_event(self, event: SessionEvent) -> None:
        if event is SessionEvent.SESSION_REESTABLISHED and not self._closing:
            spawn(self._register_again(), name="broker registration", logger=log)

    async def _register_again(self) -> None:
        try:
            await self._register()
        except MiniPulsarError as error:
            log.warning("registering %s again failed: %s", self._identity.broker_id, error)

    async def _register(self) -> None:
        identity = self._identity
        info = {
            "pulsarServiceUrl": identity.service_url,
            "webServiceUrl": identity.web_service_url,
            "cluster": self._cluster_name,
        }
        await self._store.put(f"{BROKERS_PATH}/{identity.broker_id}", json.dumps(info).encode(), ephemeral=True)
