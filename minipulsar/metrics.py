"""Prometheus metrics and the small aiohttp server every process uses for ``/metrics``.

Metric objects live in the default prometheus-client registry of each process (one server
per process), named as Pulsar and BookKeeper name them (``pulsar_*``, ``bookkeeper_server_*``,
``bookie_*``).
"""

from __future__ import annotations

from collections.abc import Iterable

import prometheus_client
from aiohttp import web


class RegisteredCollector:
    """A custom collector that adds itself to the process's default registry.

    A process normally has one of each; when a test runs several servers in one process, the
    first instance reports and later ones stay unregistered (prometheus-client refuses two
    collectors exporting the same names).
    """

    def __init__(self) -> None:
        try:
            prometheus_client.REGISTRY.register(self)
            self._registered = True
        except ValueError:
            self._registered = False

    def unregister(self) -> None:
        if self._registered:
            prometheus_client.REGISTRY.unregister(self)
            self._registered = False

    def collect(self):  # pragma: no cover - every subclass defines it
        raise NotImplementedError


async def metrics_handler(request: web.Request) -> web.Response:
    body = prometheus_client.generate_latest(prometheus_client.REGISTRY)
    return web.Response(body=body, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})


class HttpServer:
    """An aiohttp app on ``host:port`` (0: any free port) serving ``/metrics`` plus ``routes``."""

    def __init__(self, routes: Iterable[web.RouteDef] = ()) -> None:
        self.app = web.Application()
        self.app.router.add_get("/metrics", metrics_handler)
        self.app.add_routes(list(routes))
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self.port

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
