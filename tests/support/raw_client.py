"""Raw protocol clients for tests: the wire seen without the product's client on top.

- :class:`RawClient` is the library's :class:`~minipulsar.net.Connection` with nothing on top:
  ``request()`` and its response (or the ERROR as a typed exception); pushed commands are
  dropped. Open it with ``await connect(RawClient, host, port)``.
- :class:`RawPeer` is a bare socket speaking frames by hand: it sends commands, wire maps or
  any bytes, and reads frames back as wire maps or commands. A read waits at most
  ``read_timeout_s`` and returns ``None`` once the server closed (or reset) the connection.
- :class:`RawBookieClient` is a :class:`RawPeer` that numbers its requests and collects the
  answer to each (exactly one per request id) from a bookie.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable, Mapping
from typing import Any

import msgpack

from minipulsar.net.connection import Connection
from minipulsar.protocol.codec import encode_bytes
from minipulsar.protocol.commands import (
    PROTOCOL_VERSION,
    AddEntry,
    AddEntryResponse,
    Connect,
    Connected,
    ReadEntry,
    ReadEntryResponse,
)
from minipulsar.protocol.frames import LENGTH, FrameDecoder
from minipulsar.protocol.schema import Command, decode_command

RAW_READ_TIMEOUT_S = 5.0
"""How long a raw read waits for the server's next frame before the test fails."""
RAW_FRAME_BYTES_MAX = 1 << 30
"""Frames a raw peer accepts: anything a server may send (garbage tests provoke big answers)."""
KEEPALIVE_TYPES = ("PING", "PONG")


class RawClient(Connection):
    """A bare client connection: requests and their responses, nothing else."""

    def command_received(self, command: Command) -> None:
        pass


def wire_frame(wire: object) -> bytes:
    """One frame holding ``wire`` packed as it is (no check that it is a valid command)."""
    body = msgpack.packb(wire, use_bin_type=True)
    return LENGTH.pack(len(body)) + body


