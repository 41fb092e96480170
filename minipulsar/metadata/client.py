"""MetastoreClient: the :class:`MetadataStore` interface over the network (``metastore://host:port``).

Lifecycle (ZooKeeper's client, with Pulsar's ``SessionEvent`` names):

- :meth:`MetastoreClient.start` connects and creates a session; a supervisor task then
  sends MD_SESSION_KEEPALIVE every timeout/3 and reconnects with backoff when the
  connection drops (``CONNECTION_LOST``). On reconnect it resumes its session
  (``RECONNECTED``) and re-registers its watches;
- the session is lost when the server answers SessionExpired, or when nothing renewed it
  for a whole timeout (``SESSION_LOST``, reported even while disconnected). The client then
  closes the old session on the server (its keys go at once), creates a new one and reports
  ``SESSION_REESTABLISHED``. Ephemeral keys are *not* re-created: their owner does that on
  ``SESSION_REESTABLISHED``, as Pulsar's bookies and brokers do;
- :meth:`close` closes the session: its ephemeral keys go at once.

Requests issued while disconnected wait for the reconnection, up to the operation timeout,
then fail with :class:`ConnectionClosedError` (retriable). A request cut off by a dropped
connection is re-sent only when that is harmless (reads, watches, unconditional puts); a
conditional put or a delete whose outcome is unknown raises instead, so the caller re-reads
and decides. Notifications that fire while disconnected are lost: listeners that cache
should re-read on ``RECONNECTED`` / ``SESSION_REESTABLISHED``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from minipulsar import diagnostics
from minipulsar.errors import (
    ConnectionClosedError,
    MiniPulsarError,
    RequestTimeoutError,
    SessionExpiredError,
)
from minipulsar.metadata.store import (
    GetResult,
    Listener,
    MetadataStore,
    Notification,
    NotificationType,
    SessionEvent,
    SessionListener,
    Stat,
    is_under,
    validate_path,
)
from minipulsar.net.client import connect
from minipulsar.net.connection import Connection
from minipulsar.protocol.commands import (
    Error,
    MdChildren,
    MdChildrenResponse,
    MdDelete,
    MdGet,
    MdGetResponse,
    MdNotification,
    MdPut,
    MdPutResponse,
    MdSessionClose,
    MdSessionCreate,
    MdSessionCreated,
    MdSessionKeepAlive,
    MdWatch,
    Success,
)
from minipulsar.protocol.schema import Command
from minipulsar.supervision import Periodic, guarded

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Command)
A = TypeVar("A")

DEFAULT_PORT = 6680
DEFAULT_OPERATION_TIMEOUT_S = 30.0  # Pulsar: metadataStoreOperationTimeoutSeconds
BACKOFF_S_INITIAL, BACKOFF_S_MAX = 0.1, 2.0
CLOSE_TIMEOUT_S = 5.0
CONNECTION_KEEPALIVE_S_MIN = 0.2


class _MetastoreConnection(Connection):
    """The client's connection: notifications go to the client, closing tells it."""

    def __init__(self, client: MetastoreClient, keepalive_interval_s: float, request_timeout_s: float) -> None:
        super().__init__(keepalive_interval_s=keepalive_interval_s, request_timeout_s=request_timeout_s)
        self._client = client

    def command_received(self, command: Command) -> None:
        if isinstance(command, MdNotification):
            self._client._notification_received(command)
        elif isinstance(command, Error):
            log.warning("metastore %s: %s %s", self.peer, command.code, command.message)
        else:
            log.debug("metastore %s: unexpected %s", self.peer, command.TYPE)

    def closed(self, reason: MiniPulsarError) -> None:
        self._client._connection_closed(self, reason)


