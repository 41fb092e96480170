"""ZooKeeperMetadataStore: the :class:`MetadataStore` interface on a ZooKeeper ensemble (3.6+).

Chosen by ``open_metadata_store("zk:h1:2181,h2:2181[/chroot]")`` or BookKeeper's
``zk+hierarchical://h1:2181;h2:2181/ledgers`` (:mod:`.zk_url`). The client library is
``kazoo`` (its own threads: a connection thread and a completion thread); every answer,
notification and session event is handed to the store's event loop with
``call_soon_threadsafe``, so callers and listeners only ever run on the loop.

The mapping (Pulsar's ``ZKMetadataStore`` does the same):

- a key is a znode (under the chroot, when the URL has one) and its version the znode's data
  version. ``put`` with ``expected_version`` -1 is ``create``, n is ``setData(version=n)``,
  None is ``setData(version=-1)`` or, for a missing node, ``create`` (retried as a set when
  another writer created it first). A create whose parent is missing creates the missing
  parents as empty persistent znodes, then itself;
- an ephemeral key is an ephemeral znode of the store's session; ``Stat.ephemeral`` is
  ``ephemeralOwner != 0``, ``created_ms``/``modified_ms`` are ``ctime``/``mtime``;
- ``watch(path)`` adds one persistent recursive watch per distinct path (``addWatch``,
  ZooKeeper 3.6+; kazoo has no call for it, so the store sends the request itself and reads
  every watch event the connection receives). The server keeps such a watch armed after
  each event; it reports created, changed and deleted nodes but not children changes, so
  the store adds ``CHILDREN_CHANGED`` on the parent of each created or deleted node. Watches
  live on a connection: after every reconnection the store adds them again, and only then
  reports ``RECONNECTED`` / ``SESSION_REESTABLISHED``. Events that happened while
  disconnected are not replayed: listeners that cache re-read on those events;
- session events (Pulsar's names): the connection drops → ``CONNECTION_LOST``; back within
  the session → ``RECONNECTED``; the server expired the session, or the store stayed
  disconnected for a whole session timeout → ``SESSION_LOST`` (once), then kazoo opens a new
  session → ``SESSION_REESTABLISHED``. Ephemeral znodes are not re-created by the store;
- a request issued while disconnected waits for the reconnection up to the operation
  timeout, then fails with :class:`ConnectionClosedError` (retriable), as
  :class:`~minipulsar.metadata.client.MetastoreClient` does. A request cut off by a lost
  connection is sent again only when that is harmless (reads, watches, unconditional puts);
  a conditional put or a delete whose outcome is unknown raises ``ConnectionClosedError``;
- ``create_sequential`` is ZooKeeper's sequential znode;
- ``close()`` closes the session: its ephemeral znodes go at once.

kazoo pings after a third of the session timeout less a random 10–400 ms, but never sooner
than that random wait: a session shorter than about half a second can expire while idle.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import namedtuple
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo import exceptions as kz  # type: ignore[import-untyped]
from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kazoo.handlers.threading import SequentialThreadingHandler  # type: ignore[import-untyped]
from kazoo.protocol.connection import ConnectionHandler  # type: ignore[import-untyped]
from kazoo.protocol.serialization import Connect, Watch, int_struct, write_string  # type: ignore[import-untyped]
from kazoo.protocol.states import KazooState  # type: ignore[import-untyped]
from kazoo.retry import KazooRetry  # type: ignore[import-untyped]

from minipulsar import diagnostics
from minipulsar.errors import (
    AlreadyExistsError,
    BadVersionError,
    ConnectionClosedError,
    InvalidCommandError,
    NotEmptyError,
    NotFoundError,
    RequestTimeoutError,
)
from minipulsar.metadata.store import (
    NOT_EXISTS,
    GetResult,
    Listener,
    MetadataStore,
    Notification,
    NotificationType,
    SessionEvent,
    SessionListener,
    Stat,
    is_under,
    parent_of,
    validate_path,
)
from minipulsar.metadata.zk_url import ZooKeeperUrl
from minipulsar.supervision import guarded, spawn

log = logging.getLogger(__name__)
_kazoo_log = logging.getLogger(f"{__name__}.kazoo")
"""kazoo's own records, under ours: an ERROR there (an unhandled exception in its connection
loop) is a bug like any other."""

A = TypeVar("A")

DEFAULT_OPERATION_TIMEOUT_S = 30.0  # Pulsar: metadataStoreOperationTimeoutSeconds
CLOSE_TIMEOUT_S = 5.0
RETRY_PAUSE_S = 0.05
"""After a connection error while the store still believes it is connected (the state change
is on its way from kazoo's thread), before trying again."""
RECONNECT_DELAY_S, RECONNECT_DELAY_S_MAX = 0.05, 1.0

_ADD_WATCH = 106  # ZooDefs.OpCode.addWatch
_PERSISTENT_RECURSIVE = 1  # AddWatchMode.PERSISTENT_RECURSIVE
_EVENT_TYPES = {1: NotificationType.CREATED, 2: NotificationType.DELETED, 3: NotificationType.MODIFIED}
_CONNECTION_ERRORS = (kz.ConnectionLoss, kz.SessionExpiredError, kz.ConnectionClosedError, kz.OperationTimeoutError)


class _AddWatchRequest(namedtuple("_AddWatchRequest", "path mode")):
    """ZooKeeper's ``AddWatchRequest`` in kazoo's request shape (answered by a bare header)."""

    type = _ADD_WATCH

    def serialize(self) -> bytearray:
        body = bytearray(write_string(self.path))
        body.extend(int_struct.pack(self.mode))
        return body

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> bool:
        return True


class _StoreConnection(ConnectionHandler):  # type: ignore[misc]
    """kazoo's connection handler, also handing every watch event to the store (kazoo routes
    only its own one-shot watches), and able to stop pinging (a hung process, for tests)."""

    watch_event: Callable[[int, str], None] | None = None
    pings_suspended = False
    negotiated_timeout_ms = 0

    def _invoke(self, timeout: float, request: Any, xid: int | None = None) -> Any:
        """kazoo's synchronous exchange (the handshake): keeps the negotiated session timeout,
        which kazoo does not expose, before it reports the session connected."""
        result = super()._invoke(timeout, request, xid)
        if isinstance(request, Connect) and result[0].time_out > 0:
            self.negotiated_timeout_ms = int(result[0].time_out)
        return result

    def _read_watch_event(self, buffer: bytes, offset: int) -> None:
        watch, _ = Watch.deserialize(buffer, offset)
        if self.watch_event is not None:
            self.watch_event(watch.type, watch.path)
        super()._read_watch_event(buffer, offset)

    def _send_ping(self, connect_timeout: float) -> None:
        if not self.pings_suspended:
            super()._send_ping(connect_timeout)


class _ConnectTimeoutHandler(SequentialThreadingHandler):  # type: ignore[misc]
    """kazoo's threading handler with a TCP connect that gives up after ``connect_timeout_s``.

    kazoo connects with a timeout of the whole session; a server whose address swallows SYNs
    (a dead host or container, not a refused port) then holds one attempt until the session
    has expired, though the other servers of the ensemble serve. ZooKeeper's Java client gives
    each attempt the session timeout divided by the number of servers, and so does this one."""

    def __init__(self, connect_timeout_s: float) -> None:
        super().__init__()
        self.connect_timeout_s = connect_timeout_s

    def create_connection(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["timeout"] = min(kwargs.get("timeout") or self.connect_timeout_s, self.connect_timeout_s)
        return super().create_connection(*args, **kwargs)


class ZooKeeperMetadataStore(MetadataStore):
    """:class:`MetadataStore` on a ZooKeeper ensemble (see the module docstring)."""

    def __init__(
        self,
        url: ZooKeeperUrl,
        *,
        session_timeout_ms: int = 30_000,
        operation_timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> None:
        self.zk_url = url
        self.chroot = url.chroot
        self.session_timeout_ms = session_timeout_ms
        """Requested, then the server's negotiated value once a session exists."""
        self.operation_timeout_s = operation_timeout_s
        self.session_id: int | None = None
        retry = KazooRetry(max_tries=-1, delay=RECONNECT_DELAY_S, max_delay=RECONNECT_DELAY_S_MAX)
        self._client = KazooClient(
            hosts=url.connect_string,
            timeout=session_timeout_ms / 1000,
            connection_retry=retry,
            handler=_ConnectTimeoutHandler(session_timeout_ms / 1000 / len(url.servers)),
            logger=_kazoo_log,
        )
        self._connection = _StoreConnection(self._client, self._client._conn_retry.copy(), logger=_kazoo_log)
        self._client._connection = self._connection
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connected = asyncio.Event()
        self._watches: list[tuple[str, Listener]] = []
        self._session_listeners: list[SessionListener] = []
        self._started = self._closed = self._session_lost = False
        self._watchdog: asyncio.TimerHandle | None = None

    @property
    def url(self) -> str:
        return f"zk:{self.zk_url.connect_string}{self.chroot}"

    async def start(self) -> None:
        """Connect and open a session; create the chroot when it is missing.

        Raises:
            ConnectionClosedError: no server of the ensemble answered within the operation timeout.
        """
        self._loop = asyncio.get_running_loop()
        self._connection.watch_event = self._watch_event_from_thread
        self._client.add_listener(self._state_from_thread)
        connected = self._client.start_async()
        await asyncio.to_thread(connected.wait, self.operation_timeout_s)
        if not self._client.connected:
            await self._stop_client()
            raise ConnectionClosedError(
                f"no ZooKeeper server of {self.url} answered within {self.operation_timeout_s}s"
            )
        self._session_opened()
        self._started = True
        self._connected.set()
        for prefix in {prefix for prefix, _ in self._watches}:  # watches added before the start
            self._add_watch(prefix)
        if self.chroot:
            await self._create_path(self.chroot)

    # -- MetadataStore --------------------------------------------------------------------------

    async def get(self, path: str) -> GetResult | None:
        validate_path(path)
        try:
            value, stat = await self._request(self._client.get_async, self._full(path), harmless=True)
        except kz.NoNodeError:
            return None
        return GetResult(bytes(value), _stat(stat))

    async def put(
        self, path: str, value: bytes, expected_version: int | None = None, *, ephemeral: bool = False
    ) -> Stat:
        validate_path(path)
        value = bytes(value)
        with diagnostics.span("metadata_write", op="put", path=path):
            if expected_version is None:
                return await self._upsert(path, value, ephemeral)
            if expected_version == NOT_EXISTS:
                return (await self._create(path, value, ephemeral=ephemeral, harmless=False))[1]
            if expected_version < NOT_EXISTS:
                raise InvalidCommandError(f"expected_version must be None, -1 or >= 0, got {expected_version}")
            return await self._set(path, value, expected_version)

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        validate_path(path)
        version = -1 if expected_version is None else expected_version
        with diagnostics.span("metadata_write", op="delete", path=path):
            try:
                await self._request(self._client.delete_async, self._full(path), version, harmless=False)
            except kz.NoNodeError as error:
                raise NotFoundError(f"{path} does not exist") from error
            except kz.BadVersionError as error:
                raise BadVersionError(f"{path} is not at version {expected_version}") from error
            except kz.NotEmptyError as error:
                raise NotEmptyError(f"{path} has children") from error

    async def children(self, path: str) -> list[str]:
        validate_path(path)
        try:
            names = await self._request(self._client.get_children_async, self._full(path), harmless=True)
        except kz.NoNodeError:
            return []
        return sorted(names)

    async def create_sequential(self, prefix: str, value: bytes, *, ephemeral: bool = False) -> str:
        """ZooKeeper's sequential znode: ``prefix`` + the parent's 10-digit counter."""
        validate_path(prefix)
        with diagnostics.span("metadata_write", op="put", path=prefix):
            created, _ = await self._create(prefix, bytes(value), ephemeral=ephemeral, harmless=False, sequential=True)
        return created

    def watch(self, path: str, listener: Listener) -> None:
        """Recursive watch; registered with the next request this store sends."""
        validate_path(path)
        known = any(prefix == path for prefix, _ in self._watches)
        self._watches.append((path, listener))
        if not known and self._started and not self._closed:
            self._add_watch(path)

    def add_session_listener(self, listener: SessionListener) -> None:
        self._session_listeners.append(listener)

    async def close(self) -> None:
        """Close the session (its ephemeral znodes go at once) and kazoo's threads."""
        if self._closed:
            return
        self._closed = True
        self._connected.set()  # wake requests waiting for a connection: they fail now
        if self._watchdog is not None:
            self._watchdog.cancel()
        await self._stop_client()

    # -- session control (tests and fault injection) ---------------------------------------------

    def suspend_keepalive(self) -> None:
        """Stop pinging the server: the session expires after its timeout, as for a hung process."""
        self._connection.pings_suspended = True

    # -- writes ---------------------------------------------------------------------------------

    async def _upsert(self, path: str, value: bytes, ephemeral: bool) -> Stat:
        """setData(-1), or create when missing; either may race another writer, so loop."""
        while True:
            try:
                return await self._set(path, value, -1)
            except NotFoundError:
                pass
            try:
                return (await self._create(path, value, ephemeral=ephemeral, harmless=True))[1]
            except AlreadyExistsError:
                continue

    async def _set(self, path: str, value: bytes, version: int) -> Stat:
        try:
            stat = await self._request(self._client.set_async, self._full(path), value, version, harmless=version < 0)
        except kz.NoNodeError as error:
            raise NotFoundError(f"{path} does not exist (expected version {version})") from error
        except kz.BadVersionError as error:
            raise BadVersionError(f"{path} is not at version {version}") from error
        return _stat(stat)

    async def _create(
        self, path: str, value: bytes, *, ephemeral: bool, harmless: bool, sequential: bool = False
    ) -> tuple[str, Stat]:
        """Create ``path`` (its missing parents first, on NoNode); the created path and stat."""
        full = self._full(path)
        while True:
            try:
                created, stat = await self._request(
                    self._client.create_async, full, value, None, ephemeral, sequential, False, True, harmless=harmless
                )
                return self._relative(created), _stat(stat)
            except kz.NodeExistsError as error:
                raise AlreadyExistsError(f"{path} already exists") from error
            except kz.NoChildrenForEphemeralsError as error:
                raise InvalidCommandError(f"{path}: an ephemeral key cannot have children") from error
            except kz.NoNodeError:
                await self._create_path(parent_of(full))

    async def _create_path(self, full: str) -> None:
        """Create ``full`` (a chrooted path) and its ancestors where missing, as empty
        persistent znodes."""
        parts = full.strip("/").split("/") if full != "/" else []
        for depth in range(1, len(parts) + 1):
            try:
                await self._request(self._client.create_async, "/" + "/".join(parts[:depth]), b"", harmless=True)
            except kz.NodeExistsError:
                pass
            except kz.NoChildrenForEphemeralsError as error:
                raise InvalidCommandError(f"{full}: an ephemeral key cannot have children") from error

    # -- requests -------------------------------------------------------------------------------

    async def _request(self, call: Callable[..., Any], *args: Any, harmless: bool) -> Any:
        """Run one kazoo call on a connected session; wait for a connection and try again when
        that is harmless (see the module docstring). ZooKeeper's own errors (NoNode, …) pass."""
        deadline = time.monotonic() + self.operation_timeout_s
        while True:
            await self._wait_connected(deadline, args[0])
            try:
                async with asyncio.timeout(max(deadline - time.monotonic(), 0.001)):
                    return await self._bridge(call(*args))
            except TimeoutError as error:
                raise RequestTimeoutError(
                    f"ZooKeeper {self.url}: {args[0]} not answered within {self.operation_timeout_s}s"
                ) from error
            except _CONNECTION_ERRORS as error:
                if self._closed:
                    raise ConnectionClosedError(f"the metadata store {self.url} is closed") from error
                if not harmless:
                    raise ConnectionClosedError(
                        f"connection to ZooKeeper {self.url} lost before a write to {args[0]} was answered: "
                        "it may or may not have been applied"
                    ) from error
                if self._connected.is_set():
                    await asyncio.sleep(RETRY_PAUSE_S)

    async def _wait_connected(self, deadline: float, path: str) -> None:
        while True:
            if self._closed:
                raise ConnectionClosedError(f"the metadata store {self.url} is closed")
            if self._connected.is_set():
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ConnectionClosedError(
                    f"not connected to ZooKeeper {self.url} within {self.operation_timeout_s}s ({path})"
                )
            try:
                await asyncio.wait_for(self._connected.wait(), remaining)
            except TimeoutError:
                pass

    def _bridge(self, result: Any) -> asyncio.Future[Any]:
        """A future of the loop that takes a kazoo IAsyncResult's outcome (set on kazoo's thread)."""
        loop = self._running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(done: Any) -> None:
            try:
                value = done.get_nowait()
            except Exception as error:  # noqa: BLE001 -- kazoo's outcome, handed to the awaiting caller
                _call_threadsafe(loop, _set_exception, future, error)
            else:
                _call_threadsafe(loop, _set_result, future, value)

        result.rawlink(settle)
        return future

    def _add_watch(self, path: str) -> None:
        """Send addWatch(PERSISTENT_RECURSIVE) now (kazoo's request queue keeps the order)."""
        result = self._client.handler.async_result()
        self._client._call(_AddWatchRequest(self._full(path), _PERSISTENT_RECURSIVE), result)
        self._bridge(result).add_done_callback(_report_watch_failure)

    async def _add_watches(self) -> None:
        prefixes = {prefix for prefix, _ in self._watches}
        results = []
        for prefix in prefixes:
            result = self._client.handler.async_result()
            self._client._call(_AddWatchRequest(self._full(prefix), _PERSISTENT_RECURSIVE), result)
            results.append(self._bridge(result))
        await asyncio.gather(*results, return_exceptions=True)

    async def _stop_client(self) -> None:
        try:
            await asyncio.wait_for(asyncio.to_thread(self._client.stop), CLOSE_TIMEOUT_S)
        except TimeoutError:
            log.warning("closing the ZooKeeper session on %s timed out", self.url)
        await asyncio.to_thread(self._client.close)

    # -- paths ----------------------------------------------------------------------------------

    def _full(self, path: str) -> str:
        return self.chroot + path if self.chroot and path != "/" else (self.chroot or path)

    def _relative(self, full: str) -> str:
        if not self.chroot:
            return full
        return full[len(self.chroot) :] or "/"

    # -- session --------------------------------------------------------------------------------

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "start() first"
        return self._loop

    def _state_from_thread(self, state: str) -> None:
        """kazoo's listener (its connection thread): hand the state and session id to the loop."""
        client_id = self._client.client_id
        _call_threadsafe(self._running_loop(), self._state_changed, state, client_id[0] if client_id else None)

    def _state_changed(self, state: str, session_id: int | None) -> None:
        if self._closed or not self._started:
            return
        if state == KazooState.SUSPENDED:
            self._connected.clear()
            log.warning("lost the connection to ZooKeeper %s", self.url)
            self._emit(SessionEvent.CONNECTION_LOST)
            self._arm_watchdog()
        elif state == KazooState.LOST:
            self._connected.clear()
            self._mark_session_lost()
        elif state == KazooState.CONNECTED:
            if self._watchdog is not None:
                self._watchdog.cancel()
            if self._session_lost and session_id == self.session_id:
                # Reported lost (disconnected a whole timeout), yet the ensemble kept it (it
                # was down too): close it, as its owner already gave up its ephemeral keys.
                spawn(self._replace_session(), name="zookeeper session replacement", logger=log)
                return
            event = SessionEvent.RECONNECTED
            if self._session_lost or session_id != self.session_id:
                event = SessionEvent.SESSION_REESTABLISHED
                self._session_opened()
            self._connected.set()
            spawn(self._rewatch_then_emit(event), name="zookeeper rewatch", logger=log)

    async def _replace_session(self) -> None:
        """Close the session on the server (its ephemeral znodes go now) and open a new one;
        kazoo then reports the new session's CONNECTED."""
        log.info("closing ZooKeeper session %#x, reported lost, to open a new one", self.session_id or 0)
        await asyncio.to_thread(self._client.stop)
        if not self._closed:
            self._client.start_async()

    async def _rewatch_then_emit(self, event: SessionEvent) -> None:
        await self._add_watches()
        log.info("reconnected to ZooKeeper %s (%s)", self.url, event.value)
        self._emit(event)

    def _session_opened(self) -> None:
        client_id = self._client.client_id
        self.session_id = client_id[0] if client_id else None
        self.session_timeout_ms = self._connection.negotiated_timeout_ms or self.session_timeout_ms
        self._session_lost = self._connection.pings_suspended = False
        log.info(
            "ZooKeeper session %#x opened on %s (timeout %d ms)",
            self.session_id or 0,
            self.url,
            self.session_timeout_ms,
        )

    def _arm_watchdog(self) -> None:
        """Disconnected for a whole session timeout: the session is as good as lost (Pulsar's
        ZKSessionWatcher): report it now, not when a server finally says so."""
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._watchdog = self._running_loop().call_later(self.session_timeout_ms / 1000, self._watchdog_fired)

    def _watchdog_fired(self) -> None:
        if not self._connected.is_set():
            self._mark_session_lost()

    def _mark_session_lost(self) -> None:
        self._connection.pings_suspended = False
        if not self._session_lost and not self._closed:
            self._session_lost = True
            log.warning("ZooKeeper session %#x lost", self.session_id or 0)
            self._emit(SessionEvent.SESSION_LOST)

    # -- notifications --------------------------------------------------------------------------

    def _watch_event_from_thread(self, event_type: int, full_path: str) -> None:
        if self._loop is not None:
            _call_threadsafe(self._loop, self._watch_event, event_type, full_path)

    def _watch_event(self, event_type: int, full_path: str) -> None:
        kind = _EVENT_TYPES.get(event_type)
        if kind is None or self._closed or not (not self.chroot or is_under(full_path, self.chroot)):
            return
        path = self._relative(full_path)
        self._deliver(Notification(path, kind))
        if kind is not NotificationType.MODIFIED and path != "/":
            self._deliver(Notification(parent_of(path), NotificationType.CHILDREN_CHANGED))

    def _deliver(self, notification: Notification) -> None:
        for prefix, listener in list(self._watches):
            if is_under(notification.path, prefix):
                _call_listener(listener, notification)

    def _emit(self, event: SessionEvent) -> None:
        for listener in list(self._session_listeners):
            _call_listener(listener, event)


def _stat(stat: Any) -> Stat:
    return Stat(int(stat.version), stat.ephemeralOwner != 0, int(stat.ctime), int(stat.mtime))


def _call_threadsafe(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    """From kazoo's threads; a loop already closed (the store outlived it) drops the call."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def _call_listener(listener: Callable[[A], None], argument: A) -> None:
    """One listener among many: its bug is logged, the others still hear."""
    guarded(log, f"metadata listener {listener!r}", listener, argument)


def _report_watch_failure(future: asyncio.Future[Any]) -> None:
    if future.cancelled():
        return
    error = future.exception()
    if error is not None and not isinstance(error, _CONNECTION_ERRORS):
        log.warning("adding a ZooKeeper watch failed: %r", error)
