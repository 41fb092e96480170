"""Binary lookup: which broker serves a topic.

One attempt: ask the current service-URL host with ``authoritative=false``; ``connect`` names
the owner; ``redirect`` means ask the named broker, carrying the ``authoritative`` flag it
sent; more than ``max_lookup_redirects`` redirects is an error (a redirect loop: not retried).

Around the attempts (PIP-91): the lookup has its own deadline, ``lookup_timeout_ms`` (default:
the operation timeout); retriable failures — a host that refuses or drops the connection, a
request timeout, a ``failed`` answer whose code is ServiceNotReady or TooManyRequests (or that
has no code) — are retried with backoff and jitter (100 ms doubling to 30 s) until then;
TopicNotFound, InvalidCommand and the like fail at once. A host that cannot be reached makes
the service URL rotate to its next host. At most ``concurrent_lookup_requests`` lookups are in
flight per client; more wait for a slot (within their deadline). The error raised in the end
names the root cause (:func:`client.retry.gave_up_error`), e.g. the broker's "no writable
bookies" or "cannot connect to host:port: Connection refused", not a bare timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from minipulsar.client.backoff import Backoff
from minipulsar.client.connection import Address, ConnectionPool
from minipulsar.client.exceptions import LookupError, TooManyLookupRedirects
from minipulsar.client.retry import retry_until
from minipulsar.client.service_url import DEFAULT_PORT, ServiceUrl
from minipulsar.errors import ConnectionClosedError, MiniPulsarError, RequestTimeoutError, error_for_code
from minipulsar.net import parse_address
from minipulsar.protocol import commands as cmd

MAX_LOOKUP_REDIRECTS = 20  # Pulsar client: maxLookupRedirects
CONCURRENT_LOOKUP_REQUESTS = 5000  # Pulsar client: concurrentLookupRequest


class LookupService:
    def __init__(
        self,
        pool: ConnectionPool,
        service_url: ServiceUrl,
        *,
        lookup_timeout_s: float,
        max_lookup_redirects: int = MAX_LOOKUP_REDIRECTS,
        concurrent_lookup_requests: int = CONCURRENT_LOOKUP_REQUESTS,
    ) -> None:
        if lookup_timeout_s <= 0:
            raise ValueError(f"lookup timeout must be > 0, got {lookup_timeout_s}")
        if max_lookup_redirects < 0 or concurrent_lookup_requests < 1:
            raise ValueError("max_lookup_redirects must be >= 0 and concurrent_lookup_requests >= 1")
        self._pool = pool
        self.service_url = service_url
        self.lookup_timeout_s = lookup_timeout_s
        self.max_lookup_redirects = max_lookup_redirects
        self._slots = asyncio.Semaphore(concurrent_lookup_requests)
        self.redirects = 0
        """Redirects followed so far (all lookups): for tests and stats."""

    @property
    def service_address(self) -> Address:
        return self.service_url.current()

    async def find_broker(self, topic: str) -> Address:
        """The address of the broker that serves ``topic``.

        Raises:
            TooManyLookupRedirects: more than ``max_lookup_redirects`` redirects.
            MiniPulsarError: a non-retriable error from the broker (e.g. InvalidCommand for a
                bad name), or the last retriable one once ``lookup_timeout_ms`` has passed.
        """
        return await retry_until(
            time.monotonic() + self.lookup_timeout_s,
            lambda remaining_s: self._lookup_once(topic, remaining_s),
            Backoff(),
            f"lookup of {topic}",
        )

    async def partition_count(self, topic: str) -> int:
        """PARTITIONED_METADATA through the service URL (0: not partitioned); retried as lookups."""
        return await retry_until(
            time.monotonic() + self.lookup_timeout_s,
            lambda remaining_s: self._partitions_once(topic, remaining_s),
            Backoff(),
            f"partition metadata of {topic}",
        )

    async def _lookup_once(self, topic: str, remaining_s: float) -> Address:
        async with self._attempt(remaining_s) as service_address:
            address, authoritative = service_address, False
            for _ in range(self.max_lookup_redirects + 1):
                connection = await self._pool.get(*address)
                response = await connection.request(
                    cmd.Lookup, timeout_s=remaining_s, topic=topic, authoritative=authoritative
                )
                assert isinstance(response, cmd.LookupResponse)
                if response.kind == "connect":
                    return parse_address(response.broker_url, DEFAULT_PORT)
                if response.kind != "redirect":
                    raise _failed(response, address, topic)
                address = parse_address(response.broker_url, DEFAULT_PORT)
                authoritative = response.authoritative
                self.redirects += 1
            raise TooManyLookupRedirects(
                f"lookup of {topic} was redirected more than "
                f"{self.max_lookup_redirects} times (last to {_url(address)})"
            )

    async def _partitions_once(self, topic: str, remaining_s: float) -> int:
        async with self._attempt(remaining_s) as service_address:
            connection = await self._pool.get(*service_address)
            response = await connection.request(cmd.PartitionedMetadata, timeout_s=remaining_s, topic=topic)
            assert isinstance(response, cmd.PartitionedMetadataResponse)
            return response.partitions

    @contextlib.asynccontextmanager
    async def _attempt(self, remaining_s: float) -> AsyncIterator[Address]:
        """One attempt: a lookup slot, the ``remaining_s`` budget, and the service-URL host to
        ask; when the attempt cannot reach a broker (refused, dropped, no answer in time) the
        service URL moves on to its next host (apache/pulsar#11688)."""
        address = self.service_address
        try:
            async with asyncio.timeout(remaining_s), self._slots:
                yield address
        except (ConnectionClosedError, RequestTimeoutError, TimeoutError):
            self.service_url.failed(address)
            raise


def _failed(response: cmd.LookupResponse, address: Address, topic: str) -> MiniPulsarError:
    """A ``failed`` answer as the typed error its code names (retriable or not, e.g.
    ServiceNotReady vs TopicNotFound); without a code, a retriable LookupError."""
    message = f"the broker at {_url(address)} could not look up {topic}: {response.message or response.kind}"
    return error_for_code(response.error, message) if response.error else LookupError(message)


def _url(address: Address) -> str:
    return f"pulsar://{address[0]}:{address[1]}"