class MetastoreClient(MetadataStore):
    """:class:`MetadataStore` backed by a ``minipulsar metastore`` server."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        session_timeout_ms: int = 30_000,
        operation_timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> None:
        self.host, self.port = host, port
        self.session_timeout_ms = session_timeout_ms
        """Requested, then the server's clamped value once a session exists."""
        self.operation_timeout_s = operation_timeout_s
        self.session_id: int | None = None
        self._requested_timeout_ms = session_timeout_ms
        self._conn: _MetastoreConnection | None = None
        self._connected = asyncio.Event()
        self._watches: list[tuple[str, Listener]] = []
        self._session_listeners: list[SessionListener] = []
        self._closed = False
        self._session_lost = False
        self._last_renewed = time.monotonic()
        self._keepalive_suspended = False
        self._backoff_s = BACKOFF_S_INITIAL
        self._next_round_s = 0.0
        self._supervisor = Periodic(
            f"metastore session supervisor ({host}:{port})",
            lambda: self._next_round_s,
            self._supervise_round,
            logger=log,
        )
        self._session_timer: asyncio.TimerHandle | None = None

    @property
    def url(self) -> str:
        return f"metastore://{self.host}:{self.port}"

    @property
    def _timeout_s(self) -> float:
        return self.session_timeout_ms / 1000

    async def start(self) -> None:
        """Connect and create the session.

        Raises:
            ConnectionClosedError, RequestTimeoutError: the server is unreachable.
        """
        conn = await self._dial()
        try:
            await self._open_session(conn)
        except BaseException:
            conn.abort()
            raise
        self._install(conn)
        self._supervisor.start()

    # -- MetadataStore --------------------------------------------------------------------------

    async def get(self, path: str) -> GetResult | None:
        validate_path(path)
        response = await self._call(MdGet, MdGetResponse, path=path)
        if response.version < 0 or response.value is None:
            return None
        return GetResult(
            response.value, Stat(response.version, response.ephemeral, response.created_ms, response.modified_ms)
        )

    async def put(
        self, path: str, value: bytes, expected_version: int | None = None, *, ephemeral: bool = False
    ) -> Stat:
        validate_path(path)
        with diagnostics.span("metadata_write", op="put", path=path):
            response = await self._call(
                MdPut,
                MdPutResponse,
                retry_unknown_outcome=expected_version is None,
                path=path,
                value=bytes(value),
                expected_version=expected_version,
                ephemeral=ephemeral,
                session_id=self.session_id if ephemeral else None,
            )
        return Stat(response.version, response.ephemeral, response.created_ms, response.modified_ms)

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        validate_path(path)
        with diagnostics.span("metadata_write", op="delete", path=path):
            await self._call(
                MdDelete, Success, retry_unknown_outcome=False, path=path, expected_version=expected_version
            )

    async def children(self, path: str) -> list[str]:
        validate_path(path)
        response = await self._call(MdChildren, MdChildrenResponse, path=path)
        return list(response.children)

    def watch(self, path: str, listener: Listener) -> None:
        """Recursive watch; registered on the server with the next frame this client sends."""
        validate_path(path)
        known = any(prefix == path for prefix, _ in self._watches)
        self._watches.append((path, listener))
        conn = self._conn
        if not known and conn is not None and conn.is_open:
            conn.request(MdWatch, path=path).add_done_callback(_report_watch_failure)

    def add_session_listener(self, listener: SessionListener) -> None:
        self._session_listeners.append(listener)

    async def close(self) -> None:
        """Close the session (its ephemeral keys go at once) and the connection."""
        if self._closed:
            return
        self._closed = True
        self._connected.set()  # wake requests waiting for a connection: they fail now
        if self._session_timer is not None:
            self._session_timer.cancel()
        await self._supervisor.stop()
        conn = self._conn
        if conn is None:
            return
        if conn.is_open and self.session_id is not None:  # even a lost one: the server may not know yet
            try:
                await conn.request(
                    MdSessionClose, session_id=self.session_id, timeout_s=min(self.operation_timeout_s, CLOSE_TIMEOUT_S)
                )
            except MiniPulsarError as error:
                log.info("closing metastore session %#x: %s", self.session_id, error)
        conn.close()
        try:
            await asyncio.wait_for(conn.wait_closed(), CLOSE_TIMEOUT_S)
        except TimeoutError:
            conn.abort()

    # -- session control (tests and fault injection) ---------------------------------------------

    def suspend_keepalive(self) -> None:
        """Stop renewing the session: it expires after its timeout, as for a hung process."""
        self._keepalive_suspended = True

    # -- requests -------------------------------------------------------------------------------

    async def _call(
        self, cls: type[Command], answer: type[R], *, retry_unknown_outcome: bool = True, **fields: Any
    ) -> R:
        """Send a request answered by ``answer``, waiting for a connection and re-sending when
        that is harmless."""
        deadline = time.monotonic() + self.operation_timeout_s
        while True:
            conn = await self._connection(deadline)
            future = conn.request(cls, timeout_s=max(deadline - time.monotonic(), 0.001), **fields)
            sent = not future.done()
            try:
                response = await future
                assert isinstance(response, answer), f"{cls.TYPE} answered by {response.TYPE}"
                return response
            except ConnectionClosedError as error:
                if self._closed:
                    raise
                if sent and not retry_unknown_outcome:
                    raise ConnectionClosedError(
                        f"connection to {self.url} lost before {cls.TYPE} {fields.get('path')} was "
                        "answered: it may or may not have been applied"
                    ) from error

    async def _connection(self, deadline: float) -> _MetastoreConnection:
        while True:
            if self._closed:
                raise ConnectionClosedError(f"the metadata store {self.url} is closed")
            conn = self._conn
            if conn is not None and conn.is_open:
                return conn
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ConnectionClosedError(f"not connected to {self.url} within {self.operation_timeout_s}s")
            try:
                await asyncio.wait_for(self._connected.wait(), remaining)
            except TimeoutError:
                pass

    # -- connection and session supervision -------------------------------------------------------

    async def _dial(self) -> _MetastoreConnection:
        keepalive_s = max(self._timeout_s / 3, CONNECTION_KEEPALIVE_S_MIN)
        timeout_s = self.operation_timeout_s
        return await connect(
            lambda: _MetastoreConnection(self, keepalive_s, timeout_s),
            self.host,
            self.port,
            role="metadata-client",
            timeout_s=min(self.operation_timeout_s, 10.0),
        )

    def _install(self, conn: _MetastoreConnection) -> None:
        if not conn.is_open:
            raise ConnectionClosedError(f"connection to {self.url} closed while setting up")
        self._conn = conn
        self._connected.set()

    def _connection_closed(self, conn: _MetastoreConnection, reason: MiniPulsarError) -> None:
        if conn is not self._conn:
            return
        self._conn = None
        self._connected.clear()
        if not self._closed:
            log.warning("lost the connection to %s: %s", self.url, reason)
            self._emit(SessionEvent.CONNECTION_LOST)

    async def _supervise_round(self) -> None:
        """One round of supervision: reconnect when not connected, else wait up to a third of
        the session timeout for the connection to drop and renew the session. A round that
        fails — the store unreachable, or a bug (which the Periodic reports) — is followed by
        the next after a randomised, doubling backoff; a round that succeeds, at once."""
        self._next_round_s = self._backoff_s * random.uniform(0.5, 1.0)
        self._backoff_s = min(self._backoff_s * 2, BACKOFF_S_MAX, self._timeout_s / 3)
        conn = self._conn
        try:
            if conn is None:
                await self._reconnect()
            else:
                await asyncio.wait({conn.closed_future}, timeout=self._timeout_s / 3)
                if conn is self._conn and conn.is_open:
                    await self._renew(conn)
        except MiniPulsarError as error:
            log.info("reconnecting to %s: %s (next try in %.1fs)", self.url, error, self._next_round_s)
            return
        self._backoff_s, self._next_round_s = BACKOFF_S_INITIAL, 0.0

    async def _renew(self, conn: _MetastoreConnection) -> None:
        """One keep-alive round; on a lost session, replace it on this connection."""
        if not self._keepalive_suspended and not self._session_lost:
            sent_at = time.monotonic()
            try:
                await conn.request(MdSessionKeepAlive, session_id=self.session_id, timeout_s=self._timeout_s / 3)
                self._renewed(sent_at)
            except SessionExpiredError:
                self._mark_session_lost()
            except (ConnectionClosedError, RequestTimeoutError):
                pass
        self._check_session_deadline()
        if self._session_lost and conn.is_open:
            try:
                await self._replace_session(conn)
            except MiniPulsarError as error:
                log.warning("re-creating the metastore session: %s", error)
                return
            self._emit(SessionEvent.SESSION_REESTABLISHED)

    async def _reconnect(self) -> None:
        conn = await self._dial()
        try:
            event = await self._resume_session(conn)
            registered = await self._register_watches(conn, set())
            self._install(conn)
        except BaseException:
            conn.abort()
            raise
        log.info("reconnected to %s (%s)", self.url, event.value)
        self._emit(event)
        await self._register_watches(conn, registered)  # watches added while we were busy

    async def _resume_session(self, conn: _MetastoreConnection) -> SessionEvent:
        if not self._session_lost:
            sent_at = time.monotonic()
            try:
                await conn.request(MdSessionKeepAlive, session_id=self.session_id)
                self._renewed(sent_at)
                return SessionEvent.RECONNECTED
            except SessionExpiredError:
                self._mark_session_lost()
        await self._replace_session(conn)
        return SessionEvent.SESSION_REESTABLISHED

    async def _replace_session(self, conn: _MetastoreConnection) -> None:
        """Close the lost session on the server (its keys go now), then open a new one."""
        if self.session_id is not None:
            await conn.request(MdSessionClose, session_id=self.session_id)
        await self._open_session(conn)

    async def _open_session(self, conn: _MetastoreConnection) -> None:
        created = await conn.request(MdSessionCreate, timeout_ms=self._requested_timeout_ms)
        assert isinstance(created, MdSessionCreated)
        self.session_id, self.session_timeout_ms = created.session_id, created.timeout_ms
        self._session_lost = self._keepalive_suspended = False
        self._renewed(time.monotonic())
        log.info(
            "metastore session %#x opened on %s (timeout %d ms)", self.session_id, self.url, self.session_timeout_ms
        )

    async def _register_watches(self, conn: _MetastoreConnection, done: set[str]) -> set[str]:
        prefixes = {prefix for prefix, _ in self._watches} - done
        await asyncio.gather(*(conn.request(MdWatch, path=prefix) for prefix in prefixes))
        return done | prefixes

    def _renewed(self, sent_at: float) -> None:
        """The server renewed the session at (or after) ``sent_at``; re-arm the watchdog, which
        reports the loss one timeout later even while a reconnection attempt hangs."""
        self._last_renewed = sent_at
        self._arm_session_timer()

    def _arm_session_timer(self) -> None:
        if self._session_timer is not None:
            self._session_timer.cancel()
        remaining_s = self._last_renewed + self._timeout_s - time.monotonic()
        if remaining_s <= 0:
            self._mark_session_lost()
        elif not self._closed:
            self._session_timer = asyncio.get_running_loop().call_later(remaining_s, self._arm_session_timer)

    def _check_session_deadline(self) -> None:
        if time.monotonic() - self._last_renewed >= self._timeout_s:
            self._mark_session_lost()

    def _mark_session_lost(self) -> None:
        if not self._session_lost and not self._closed:
            self._session_lost = True
            log.warning("metastore session %#x lost", self.session_id or 0)
            self._emit(SessionEvent.SESSION_LOST)

    # -- callbacks ------------------------------------------------------------------------------

    def _notification_received(self, command: MdNotification) -> None:
        notification = Notification(command.path, NotificationType(command.kind))
        for prefix, listener in list(self._watches):
            if is_under(notification.path, prefix):
                _call_listener(listener, notification)

    def _emit(self, event: SessionEvent) -> None:
        for listener in list(self._session_listeners):
            _call_listener(listener, event)


def _call_listener(listener: Callable[[A], None], argument: A) -> None:
    """One listener among many: its bug is logged, the others still hear."""
    guarded(log, f"metadata listener {listener!r}", listener, argument)


def _report_watch_failure(future: asyncio.Future[Command]) -> None:
    if future.cancelled():
        return
    error = future.exception()
    if error is not None and not isinstance(error, ConnectionClosedError):
        log.warning("registering a metastore watch failed: %s", error)
