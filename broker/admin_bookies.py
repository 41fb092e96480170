"""The bookies as this broker sees them: Pulsar's ``GET /admin/v2/bookies/all``, and what the
web console and ``broker-stats/bookies`` read through :class:`ClusterBookies`.

- ``GET /admin/v2/bookies/all``: ``{"bookies": [{"bookieId": "host:port"}, …]}`` (Pulsar's
  ``BookiesClusterInfo``), every bookie of the cluster: as BookKeeper's ``getAllBookies``, those
  with a cookie under ``/ledgers/cookies`` (a bookie that is down now included), plus any
  registered one; sorted.

Invariants:

- read-only: nothing here writes to the metadata store or to a bookie;
- a bookie's load report is asked for (BOOKIE_INFO) only when the caller asks, with the
  caller's deadline; a bookie that is not registered is never contacted (no connection attempts
  to a bookie that is down).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from minipulsar.bookkeeper.bookie_client import BookieClient
from minipulsar.bookkeeper.bookie_registry import BookieRegistry, BookieSet
from minipulsar.bookkeeper.quarantine import BookieQuarantine
from minipulsar.errors import MiniPulsarError, PersistenceError
from minipulsar.ledger_paths import COOKIES_ROOT
from minipulsar.metadata import MetadataStore
from minipulsar.protocol.commands import BookieInfoResponse


class ClusterBookies:
    """The bookie registry, the cookies, this broker's quarantine and bookie connections."""

    def __init__(
        self, store: MetadataStore, registry: BookieRegistry, client: BookieClient, quarantine: BookieQuarantine
    ) -> None:
        self._store = store
        self._registry = registry
        self._client = client
        self._quarantine = quarantine

    async def registered(self) -> BookieSet:
        return await self._registry.bookies()

    async def all_bookies(self) -> list[str]:
        """Every bookie with a cookie or a registration, sorted."""
        registered = await self._registry.bookies()
        with_cookie = await self._store.children(COOKIES_ROOT)
        return sorted(set(with_cookie) | registered.writable | registered.read_only)

    async def info(self, bookie: str, timeout_s: float) -> dict[str, Any]:
        """The bookie's load report (BOOKIE_INFO's ``info``, as ``/api/v1/bookie/info``).

        Raises:
            MiniPulsarError: no answer within ``timeout_s``, or the request failed.
        """
        try:
            answer = await asyncio.wait_for(self._client.bookie_info(bookie), timeout_s)
        except TimeoutError as error:
            raise PersistenceError(f"no answer from bookie {bookie} within {timeout_s:g} s") from error
        assert isinstance(answer, BookieInfoResponse), answer
        return dict(answer.info or {})

    def quarantine_remaining_s(self) -> dict[str, float]:
        return self._quarantine.remaining_s()

    def pending_requests(self, bookie: str) -> int:
        return self._client.outstanding(bookie)


def bookie_routes(bookies: ClusterBookies) -> list[web.RouteDef]:
    async def all_bookies(request: web.Request) -> web.Response:
        try:
            ids = await bookies.all_bookies()
        except MiniPulsarError as error:
            return web.json_response({"reason": str(error)}, status=503)
        return web.json_response({"bookies": [{"bookieId": bookie} for bookie in ids]})

    return [web.get("/admin/v2/bookies/all", all_bookies)]
