"""The asyncio side of the protocol: one :class:`Connection` per TCP connection.

It frames bytes with the sans-IO :class:`CommandDecoder`, answers PING, resolves responses
through the :class:`RequestTable`, and hands every other command to
:meth:`Connection.command_received`, synchronously: a handler resolves a future or queues
work, it never awaits in the read path. Writes coalesce per loop iteration.

It is an ``asyncio.BufferedProtocol``: the transport reads straight into the decoder's
receive buffer (:meth:`get_buffer` / :meth:`buffer_updated`), so a read costs no ``bytes``
object and no copy, and ~100 KiB frames do not churn malloc (docs/design.md §6).
:meth:`data_received` still takes bytes from callers that feed a connection by hand.

Keep-alive follows Pulsar's ``keepAliveIntervalSeconds``: when nothing arrived for one
interval we send PING; when nothing arrived for two, the peer is gone and we close.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

from minipulsar.errors import (
    ConnectionClosedError,
    ErrorCode,
    FrameTooLargeError,
    MalformedCommandError,
    MiniPulsarError,
)
from minipulsar.net.rpc import RequestTable, ResponseCallback
from minipulsar.net.writer import CoalescingWriter
from minipulsar.protocol.codec import MsgpackWire
from minipulsar.protocol.commands import Error, Ping, Pong
from minipulsar.protocol.frames import DEFAULT_MAX_FRAME_SIZE, PIPELINE_CAPACITY
from minipulsar.protocol.schema import Command, request_id

log = logging.getLogger(__name__)

DEFAULT_KEEPALIVE_INTERVAL_S = 30.0  # Pulsar: keepAliveIntervalSeconds
DEFAULT_REQUEST_TIMEOUT_S = 30.0  # Pulsar client: operationTimeoutSeconds
SCRATCH_BYTES = 256 * 1024
"""Read size for subclasses that override ``data_received``."""
LINGER_S = 2.0
"""How long a connection closed for a protocol error waits for the peer to close its side."""


class Wire(Protocol):
    """How commands cross one connection's socket: bytes in, commands out, and back.

    Every connection starts on minipulsar's own protocol (:class:`MsgpackWire`); the broker's
    client port moves a connection whose first bytes are Pulsar's binary protocol onto
    :class:`minipulsar.binary_protocol.wire.PulsarWire`, which speaks the same commands.
    """

    @property
    def max_frame_size(self) -> int: ...

    def get_buffer(self, sizehint: int) -> memoryview: ...

    def buffer_updated(self, nbytes: int) -> None: ...

    def feed(self, data: bytes | bytearray | memoryview) -> None: ...

    def next_command(self) -> Command | None:
        """Raises FrameTooLargeError (fatal) or MalformedCommandError (that frame skipped)."""
        ...

    def compact(self) -> None: ...

    def discard(self) -> None: ...

    def encode(self, command: Command) -> tuple[bytes, bytes | memoryview]:
        """``(header, body)`` of the frame carrying ``command``, written without joining them."""
        ...


class Connection(asyncio.BufferedProtocol):
    """Framing, request correlation, keep-alive and coalesced writes for one peer.

    Subclasses implement :meth:`command_received` and may override :meth:`closed`.
    """

    receive_pipeline_bytes: int = PIPELINE_CAPACITY
    """What the receive buffer grows to once frames pile up (a subclass receiving big frames
    at a high rate asks for more; see :class:`minipulsar.protocol.frames.FrameDecoder`)."""

    def __init__(
        self,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        keepalive_interval_s: float = DEFAULT_KEEPALIVE_INTERVAL_S,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        wire: Wire | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._decoder: Wire = wire or MsgpackWire(max_frame_size, self.receive_pipeline_bytes)
        self._requests = RequestTable(self._loop)
        self.keepalive_interval_s = keepalive_interval_s
        self.request_timeout_s = request_timeout_s
        self.transport: asyncio.Transport | None = None
        self.writer: CoalescingWriter | None = None
        self.peer = "?"
        self._last_received = time.monotonic()
        self._keepalive: asyncio.TimerHandle | None = None
        self.close_reason: MiniPulsarError | None = None
        self.closed_future: asyncio.Future[None] = self._loop.create_future()
        self._discarding = False

    # -- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream protocol is handed a stream Transport (asyncio's contract); uvloop's does not
        # subclass asyncio.Transport, so there is nothing to check it with at run time.
        self.transport = cast(asyncio.Transport, transport)
        self.writer = CoalescingWriter(self.transport, self._loop)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._requests.name = self.peer
        self._last_received = time.monotonic()
        if self.keepalive_interval_s > 0:
            self._keepalive = self._loop.call_later(self.keepalive_interval_s, self._check_keepalive)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "data_received" in vars(cls):
            # A subclass that reads bytes itself keeps getting them: read into a scratch
            # buffer and hand over a copy (the slower, pre-BufferedProtocol path).
            cls.get_buffer = Connection._scratch_buffer  # type: ignore[method-assign]  # chosen per subclass
            cls.buffer_updated = Connection._scratch_updated  # type: ignore[method-assign]  # chosen per subclass

    def _scratch_buffer(self, sizehint: int) -> memoryview:
        scratch = self.__dict__.get("_scratch")
        if scratch is None:
            scratch = self.__dict__["_scratch"] = memoryview(bytearray(SCRATCH_BYTES))
        return scratch

    def _scratch_updated(self, nbytes: int) -> None:
        self.data_received(bytes(self.__dict__["_scratch"][:nbytes]))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self._decoder.buffer_updated(nbytes)
        self._received()

    def data_received(self, data: bytes) -> None:
        """Bytes read elsewhere (the transport itself calls :meth:`buffer_updated`)."""
        if not self._discarding:
            self._decoder.feed(data)
            self._received()

    def _received(self) -> None:
        """Dispatch every complete frame buffered, then compact once."""
        decoder = self._decoder
        if self._discarding:
            decoder.discard()
            return
        self._last_received = time.monotonic()
        next_command, dispatch = decoder.next_command, self._dispatch
        try:
            while True:
                try:
                    command = next_command()
                except MalformedCommandError as error:
                    self.invalid_command(error)
                    continue
                if command is None:
                    break
                dispatch(command)
                transport = self.transport
                if transport is None or transport.is_closing() or self._discarding:
                    break  # closing: the frames behind this one are never handled
        except FrameTooLargeError as error:
            log.warning("%s: %s; closing the connection", self.peer, error)
            self.send(Error(code=ErrorCode.TOO_LARGE.value, message=str(error)))
            self.close_after_error(error)
        finally:
            decoder.compact()
            self.commands_received()

    def pause_writing(self) -> None:
        assert self.writer is not None
        self.writer.pause()

    def resume_writing(self) -> None:
        assert self.writer is not None
        self.writer.resume()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._keepalive is not None:
            self._keepalive.cancel()
        reason = self.close_reason or ConnectionClosedError(
            f"connection to {self.peer} closed" + (f": {exc}" if exc else "")
        )
        self.close_reason = reason
        self._requests.fail_all(self._closed_error())
        if self.writer is not None:
            self.writer.close()
        self.transport = None
        if not self.closed_future.done():
            self.closed_future.set_result(None)
        self.closed(reason)  # last: a bug in a subclass's hook reaches the loop's exception handler

    # -- dispatch -------------------------------------------------------------------------------

    def _dispatch(self, command: Command) -> None:
        if command.RESPONSE:
            answered = request_id(command)
            if answered is not None and self._requests.complete(answered, command):
                return
        cls = type(command)
        if cls is Ping:
            self.send(Pong())
        elif cls is Pong:
            pass
        else:
            self.command_received(command)

    def command_received(self, command: Command) -> None:
        """A command that is not a response to one of our requests. Must not block."""
        raise NotImplementedError

    def commands_received(self) -> None:
        """Hook: every complete command of one read has been dispatched. A subclass that
        collects work in :meth:`command_received` (e.g. a bookie's adds) does it here in one go."""

    def invalid_command(self, error: MalformedCommandError) -> None:
        """A well-framed but invalid body: answer ERROR and keep serving the connection."""
        log.warning("%s: invalid command: %s", self.peer, error)
        self.send(Error(code=error.code.value, message=str(error), id=error.request_id))

    def closed(self, reason: MiniPulsarError) -> None:
        """Hook: the connection is gone and every pending request has been failed."""

    # -- sending --------------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing() and not self._discarding

    def send(self, command: Command) -> None:
        """Queue ``command``; silently dropped once the connection is closing."""
        transport, writer = self.transport, self.writer
        if transport is None or writer is None or transport.is_closing() or self._discarding:  # not is_open
            return
        header, body = self._decoder.encode(command)
        writer.write(header, body)

    def switch_wire(self, wire: Wire) -> None:
        """Speak ``wire`` from now on; call before any frame was decoded."""
        self._decoder = wire

    def send_encoded(self, header: bytes, body: bytes | memoryview) -> None:
        """Queue one frame given in two parts (e.g. :func:`~minipulsar.protocol.codec.encode_message`'s
        header and the entry payload, never joined); dropped like :meth:`send`."""
        transport, writer = self.transport, self.writer
        if transport is None or writer is None or transport.is_closing() or self._discarding:
            return
        writer.write(header, body)

    def send_frame(self, frame: bytes) -> None:
        """Queue an already encoded frame (length prefix included, e.g. from
        :func:`~minipulsar.protocol.codec.encode_add_entry_response`); dropped like :meth:`send`."""
        transport, writer = self.transport, self.writer
        if transport is None or writer is None or transport.is_closing() or self._discarding:
            return
        writer.write_frame(frame)

    def request(self, cls: type[Command], *, timeout_s: float | None = None, **fields: Any) -> asyncio.Future[Command]:
        """Send ``cls(id=<new id>, **fields)``; the future resolves with the response command.

        The future fails with the typed :class:`ServerError` for an ERROR answer,
        :class:`RequestTimeoutError` after ``timeout_s``, or :class:`ConnectionClosedError`.
        """
        if not self.is_open:
            future: asyncio.Future[Command] = self._loop.create_future()
            future.set_exception(self._closed_error())
            return future
        # Build the command before registering it: a bad field raises TypeError here instead
        # of leaving a request that was never sent pending until its timeout.
        build: Callable[..., Command] = cls  # a request class takes ``id`` and its fields by name
        rid = self._requests.new_id()
        command = build(id=rid, **fields)
        future = self._requests.register(rid, cls.TYPE, timeout_s or self.request_timeout_s)
        self.send(command)
        return future

    def new_request_id(self) -> int:
        """An id for :meth:`request_frame` (a request encoded by the caller)."""
        return self._requests.new_id()

    def request_frame(
        self, rid: int, prefix: bytes, body: bytes | memoryview, description: str, callback: ResponseCallback
    ) -> None:
        """Send the request frame ``prefix + body`` (encoded by the caller with ``rid`` from
        :meth:`new_request_id`, e.g. :func:`~minipulsar.protocol.codec.encode_add_entry`) and
        call ``callback(response, error)`` once: with the response, the ERROR's typed error, a
        :class:`RequestTimeoutError`, or :class:`ConnectionClosedError` (on a later loop
        iteration when the connection is already closed). ``body`` is written as it is, not copied."""
        if not self.is_open:
            self._loop.call_soon(callback, None, self._closed_error())
            return
        self._requests.register_callback(rid, description, self.request_timeout_s, callback)
        assert self.writer is not None
        self.writer.write(prefix, body)

    def _closed_error(self) -> ConnectionClosedError:
        """What a request on a closed connection fails with: always ConnectionClosedError (a
        retriable error, whatever closed the connection), naming the close reason."""
        reason = self.close_reason
        if isinstance(reason, ConnectionClosedError):
            return ConnectionClosedError(str(reason))
        message = f"connection to {self.peer} is closed"
        return ConnectionClosedError(f"{message}: {reason}" if reason else message)

    @property
    def pending_requests(self) -> int:
        return len(self._requests)

    def close(self, reason: MiniPulsarError | None = None) -> None:
        """Flush what is queued, then close."""
        if self.close_reason is None:
            self.close_reason = reason
        if self.transport is not None and not self.transport.is_closing():
            assert self.writer is not None
            self.writer.flush()
            self.transport.close()

    def close_after_error(self, reason: MiniPulsarError) -> None:
        """Send what is queued (the ERROR), half-close, and drop any further input.

        Closing outright with the peer's unread bytes in our receive buffer makes the kernel
        answer with a reset, which can destroy the ERROR before the peer reads it. So we send
        FIN and wait (at most ``LINGER_S``) for the peer to close its side.
        """
        if self.close_reason is None:
            self.close_reason = reason
        transport = self.transport
        if transport is None or transport.is_closing() or self._discarding:
            return
        self._discarding = True
        assert self.writer is not None
        self.writer.flush()
        if transport.can_write_eof():
            transport.write_eof()
            self._loop.call_later(LINGER_S, self.abort)
        else:
            transport.close()

    def abort(self, reason: MiniPulsarError | None = None) -> None:
        if self.close_reason is None:
            self.close_reason = reason
        if self.transport is not None:
            self.transport.abort()

    async def wait_closed(self) -> None:
        await asyncio.shield(self.closed_future)

    # -- keep-alive -----------------------------------------------------------------------------

    def _check_keepalive(self) -> None:
        idle_s = time.monotonic() - self._last_received
        if idle_s >= 2 * self.keepalive_interval_s:
            log.warning("%s: nothing received for %.1fs; closing", self.peer, idle_s)
            self.abort(ConnectionClosedError(f"keep-alive timeout: {self.peer} silent for {idle_s:.1f}s"))
            return
        if idle_s >= self.keepalive_interval_s:
            self.send(Ping())
        self._keepalive = self._loop.call_later(self.keepalive_interval_s / 2, self._check_keepalive)
