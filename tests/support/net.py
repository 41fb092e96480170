"""Test peers for the connection layer: a scripted server, a recording client, a raw socket."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import msgpack

from minipulsar.errors import ServerError, error_for_code
from minipulsar.net.connection import Connection
from minipulsar.net.server import ServerConnection, handles
from minipulsar.protocol.codec import CommandDecoder, encode_bytes
from minipulsar.protocol.commands import (
    PROTOCOL_VERSION,
    BookieInfo,
    Connect,
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
from minipulsar.protocol.frames import LENGTH
from minipulsar.protocol.schema import Command

RAW_READ_TIMEOUT_S = 5.0


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


class RawPeer:
    """A plain socket speaking frames by hand: sends anything, reads commands until EOF."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = CommandDecoder()

    @classmethod
    async def open(cls, host: str, port: int) -> RawPeer:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def send(self, data: Command | dict | bytes) -> None:
        if isinstance(data, Command):
            data = encode_bytes(data)
        elif isinstance(data, dict):
            body = msgpack.packb(data, use_bin_type=True)
            data = LENGTH.pack(len(body)) + body
        self.writer.write(data)
        await self.writer.drain()

    async def handshake(self) -> Command:
        await self.send(Connect(id=0, protocol_version=PROTOCOL_VERSION, client_version="raw"))
        return await self.receive()

    async def receive(self) -> Command | None:
        """The next command, skipping PINGs; ``None`` at EOF (or a reset)."""
        async with asyncio.timeout(RAW_READ_TIMEOUT_S):
            while True:
                command = self.decoder.next_command()
                if command is not None:
                    if command.TYPE in ("PING", "PONG"):
                        continue
                    return command
                try:
                    data = await self.reader.read(65536)
                except ConnectionResetError:
                    return None
                if not data:
                    return None
                self.decoder.feed(data)

    async def wait_eof(self) -> None:
        """Read (and drop) everything until the peer closes; fails after the read timeout."""
        async with asyncio.timeout(RAW_READ_TIMEOUT_S):
            while True:
                try:
                    data = await self.reader.read(65536)
                except ConnectionResetError:
                    return
                if not data:
                    return

    def close(self) -> None:
        self.writer.close()
