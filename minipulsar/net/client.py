"""The client side of a connection: dial, CONNECT, and hand back a ready :class:`Connection`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from minipulsar.errors import ConnectionClosedError, RequestTimeoutError
from minipulsar.net.connection import Connection
from minipulsar.protocol.commands import PROTOCOL_VERSION, Connect, Connected

C = TypeVar("C", bound=Connection)

CLIENT_VERSION = "minipulsar-0.1"
DEFAULT_CONNECT_TIMEOUT_S = 10.0  # Pulsar client: connection_timeout_ms = 10000


def parse_address(url: str, default_port: int) -> tuple[str, int]:
    """``pulsar://host:port``, ``host:port`` or ``host`` → ``(host, port)``."""
    rest = url.split("://", 1)[-1].rstrip("/")
    host, _, port = rest.rpartition(":")
    if not host:
        return rest, default_port
    try:
        return host, int(port)
    except ValueError:
        raise ValueError(f"bad address {url!r}: port {port!r} is not a number") from None


async def connect(
    factory: Callable[[], C],
    host: str,
    port: int,
    *,
    role: str = "client",
    timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> C:
    """Open a TCP connection, exchange CONNECT/CONNECTED and return the connection.

    Raises:
        ConnectionClosedError: the peer refused or dropped the connection.
        RequestTimeoutError: no CONNECTED within ``timeout_s``.
        ServerError: the peer answered CONNECT with an error (version, authentication).
    """
    loop = asyncio.get_running_loop()
    try:
        _, connection = await asyncio.wait_for(loop.create_connection(factory, host, port), timeout_s)
    except TimeoutError:
        raise RequestTimeoutError(f"connecting to {host}:{port} took over {timeout_s}s") from None
    except OSError as exc:
        raise ConnectionClosedError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from exc
    try:
        connected = await connection.request(
            Connect,
            timeout_s=timeout_s,
            protocol_version=PROTOCOL_VERSION,
            client_version=CLIENT_VERSION,
            role=role,
        )
    except BaseException:
        connection.abort()
        raise
    assert isinstance(connected, Connected)
    return connection