class RawPeer:
    """A plain socket speaking frames by hand: sends anything, reads frames until EOF."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, read_timeout_s: float = RAW_READ_TIMEOUT_S
    ) -> None:
        self.reader, self.writer = reader, writer
        self.read_timeout_s = read_timeout_s
        self._frames = FrameDecoder(RAW_FRAME_BYTES_MAX)

    @classmethod
    async def open(cls, host: str, port: int, read_timeout_s: float = RAW_READ_TIMEOUT_S) -> RawPeer:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, read_timeout_s)

    async def send(self, data: Command | Iterable[Command] | Mapping[str, Any] | bytes) -> None:
        """One write of a command, of several commands, of a wire map, or of raw bytes."""
        if isinstance(data, Command):
            data = encode_bytes(data)
        elif isinstance(data, Mapping):
            data = wire_frame(dict(data))
        elif not isinstance(data, bytes | bytearray):
            data = b"".join(map(encode_bytes, data))
        self.writer.write(data)
        await self.writer.drain()

    async def handshake(self) -> Command:
        """CONNECT; returns the answer (CONNECTED, or the ERROR of a refusing server)."""
        await self.send(Connect(id=0, protocol_version=PROTOCOL_VERSION, client_version="raw"))
        answer = await self.receive()
        assert answer is not None, "closed during the handshake"
        return answer

    async def receive_map(self, timeout_s: float | None = None) -> dict[str, Any] | None:
        """The next frame's wire map; ``None`` at EOF (or a reset).

        Raises:
            TimeoutError: nothing came within ``timeout_s`` (default: ``read_timeout_s``).
        """
        async with asyncio.timeout(self.read_timeout_s if timeout_s is None else timeout_s):
            while (body := self._frames.next_frame()) is None:
                try:
                    data = await self.reader.read(65536)
                except ConnectionResetError:  # closed with our unread bytes still in its buffer
                    return None
                if not data:
                    return None
                self._frames.compact()
                self._frames.feed(data)
        wire: dict[str, Any] = msgpack.unpackb(body, raw=False)
        return wire

    async def receive(self, *, keepalive: bool = False, timeout_s: float | None = None) -> Command | None:
        """The next command, skipping PING and PONG unless ``keepalive``; ``None`` at EOF."""
        while True:
            wire = await self.receive_map(timeout_s)
            if wire is None:
                return None
            if keepalive or wire.get("t") not in KEEPALIVE_TYPES:
                return decode_command(wire)

    async def wait_eof(self) -> None:
        """Read (and drop) everything until the peer closes; fails after the read timeout."""
        async with asyncio.timeout(self.read_timeout_s):
            while True:
                try:
                    data = await self.reader.read(65536)
                except ConnectionResetError:
                    return
                if not data:
                    return

    def close(self) -> None:
        self.writer.close()


class RawBookieClient(RawPeer):
    """Numbered requests to a bookie and their answers, by request id.

    Invariant: every response read has the id of a request this client sent, and comes once.
    """

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, read_timeout_s: float = RAW_READ_TIMEOUT_S
    ) -> None:
        super().__init__(reader, writer, read_timeout_s)
        self._ids = itertools.count(2)
        self.received: list[Command] = []
        """Every response, in arrival order."""

    @classmethod
    async def connected(cls, host: str, port: int, read_timeout_s: float = 10.0) -> RawBookieClient:
        """A client past its handshake."""
        reader, writer = await asyncio.open_connection(host, port)
        client = cls(reader, writer, read_timeout_s)
        assert isinstance(await client.handshake(), Connected)
        return client

    def next_id(self) -> int:
        return next(self._ids)

    def add(
        self, ledger_id: int, entry_id: int, payload: bytes, recovery: bool = False, master_key: bytes = b""
    ) -> AddEntry:
        """An ADD_ENTRY with the next id and ``lac = entry_id - 1`` (not sent)."""
        return AddEntry(
            id=self.next_id(),
            ledger_id=ledger_id,
            entry_id=entry_id,
            payload=payload,
            lac=entry_id - 1,
            recovery=recovery,
            master_key=master_key,
        )

    async def request(self, command: Command) -> Command:
        await self.send(command)
        return (await self.answers([command]))[command.id]  # type: ignore[attr-defined]

    async def answers(self, commands: list[Command]) -> dict[int, Command]:
        """The response (or ERROR) to each of ``commands``, by request id; fails on a missing one."""
        wanted = {command.id for command in commands}  # type: ignore[attr-defined]
        got: dict[int, Command] = {}
        while not wanted <= got.keys():
            wire = await self.receive_map()
            assert wire is not None, f"closed before answering {sorted(wanted - got.keys())}"
            if wire.get("t") in KEEPALIVE_TYPES:
                continue
            response = decode_command(wire)
            self.received.append(response)
            request_id = wire.get("id")
            assert request_id is not None, f"unrequested {response!r}"
            assert request_id not in got, f"two answers to request {request_id}"
            got[request_id] = response
        return got

    async def read_all(self, ledger_id: int, count: int) -> list[tuple[int, bytes]]:
        """Entries ``0 .. count-1`` of a ledger, in as many READ_ENTRY requests as it takes."""
        got: list[tuple[int, bytes]] = []
        while len(got) < count:
            response = await self.request(
                ReadEntry(id=self.next_id(), ledger_id=ledger_id, first_entry_id=len(got), count=count - len(got))
            )
            assert isinstance(response, ReadEntryResponse), response
            got.extend((entry_id, payload) for entry_id, payload in response.entries)
        return got


def is_ack(response: Command, add: AddEntry) -> bool:
    """``response`` acknowledges ``add``."""
    return isinstance(response, AddEntryResponse) and (response.ledger_id, response.entry_id) == (
        add.ledger_id,
        add.entry_id,
    )


async def add_entry(client: RawClient, ledger_id: int, entry_id: int, payload: bytes, lac: int = -1, **kw: Any) -> Any:
    """One ADD_ENTRY on a :class:`RawClient` to a bookie; its response."""
    return await client.request(AddEntry, ledger_id=ledger_id, entry_id=entry_id, payload=payload, lac=lac, **kw)


async def read_entries(
    client: RawClient, ledger_id: int, first: int, count: int = 1, **kw: Any
) -> list[tuple[int, bytes]]:
    """One READ_ENTRY on a :class:`RawClient` to a bookie: the (entry id, payload) pairs it answered."""
    response = await client.request(ReadEntry, ledger_id=ledger_id, first_entry_id=first, count=count, **kw)
    assert isinstance(response, ReadEntryResponse), response
    return [(entry_id, payload) for entry_id, payload in response.entries]
