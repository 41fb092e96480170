"""Test peers for the connection layer: a scripted server, a recording client (a raw socket
is :class:`tests.support.raw_client.RawPeer`), a port nothing listens on and one that swallows
connects."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from minipulsar.errors import ServerError, error_for_code
from minipulsar.net.connection import Connection
from minipulsar.net.server import ServerConnection, handles
from minipulsar.protocol.commands import (
    BookieInfo,
    Lookup,
    LookupResponse,
    MdChildren,
    MdDelete,
    MdGet,
    PartitionedMetadata,
    PartitionedMetadataResponse,
    Seek,
    Unsubscribe,
)
from minipulsar.protocol.schema import Command


class RecordingMixin:
    """Records every command this side sends (PING/PONG included) for keep-alive assertions."""

    sent: list[Command]

    def send(self, command: Command) -> None:
        self.sent.append(command)
        super().send(command)  # type: ignore[misc]

    def sent_of(self, cls: type[Command]) -> int:
        return sum(1 for command in self.sent if type(command) is cls)


class TestServerConnection(RecordingMixin, ServerConnection):
    """Scripted handlers, one behaviour per command type.

    - LOOKUP: answered in a shuffled order once ``lookup_batch`` requests are held
      (so responses arrive out of request order);
    - PARTITIONED_METADATA: answered from a coroutine (the task path);
    - MD_GET: never answered;
    - MD_DELETE / MD_CHILDREN: raise the ServerError whose code is ``path`` (sync / async),
      or RuntimeError for ``path == "boom"``;
    - SEEK: drops the connection without answering;
    - UNSUBSCRIBE: raises an unexpected exception from a coroutine.
    """

    __test__ = False
    lookup_batch = 1

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent = []
        self.held_lookups: list[Lookup] = []

    @handles(Lookup)
    def lookup(self, command: Lookup) -> None:
        self.held_lookups.append(command)
        if len(self.held_lookups) >= self.lookup_batch:
            held, self.held_lookups = self.held_lookups, []
            random.Random(len(held)).shuffle(held)
            for request in held:
                self.send(LookupResponse(id=request.id, kind="connect", broker_url=request.topic))

    @handles(PartitionedMetadata)
    async def partitioned_metadata(self, command: PartitionedMetadata) -> None:
        await asyncio.sleep(0)
        self.send(PartitionedMetadataResponse(id=command.id, partitions=len(command.topic)))

    @handles(MdGet)
    def never_answer(self, command: MdGet) -> None:
        pass

    @handles(MdDelete)
    def fail(self, command: MdDelete) -> None:
        raise _error_named(command.path)

    @handles(MdChildren)
    async def fail_later(self, command: MdChildren) -> None:
        await asyncio.sleep(0)
        raise _error_named(command.path)

    @handles(Seek)
    def drop(self, command: Seek) -> None:
        self.abort()

    @handles(Unsubscribe)
    async def crash(self, command: Unsubscribe) -> None:
        raise KeyError("a handler bug")

    @handles(BookieInfo)
    def crash_sync(self, command: BookieInfo) -> None:
        raise ZeroDivisionError("a handler bug")


def _error_named(code: str) -> Exception:
    if code == "boom":
        return RuntimeError("boom")
    error: ServerError = error_for_code(code, f"raised for {code}")
    return error


class TestClientConnection(RecordingMixin, Connection):
    """A client: records pushed commands instead of handling them."""

    __test__ = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent = []
        self.received: list[Command] = []

    def command_received(self, command: Command) -> None:
        self.received.append(command)


def unused_port() -> int:
    """A port of 127.0.0.1 that was free a moment ago and is closed now: connecting to it is
    refused (until someone else binds it, which the tests that use it do not wait for)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def black_hole() -> Iterator[tuple[str, int]]:
    """A listening socket on 127.0.0.1 whose accept queue is full: a connect to it gets no
    answer (its SYN is dropped), as to a dead host or container — unlike a refused port."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        address: tuple[str, int] = listener.getsockname()
        with socket.create_connection(address, timeout=5):  # fills the queue
            yield address


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports the OS had free a moment ago, for servers that cannot bind port 0
    and report it (ZooKeeper, Docker's published ports, Prometheus): all sockets are held open
    until all are picked, so they are distinct; another process may still take one before the
    server binds it, and the server then fails loudly."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
        return ports
