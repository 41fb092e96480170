"""Lookup on real processes: redirects are followed with
the broker's authoritative flag, a redirect loop fails clearly, a multi-host service URL moves
past a dead host, and errors name their root cause instead of a bare timeout.

Redirects need brokers that redirect: :class:`RedirectingBroker` is a stand-in that speaks the
real protocol on a real socket and answers LOOKUP with a redirect, as an overloaded or
non-owning broker would (everything else goes to the real cluster it points to).
"""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from minipulsar import Client, ConnectError, InitialPosition
from minipulsar.client.exceptions import TooManyLookupRedirects
from minipulsar.client.retry import LAST_ATTEMPT_S_MIN
from minipulsar.errors import ServiceNotReadyError
from minipulsar.net import Listener, ServerConnection, handles
from minipulsar.protocol import commands as cmd
from tests.support.net import unused_port


class RedirectingBroker:
    """A listener whose connections answer LOOKUP with ``redirect`` to ``target`` (itself when
    None), with ``authoritative``; it records the ``authoritative`` flag of each lookup."""

    def __init__(self, target: str | None = None, authoritative: bool = False) -> None:
        self.target = target
        self.authoritative = authoritative
        self.lookups: list[bool] = []
        self.url = ""
        self._listener = Listener(lambda: _Redirecting(self))

    async def __aenter__(self) -> RedirectingBroker:
        host, port = await self._listener.start("127.0.0.1", 0)
        self.url = f"pulsar://{host}:{port}"
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self._listener.close()


class _Redirecting(ServerConnection):
    def __init__(self, broker: RedirectingBroker) -> None:
        super().__init__()
        self.broker = broker

    @handles(cmd.Lookup)
    def lookup(self, command: cmd.Lookup) -> None:
        self.broker.lookups.append(command.authoritative)
        self.send(
            cmd.LookupResponse(
                id=command.id,
                kind="redirect",
                broker_url=self.broker.target or self.broker.url,
                authoritative=self.broker.authoritative,
            )
        )

    @handles(cmd.PartitionedMetadata)
    def partitioned_metadata(self, command: cmd.PartitionedMetadata) -> None:
        self.send(cmd.PartitionedMetadataResponse(id=command.id, partitions=0))


async def test_redirects_are_followed_carrying_the_authoritative_flag(cluster) -> None:
    """Goal: a lookup redirected twice reaches the real broker, and each hop is asked with the
    ``authoritative`` flag the previous hop sent. Method: the service URL is broker A, which
    redirects (authoritative) to B, which redirects to the real broker; a message goes through."""
    async with RedirectingBroker(cluster.service_url) as second:
        async with RedirectingBroker(second.url, authoritative=True) as first:
            async with Client(first.url) as client:
                consumer = await client.subscribe("redirected", "sub", initial_position=InitialPosition.Earliest)
                producer = await client.create_producer("redirected")
                await producer.send(b"via two redirects")
                assert (await consumer.receive(timeout_millis=10_000)).data() == b"via two redirects"
                assert client._lookup.redirects == 4, "two hops for each of the two lookups"
            assert first.lookups == [False, False], "the client starts without authority"
            assert second.lookups == [True, True], "then carries what the redirect said"


async def test_a_redirect_loop_fails_at_max_lookup_redirects_without_retrying() -> None:
    """Goal: past ``max_lookup_redirects`` the lookup fails at once with an error saying so
    (a loop is not worth retrying until the lookup timeout). Method: a broker that redirects
    to itself; max_lookup_redirects=3; the lookup timeout is long."""
    async with RedirectingBroker() as looping:
        async with Client(looping.url, max_lookup_redirects=3, lookup_timeout_ms=30_000) as client:
            started = time.monotonic()
            with pytest.raises(TooManyLookupRedirects, match="redirected more than 3 times"):
                await client.create_producer("loop")
            assert time.monotonic() - started < 5
        assert len(looping.lookups) == 4, "the first ask plus 3 redirects"


async def test_a_multi_host_service_url_moves_past_a_dead_host(cluster) -> None:
    """Goal: with ``pulsar://dead,alive`` lookups go on to the second host after the first
    refuses, and stay there. Method: create a producer and a consumer, exchange a message."""
    alive = cluster.service_url.removeprefix("pulsar://")
    async with Client(f"pulsar://127.0.0.1:{unused_port()},{alive}", lookup_timeout_ms=10_000) as client:
        producer = await client.create_producer("rotated")
        consumer = await client.subscribe("rotated", "sub", initial_position=InitialPosition.Earliest)
        await producer.send(b"through the second host")
        assert (await consumer.receive(timeout_millis=10_000)).data() == b"through the second host"
        assert "{}:{}".format(*client._lookup.service_address) == alive


async def test_an_unreachable_cluster_fails_after_the_lookup_timeout_naming_the_refused_hosts() -> None:
    """Goal: when no host of the service URL accepts connections the error comes after
    ``lookup_timeout_ms`` (retries with backoff in between) and says which host refused.
    Method: two dead ports, lookup_timeout_ms=1500."""
    ports = unused_port(), unused_port()
    async with Client(f"pulsar://127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}", lookup_timeout_ms=1500) as client:
        started = time.monotonic()
        with pytest.raises(ConnectError) as raised:
            await client.create_producer("nowhere")
        elapsed_s = time.monotonic() - started
    assert 1.3 <= elapsed_s < 3
    message = str(raised.value)
    assert "cannot connect to 127.0.0.1:" in message and "gave up after" in message
    assert any(f"127.0.0.1:{port}" in message for port in ports)


async def test_a_broker_without_writable_bookies_is_named_as_the_cause(cluster) -> None:
    """Goal: creating a producer while no bookie is writable fails after the operation timeout
    with the broker's reason (not enough bookies), not a bare timeout. Method: stop the only
    bookie; create a producer with operation_timeout_seconds=2."""
    await asyncio.to_thread(cluster.bookies[0].stop)
    async with Client(cluster.service_url, operation_timeout_seconds=2) as client:
        started = time.monotonic()
        with pytest.raises(ServiceNotReadyError) as raised:
            await client.create_producer("t")
        assert time.monotonic() - started < 5
    message = str(raised.value)
    assert "needs 1 bookies, 0 available (0 writable)" in message, message
    # The last attempt is not started with less than LAST_ATTEMPT_S_MIN left: 1.9s or 2.0s.
    gave_up = re.search(r"gave up after (\d+\.\d)s", message)
    assert gave_up and 2.0 - LAST_ATTEMPT_S_MIN - 0.05 <= float(gave_up.group(1)) <= 2.5, message
