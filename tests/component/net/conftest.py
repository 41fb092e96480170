"""Net tests: a real Listener on 127.0.0.1:0 in-process, on the default loop and on uvloop.

Each async test runs once per event loop; ``MINIPULSAR_UVLOOP=1`` (or ``0``) picks one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio

from minipulsar.net.connection import Connection
from minipulsar.net.server import Listener
from tests.support.loops import every_event_loop
from tests.support.net import TestServerConnection

pytest_asyncio_loop_factories = every_event_loop


class ServerFixture:
    """A listener plus the knobs its connections are built with."""

    def __init__(self) -> None:
        self.connection_kwargs: dict = {}
        self.listener = Listener(lambda: TestServerConnection(**self.connection_kwargs))
        self.host, self.port = "", 0

    @property
    def connections(self) -> set[TestServerConnection]:
        return self.listener.connections  # type: ignore[return-value]


@pytest_asyncio.fixture
async def server() -> AsyncIterator[ServerFixture]:
    fixture = ServerFixture()
    fixture.host, fixture.port = await fixture.listener.start("127.0.0.1", 0)
    try:
        yield fixture
    finally:
        await fixture.listener.close()


@pytest_asyncio.fixture
async def clients() -> AsyncIterator[list[Connection]]:
    """Register client connections here; they are aborted at teardown."""
    opened: list[Connection] = []
    try:
        yield opened
    finally:
        for connection in opened:
            connection.abort()
        async with asyncio.timeout(5):
            await asyncio.gather(*(c.wait_closed() for c in opened), return_exceptions=True)
