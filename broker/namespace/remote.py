"""Calls to other brokers' admin REST (namespace unload fan-out, handing a bundle to a destination).

Invariant: every failure, of the network or of the other broker, is a ServiceNotReadyError.
"""

from __future__ import annotations

import logging

import aiohttp

from minipulsar.errors import ServiceNotReadyError

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 30.0


class RemoteAdmin:
    """One aiohttp session, opened on first use; redirects (307 to a bundle's owner) are followed."""

    def __init__(self, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def put(self, url: str) -> None:
        """PUT ``url``.

        Raises:
            ServiceNotReadyError: unreachable, or an answer other than 2xx (its reason quoted).
        """
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        try:
            async with self._session.put(url) as response:
                if response.status >= 300:
                    raise ServiceNotReadyError(f"PUT {url}: HTTP {response.status} {await response.text()}")
        except (aiohttp.ClientError, TimeoutError) as error:
            raise ServiceNotReadyError(f"PUT {url}: {error!r}") from error

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
