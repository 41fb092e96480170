"""The built-in ``metastore`` server: the MD_* commands over the wire, on a :class:`DurableTree`.

One process, one event loop. Each request is handled synchronously in the read path (the
tree is in memory), and its answer is sent once every change applied before it is durable
(see :mod:`.durable`). So requests on one connection are handled and answered in order: an
answer to a later request implies an earlier MD_WATCH is registered.

Sessions (ZooKeeper's): MD_SESSION_CREATE with a timeout clamped to
[``minSessionTimeout``, ``maxSessionTimeout``]; MD_SESSION_KEEPALIVE (or an ephemeral put)
renews it; a session not renewed for its timeout expires: its ephemeral keys are deleted
and watchers notified. Sessions do not belong to a connection: a client may lose its
connection and resume its session on another one before the timeout.

Watches are per connection and recursive: MD_WATCH ``/a`` gets MD_NOTIFICATION for ``/a``
and everything below it, until the connection closes.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from minipulsar.config import MetastoreConfig
from minipulsar.errors import InvalidCommandError, MiniPulsarError, PersistenceError, TooManyRequestsError
from minipulsar.metadata import recovery
from minipulsar.metadata.durable import DurableTree
from minipulsar.metadata.server_stats import RequestStats
from minipulsar.metadata.store import Notification, is_under
from minipulsar.metadata.tree import check_path
from minipulsar.net.server import Listener, ServerConnection, handles
from minipulsar.protocol.commands import (
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

log = logging.getLogger(__name__)

WATCHES_PER_CONNECTION_MAX = 10_000
"""Bound on MD_WATCH prefixes per connection (each notification is checked against them)."""
EXPIRY_TICK_MS_MIN, EXPIRY_TICK_MS_MAX = 10, 500
"""Sessions are checked every minSessionTimeout/4 within these bounds (ZooKeeper: tickTime)."""


def wall_ms() -> int:
    return int(time.time() * 1000)


def monotonic_ms() -> float:
    return time.monotonic() * 1000


class MetastoreServer:
    """Recovers the data dir, serves connections, expires sessions, fans out notifications."""

    def __init__(self, config: MetastoreConfig) -> None:
        self.config = config
        self.data_dir = Path(config.data_dir)
        self.state: DurableTree | None = None
        self.listener = Listener(lambda: MetastoreConnection(self))
        self.failed: asyncio.Future[BaseException] | None = None
        """Completes with the error if the WAL fails: the process must stop."""
        self.requests = RequestStats()
        """Answered requests and their latency (:mod:`.server_stats` exports them)."""
        self._lock_fd = -1
        self._ticker: asyncio.TimerHandle | None = None
        tick_ms = config.min_session_timeout_ms / 4
        self._tick_s = min(max(tick_ms, EXPIRY_TICK_MS_MIN), EXPIRY_TICK_MS_MAX) / 1000

    async def start(self) -> tuple[str, int]:
        """Recover, checkpoint, listen; returns the bound address."""
        loop = asyncio.get_running_loop()
        self.failed = loop.create_future()
        recovered = await asyncio.to_thread(self._lock_and_recover)
        self.state = DurableTree(
            recovered.tree,
            recovered.txid,
            self.data_dir,
            snapshot_every_txns=self.config.snapshot_every_txns,
            sync=self.config.wal_sync,
            on_failed=self._wal_failed,
        )
        await self.state.open()
        address = await self.listener.start(self.config.bind_address, self.config.port)
        self._ticker = loop.call_later(self._tick_s, self._expire_sessions)
        return address

    def _lock_and_recover(self) -> recovery.Recovered:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.data_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise PersistenceError(f"{self.data_dir} is in use by another metastore") from None
        return recovery.recover(self.data_dir, monotonic_ms())

    async def stop(self) -> None:
        """Stop serving, make every accepted change durable, release the data dir."""
        if self._ticker is not None:
            self._ticker.cancel()
        await self.listener.close()
        if self.state is not None:
            await self.state.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _wal_failed(self, error: BaseException) -> None:
        if self.failed is not None and not self.failed.done():
            self.failed.set_result(error)

    # -- requests (called by MetastoreConnection; may raise MiniPulsarError) -------------------------

    @property
    def _state(self) -> DurableTree:
        assert self.state is not None, "not started"
        return self.state

    def get(self, command: MdGet) -> MdGetResponse:
        node = self._state.tree.get(check_path(command.path))
        if node is None:
            return MdGetResponse(id=command.id, version=-1)
        return MdGetResponse(
            id=command.id,
            version=node.version,
            value=node.value,
            ephemeral=node.owner is not None,
            created_ms=node.created_ms,
            modified_ms=node.modified_ms,
        )

    def put(self, command: MdPut) -> MdPutResponse:
        owner = None
        if command.ephemeral:
            if command.session_id is None:
                raise InvalidCommandError("an ephemeral MD_PUT needs a session_id")
            self._state.tree.keepalive(command.session_id, monotonic_ms())
            owner = command.session_id
        stat, notifications = self._state.put(command.path, command.value, command.expected_version, owner, wall_ms())
        self.publish(notifications)
        return MdPutResponse(
            id=command.id,
            version=stat.version,
            ephemeral=stat.ephemeral,
            created_ms=stat.created_ms,
            modified_ms=stat.modified_ms,
        )

    def delete(self, command: MdDelete) -> Success:
        self.publish(self._state.delete(command.path, command.expected_version))
        return Success(id=command.id)

    def children(self, command: MdChildren) -> MdChildrenResponse:
        return MdChildrenResponse(id=command.id, children=self._state.tree.children(check_path(command.path)))

    def create_session(self, command: MdSessionCreate) -> MdSessionCreated:
        timeout_ms = min(
            max(command.timeout_ms, self.config.min_session_timeout_ms), self.config.max_session_timeout_ms
        )
        session_id = self._state.create_session(timeout_ms, monotonic_ms())
        log.info("session %#x created (timeout %d ms)", session_id, timeout_ms)
        return MdSessionCreated(id=command.id, session_id=session_id, timeout_ms=timeout_ms)

    def keepalive(self, command: MdSessionKeepAlive) -> Success:
        self._state.tree.keepalive(command.session_id, monotonic_ms())
        return Success(id=command.id)

    def close_session(self, command: MdSessionClose) -> Success:
        notifications = self._state.close_session(command.session_id)
        log.info(
            "session %#x closed by its owner (%d ephemeral keys deleted)",
            command.session_id,
            sum(n.type.value == "deleted" for n in notifications),
        )
        self.publish(notifications)
        return Success(id=command.id)

    # -- sessions and notifications ------------------------------------------------------------

    def _expire_sessions(self) -> None:
        state = self._state
        try:
            for session_id in state.tree.expired_sessions(monotonic_ms()):
                notifications = state.close_session(session_id)
                log.info(
                    "session %#x expired (%d ephemeral keys deleted)",
                    session_id,
                    sum(n.type.value == "deleted" for n in notifications),
                )
                self.publish(notifications)
        except PersistenceError:
            return  # the WAL failed; the process is stopping
        self._ticker = asyncio.get_running_loop().call_later(self._tick_s, self._expire_sessions)

    def publish(self, notifications: list[Notification]) -> None:
        """Send ``notifications`` to every watching connection once they are durable."""
        if notifications:
            self._state.when_durable(lambda failure: self._fan_out(notifications, failure))

    def _fan_out(self, notifications: list[Notification], failure: BaseException | None) -> None:
        if failure is not None:
            return  # the WAL failed: the changes may be lost, so nobody hears of them
        for connection in self.listener.connections:
            watches = connection.watches
            if not watches:
                continue
            for notification in notifications:
                if any(is_under(notification.path, prefix) for prefix in watches):
                    connection.send(MdNotification(path=notification.path, kind=notification.type.value))


class MetastoreConnection(ServerConnection):
    """One client connection: MD_* handlers and the connection's watch prefixes."""

    SERVER_VERSION = "minipulsar-metastore"

    def __init__(self, server: MetastoreServer) -> None:
        super().__init__()
        self.server = server
        self.watches: set[str] = set()

    def _answer(self, command: Command, produce: Callable[[], Command]) -> None:
        """Run ``produce``; send its response (or typed error) once prior changes are durable."""
        started = time.perf_counter()
        outcome: Command | MiniPulsarError
        try:
            outcome = produce()
        except MiniPulsarError as error:
            outcome = error
        assert self.server.state is not None
        self.server.state.when_durable(lambda failure: self._reply(command, failure or outcome, started))

    def _reply(self, command: Command, outcome: Command | BaseException, started: float) -> None:
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, MiniPulsarError):
                outcome = PersistenceError(f"the metastore WAL failed: {outcome}")
            self.reply_error(command, outcome)
        else:
            self.send(outcome)
        self.server.requests.answered(command.TYPE, started)

    @handles(MdGet)
    def _get(self, command: MdGet) -> None:
        self._answer(command, lambda: self.server.get(command))

    @handles(MdPut)
    def _put(self, command: MdPut) -> None:
        self._answer(command, lambda: self.server.put(command))

    @handles(MdDelete)
    def _delete(self, command: MdDelete) -> None:
        self._answer(command, lambda: self.server.delete(command))

    @handles(MdChildren)
    def _children(self, command: MdChildren) -> None:
        self._answer(command, lambda: self.server.children(command))

    @handles(MdWatch)
    def _watch(self, command: MdWatch) -> None:
        self._answer(command, lambda: self._add_watch(command))

    def _add_watch(self, command: MdWatch) -> Success:
        path = check_path(command.path)
        if path not in self.watches and len(self.watches) >= WATCHES_PER_CONNECTION_MAX:
            raise TooManyRequestsError(f"at most {WATCHES_PER_CONNECTION_MAX} watches per connection")
        self.watches.add(path)
        return Success(id=command.id)

    @handles(MdSessionCreate)
    def _session_create(self, command: MdSessionCreate) -> None:
        self._answer(command, lambda: self.server.create_session(command))

    @handles(MdSessionKeepAlive)
    def _session_keepalive(self, command: MdSessionKeepAlive) -> None:
        self._answer(command, lambda: self.server.keepalive(command))

    @handles(MdSessionClose)
    def _session_close(self, command: MdSessionClose) -> None:
        self._answer(command, lambda: self.server.close_session(command))

    def closed(self, reason: MiniPulsarError) -> None:
        super().closed(reason)
        self.watches.clear()
