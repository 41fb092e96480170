"""The server side of a connection: the CONNECT handshake, then handlers by command type.

A subclass marks its methods with :func:`handles`. A handler runs synchronously in the read
path; when it returns a coroutine (rare commands that must await: lookups, producer
creation) the connection runs it as a task. Any :class:`MiniPulsarError` a handler raises
goes back to the peer as a typed ERROR; any other exception is logged with its traceback and
answered ``UnknownError`` — one bad request never takes the process down.
"""

from __future__ import annotations

import asyncio
import logging
import types
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, Generic, TypeVar

from minipulsar.errors import (
    InvalidCommandError,
    MiniPulsarError,
    UnsupportedVersionError,
    code_for_error,
)
from minipulsar.net.connection import Connection
from minipulsar.protocol.commands import PROTOCOL_VERSION, Connect, Connected, Error
from minipulsar.protocol.schema import Command, request_id

log = logging.getLogger(__name__)

Handler = Callable[[Any, Any], Any]

CLOSE_GRACE_S = 5.0
"""On shutdown, how long a connection may take to flush its last bytes before it is aborted."""


def handles(*command_types: type[Command]) -> Callable[[Handler], Handler]:
    """Mark a :class:`ServerConnection` method as the handler of ``command_types``."""

    def mark(method: Handler) -> Handler:
        method._handles = command_types  # type: ignore[attr-defined]  # a marker on the function, read by __init_subclass__
        return method

    return mark


class ServerConnection(Connection):
    """One accepted connection; subclasses add handlers with :func:`handles`."""

    SERVER_VERSION: ClassVar[str] = "minipulsar"
    _HANDLERS: ClassVar[dict[type[Command], Handler]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        table: dict[type[Command], Handler] = {}
        for klass in reversed(cls.__mro__):
            for member in vars(klass).values():
                for command_type in getattr(member, "_handles", ()):
                    table[command_type] = member
        cls._HANDLERS = table

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.handshake_done = False
        self.client_version = ""
        self.role = ""
        self._tasks: set[asyncio.Task[None]] = set()

    def command_received(self, command: Command) -> None:
        if not self.handshake_done:
            self._handshake(command)
            return
        handler = self._HANDLERS.get(type(command))
        if handler is None and isinstance(command, Error):
            # An ERROR that answers none of our requests (the peer refusing one of our frames,
            # e.g. TooLarge before it hangs up). Never answer an error with an error: two
            # peers doing so would bounce ERRORs forever.
            log.warning("%s: peer reported %s: %s", self.peer, command.code, command.message)
            return
        if handler is None:
            self.reply_error(command, InvalidCommandError(f"{command.TYPE} is not served here"))
            return
        try:
            result = handler(self, command)
        except Exception as error:  # noqa: BLE001 -- one request's boundary: answered, an unexpected one logged
            self.reply_error(command, error)
            return
        if result is not None and isinstance(result, types.CoroutineType):  # inspect.iscoroutine
            self.spawn(result, command)

    def spawn(self, coroutine: Coroutine[Any, Any, Any], command: Command | None = None) -> None:
        """Run a handler coroutine; its failure is reported to the peer like a sync one."""
        task = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._task_done(t, command))

    def _task_done(self, task: asyncio.Task[None], command: Command | None) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self.reply_error(command, error)

    def reply_error(self, command: Command | None, error: BaseException) -> None:
        """Answer ``command`` with a typed ERROR; unexpected exceptions are logged in full."""
        if not isinstance(error, MiniPulsarError):
            log.error("%s: unexpected error handling %s", self.peer, command.TYPE if command else "?", exc_info=error)
        elif log.isEnabledFor(logging.DEBUG):
            log.debug("%s: %s failed: %s", self.peer, command.TYPE if command else "?", error)
        message = str(error) or type(error).__name__
        answered = request_id(command) if command is not None else None
        self.send(Error(code=code_for_error(error).value, message=message, id=answered))

    def _handshake(self, command: Command) -> None:
        if not isinstance(command, Connect):
            error = InvalidCommandError(f"expected CONNECT as the first command, got {command.TYPE}")
            self.reply_error(command, error)
            self.close_after_error(error)
            return
        if command.protocol_version != PROTOCOL_VERSION:
            refused = UnsupportedVersionError(
                f"protocol version {command.protocol_version} is not supported; this server speaks {PROTOCOL_VERSION}"
            )
            self.reply_error(command, refused)
            self.close_after_error(refused)
            return
        try:
            self.authenticate(command)
        except MiniPulsarError as error:
            self.reply_error(command, error)
            self.close_after_error(error)
            return
        self.handshake_done = True
        self.client_version, self.role = command.client_version, command.role
        self.send(
            Connected(
                id=command.id,
                protocol_version=PROTOCOL_VERSION,
                max_frame_size=self._decoder.max_frame_size,
                server_version=self.SERVER_VERSION,
            )
        )

    def authenticate(self, command: Connect) -> None:
        """Hook: raise AuthenticationError to refuse the peer. Accepts everyone by default."""

    def closed(self, reason: MiniPulsarError) -> None:
        for task in self._tasks:
            task.cancel()


S = TypeVar("S", bound=ServerConnection)


class Listener(Generic[S]):
    """A listening socket and the connections it accepted; closing it closes them all."""

    def __init__(self, factory: Callable[[], S]) -> None:
        self._factory = factory
        self._server: asyncio.base_events.Server | None = None
        self.connections: set[S] = set()

    async def start(self, host: str, port: int, *, serve: bool = True) -> tuple[str, int]:
        """Listen on ``host:port`` (0: any free port); returns the bound address. With
        ``serve=False`` the port is only bound (its number known, nobody connected) until
        :meth:`serve`."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._accept, host, port, reuse_address=True, backlog=1024, start_serving=serve
        )
        bound = self._server.sockets[0].getsockname()
        return bound[0], bound[1]

    async def serve(self) -> None:
        """Accept connections (after ``start(..., serve=False)``)."""
        assert self._server is not None, "not started"
        await self._server.start_serving()

    def _accept(self) -> S:
        connection = self._factory()
        self.connections.add(connection)
        connection.closed_future.add_done_callback(lambda _: self.connections.discard(connection))
        return connection

    def stop_accepting(self) -> None:
        """Refuse new connections; the accepted ones keep running until :meth:`close`."""
        if self._server is not None:
            self._server.close()

    async def close(self, grace_s: float = CLOSE_GRACE_S) -> None:
        """Close every connection, flushing what is queued; a connection whose peer has not
        taken its bytes within ``grace_s`` (a client that stopped reading) is aborted."""
        if self._server is None:
            return
        self._server.close()
        for connection in list(self.connections):
            connection.close()
        closing = [asyncio.ensure_future(c.wait_closed()) for c in list(self.connections)]
        if closing:
            await asyncio.wait(closing, timeout=grace_s)
        for connection in list(self.connections):
            log.warning("%s: the peer did not take its last responses within %.0fs; aborting", connection.peer, grace_s)
            connection.abort()
        if closing:
            await asyncio.gather(*closing, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None
