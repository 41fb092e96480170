"""The in-process metadata store (``memory://<name>``), for unit tests of other components.

It behaves like :class:`~minipulsar.metadata.client.MetastoreClient` without a network:
the same :class:`KeyTree` rules, a session per store with a real timeout, notifications
delivered on the loop (``call_soon``, never inside the caller's ``await``), session events.

Several stores may share one :class:`SharedTree` (``memory://same-name`` in one process),
so a test can play two processes with separate sessions: one store's ephemeral keys vanish
when *its* session ends, and the other store's watches see it. Ending a session on purpose:

- :meth:`MemoryMetadataStore.expire_session`: expire it now;
- :meth:`MemoryMetadataStore.suspend_keepalive`: stop renewing it, so it expires after its
  timeout, exactly as when a process stops heart-beating.

Either way the store then reports ``SESSION_LOST``, opens a new session and reports
``SESSION_REESTABLISHED`` (its owner re-creates its ephemeral keys, as Pulsar does).

Losing the connection on purpose, as a network client does:
:meth:`MemoryMetadataStore.disconnect` reports ``CONNECTION_LOST``; until
:meth:`MemoryMetadataStore.reconnect` every request fails with ``ConnectionClosedError``,
every notification meant for this store is lost, and the session is not renewed (it expires
after its timeout: ``SESSION_LOST`` is reported while still disconnected). ``reconnect``
reports ``RECONNECTED`` when the session survived, else opens a new one and reports
``SESSION_REESTABLISHED`` — the events and the lost notifications a watcher of a real store
must cope with.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from minipulsar.errors import ConnectionClosedError, SessionExpiredError
from minipulsar.metadata.store import (
    GetResult,
    Listener,
    MetadataStore,
    Notification,
    SessionEvent,
    SessionListener,
    Stat,
    is_under,
    validate_path,
)
from minipulsar.metadata.tree import KeyTree
from minipulsar.supervision import guarded

log = logging.getLogger(__name__)

A = TypeVar("A")

TICK_S_MIN, TICK_S_MAX = 0.01, 1.0
"""Keep-alive and expiry checks run every session timeout / 3 within these bounds."""


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


def _wall_ms() -> int:
    return int(time.time() * 1000)


class SharedTree:
    """One key tree and the memory stores attached to it (one per ``memory://name``)."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.tree = KeyTree()
        self.stores: set[MemoryMetadataStore] = set()

    def publish(self, notifications: list[Notification]) -> None:
        for store in list(self.stores):
            store._deliver(notifications)

    def expire_due(self, now_ms: float) -> None:
        """Expire every session past its deadline; tell the owning store."""
        for session_id, notifications in self.tree.expire(now_ms):
            log.info("memory store %r: session %#x expired", self.name, session_id)
            self.publish(notifications)
            for store in list(self.stores):
                if store.session_id == session_id and not store._loop.is_closed():
                    store._session_ended()


_SHARED: dict[str, SharedTree] = {}


def shared_tree(name: str) -> SharedTree:
    """The process-wide tree called ``name`` (created on first use)."""
    tree = _SHARED.get(name)
    if tree is None:
        tree = _SHARED[name] = SharedTree(name)
    return tree


class MemoryMetadataStore(MetadataStore):
    """:class:`MetadataStore` on an in-process tree. Create it inside a running loop."""

    def __init__(self, shared: SharedTree | None = None, *, session_timeout_ms: int = 30_000) -> None:
        self._loop = asyncio.get_running_loop()
        self.shared = shared if shared is not None else SharedTree()
        self.session_timeout_ms = session_timeout_ms
        self._watches: list[tuple[str, Listener]] = []
        self._session_listeners: list[SessionListener] = []
        self._keepalive_suspended = False
        self._closed = False
        self._disconnected = False
        self._session_pending = False
        """The session expired while disconnected: a new one is opened on :meth:`reconnect`."""
        self.session_id = self.shared.tree.create_session(session_timeout_ms, _monotonic_ms())
        self.shared.stores.add(self)
        self._tick_s = min(max(session_timeout_ms / 3000, TICK_S_MIN), TICK_S_MAX)
        self._ticker = self._loop.call_later(self._tick_s, self._tick)

    # -- MetadataStore --------------------------------------------------------------------------

    async def get(self, path: str) -> GetResult | None:
        validate_path(path)
        self._check_open()
        node = self.shared.tree.get(path)
        return None if node is None else GetResult(node.value, node.stat())

    async def put(
        self, path: str, value: bytes, expected_version: int | None = None, *, ephemeral: bool = False
    ) -> Stat:
        validate_path(path)
        self._check_open()
        owner = self.session_id if ephemeral else None
        stat, notifications = self.shared.tree.put(
            path, bytes(value), expected_version, owner=owner, time_ms=_wall_ms()
        )
        self.shared.publish(notifications)
        return stat

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        validate_path(path)
        self._check_open()
        self.shared.publish(self.shared.tree.delete(path, expected_version))

    async def children(self, path: str) -> list[str]:
        validate_path(path)
        self._check_open()
        return self.shared.tree.children(path)

    def watch(self, path: str, listener: Listener) -> None:
        validate_path(path)
        self._watches.append((path, listener))

    def add_session_listener(self, listener: SessionListener) -> None:
        self._session_listeners.append(listener)

    async def close(self) -> None:
        """End the session now: its ephemeral keys go, other stores' watchers are told."""
        if self._closed:
            return
        self._closed = True
        self._ticker.cancel()
        self.shared.stores.discard(self)
        self.shared.publish(self.shared.tree.close_session(self.session_id))

    # -- session control (tests and fault injection) ---------------------------------------------

    def suspend_keepalive(self) -> None:
        """Stop renewing the session: it expires after its timeout, as for a hung process."""
        self._keepalive_suspended = True

    def expire_session(self) -> None:
        """Expire the session now (its ephemeral keys go; SESSION_LOST, then a new session)."""
        if self._closed:
            raise ConnectionClosedError("the metadata store is closed")
        self.shared.publish(self.shared.tree.close_session(self.session_id))
        self._session_ended()

    def disconnect(self) -> None:
        """Lose the connection (see the module docstring): CONNECTION_LOST now."""
        if not self._closed and not self._disconnected:
            self._disconnected = True
            self._emit(SessionEvent.CONNECTION_LOST)

    def reconnect(self) -> None:
        """Connect again: RECONNECTED, or SESSION_REESTABLISHED when the session expired meanwhile."""
        if self._closed or not self._disconnected:
            return
        self._disconnected = False
        session_id = self.session_id
        self.shared.expire_due(_monotonic_ms())  # past its deadline: it ends now, a new one opens
        if self._session_pending:
            self._session_pending = False
            self._open_new_session()
        elif self.session_id == session_id:
            self.shared.tree.keepalive(self.session_id, _monotonic_ms())
            self._emit(SessionEvent.RECONNECTED)

    # -- internals ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ConnectionClosedError("the metadata store is closed")
        if self._disconnected:
            raise ConnectionClosedError("not connected to the metadata store")

    def _tick(self) -> None:
        now_ms = _monotonic_ms()
        if not self._keepalive_suspended and not self._disconnected:
            try:
                self.shared.tree.keepalive(self.session_id, now_ms)
            except SessionExpiredError:
                pass  # expired by another store's tick just now; expire_due has told us
        self.shared.expire_due(now_ms)
        self._ticker = self._loop.call_later(self._tick_s, self._tick)

    def _session_ended(self) -> None:
        """Our session is gone: report it, open a new one (once connected), report that."""
        self._emit(SessionEvent.SESSION_LOST)
        if self._disconnected:
            self._session_pending = True
        else:
            self._open_new_session()

    def _open_new_session(self) -> None:
        self.session_id = self.shared.tree.create_session(self.session_timeout_ms, _monotonic_ms())
        self._keepalive_suspended = False
        self._emit(SessionEvent.SESSION_REESTABLISHED)

    def _deliver(self, notifications: list[Notification]) -> None:
        if self._loop.is_closed():  # a store its test never closed: forget it
            self.shared.stores.discard(self)
            return
        if self._disconnected:  # lost, as a network client's are: its owner re-reads on reconnect
            return
        for notification in notifications:
            for prefix, listener in self._watches:
                if is_under(notification.path, prefix):
                    self._loop.call_soon(_call_listener, listener, notification)

    def _emit(self, event: SessionEvent) -> None:
        for listener in list(self._session_listeners):
            self._loop.call_soon(_call_listener, listener, event)


def _call_listener(listener: Callable[[A], None], argument: A) -> None:
    """One listener among many: its bug is logged, the others still hear."""
    guarded(log, f"metadata listener {listener!r}", listener, argument)
