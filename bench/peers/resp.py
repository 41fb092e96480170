"""A minimal pipelining Redis (RESP2) client for the peer bench: commands go out as soon as
they are issued, replies come back in order, any number in flight.

redis-py's asyncio client waits for each command (or each ``pipeline.execute()`` batch)
before the next: one batch in flight. A producer that keeps a window of messages in flight —
what the minipulsar producer and the NATS bench do — needs real pipelining, as the Java and
Go Redis clients (Lettuce, go-redis) do it, so this is that and nothing more.

Invariants: replies are matched to commands strictly in order (RESP has no request ids);
a connection error fails every command in flight.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any

Callback = Callable[[Any, BaseException | None], None]


class RedisError(Exception):
    """An error reply (``-ERR …``)."""


def encode(*args: bytes | str | int) -> bytes:
    """One command as a RESP array of bulk strings."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def parse(buffer: bytes | bytearray, start: int = 0) -> tuple[Any, int] | None:
    """One reply from ``buffer[start:]``: (value, end offset), or None when incomplete."""
    line_end = buffer.find(b"\r\n", start)
    if line_end < 0:
        return None
    kind, head = buffer[start : start + 1], buffer[start + 1 : line_end]
    if kind == b"$":
        length = int(head)
        if length < 0:
            return None, line_end + 2
        end = line_end + 2 + length
        if len(buffer) < end + 2:
            return None
        return bytes(buffer[line_end + 2 : end]), end + 2
    if kind == b"+":
        return bytes(head), line_end + 2
    if kind == b":":
        return int(head), line_end + 2
    if kind == b"-":
        return RedisError(bytes(head).decode(errors="replace")), line_end + 2
    if kind == b"*":
        count = int(head)
        if count < 0:
            return None, line_end + 2
        items, offset = [], line_end + 2
        for _ in range(count):
            parsed = parse(buffer, offset)
            if parsed is None:
                return None
            item, offset = parsed
            items.append(item)
        return items, offset
    raise RedisError(f"unexpected reply type {kind!r}")


class RespConnection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._waiting: collections.deque[Callback] = collections.deque()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @classmethod
    async def open(cls, host: str, port: int) -> RespConnection:
        _, protocol = await asyncio.get_running_loop().create_connection(cls, host, port)
        return protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, command: bytes, callback: Callback) -> None:
        """Write one encoded command; ``callback(reply, error)`` runs when its reply arrives."""
        assert self.transport is not None
        self._waiting.append(callback)
        self.transport.write(command)

    async def call(self, *args: bytes | str | int) -> Any:
        """One command, awaited (set-up and consumer reads)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def done(reply: Any, error: BaseException | None) -> None:
            if not future.done():
                future.set_exception(error) if error is not None else future.set_result(reply)

        self.send(encode(*args), done)
        return await future

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        offset = 0
        waiting = self._waiting
        while waiting:
            parsed = parse(buffer, offset)
            if parsed is None:
                break
            reply, offset = parsed
            callback = waiting.popleft()
            if isinstance(reply, RedisError):
                callback(None, reply)
            else:
                callback(reply, None)
        del buffer[:offset]

    def connection_lost(self, exc: Exception | None) -> None:
        error = ConnectionError(f"redis connection lost: {exc}")
        while self._waiting:
            self._waiting.popleft()(None, error)
        if not self.closed.done():
            self.closed.set_result(None)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
