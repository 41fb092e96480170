"""The broker's HTTP port: /metrics, the admin REST and HTTP lookup, bound before it serves.

The broker's identity names its web port, and the admin routes need the components built from
that identity; so the port is bound first (its number known), and served once the routes exist.

Invariants:

- nothing is served before :meth:`WebServer.serve`: connections made earlier wait in the
  listening socket's backlog;
- :meth:`WebServer.close` releases the port whether or not it was served.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable

from aiohttp import web

from minipulsar.metrics import metrics_handler

BACKLOG = 1024


class WebServer:
    def __init__(self) -> None:
        self._socket: socket.socket | None = None
        self._runner: web.AppRunner | None = None

    def bind(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: any free port) without serving yet; returns the port."""
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
        except OSError:
            sock.close()
            raise
        self._socket = sock
        return int(sock.getsockname()[1])

    async def serve(self, routes: Iterable[web.RouteDef]) -> None:
        """Serve /metrics and ``routes`` on the bound port."""
        assert self._socket is not None, "bind first"
        app = web.Application()
        app.router.add_get("/metrics", metrics_handler)
        app.add_routes(list(routes))
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.SockSite(self._runner, self._socket).start()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
