"""The metadata store interface: the ZooKeeper model that Pulsar's ``MetadataStore`` exposes.

Keys are absolute paths (``/ledgers/available/127.0.0.1:3181``) holding ``bytes``. Every key
has a version: 0 when created, +1 on each update. Writers use compare-and-set:

- ``put(path, value, expected_version=None)``: unconditional;
- ``expected_version=-1``: create-only (fails with :class:`AlreadyExistsError` if it exists);
- ``expected_version=n``: update only if the key is at version n (else :class:`BadVersionError`).

Missing parents are created as empty persistent keys (as Pulsar's ZK store does), so
``children(path)`` lists the names directly below ``path``. A key with children cannot be
deleted (:class:`NotEmptyError`).

An *ephemeral* key belongs to the store's session: it disappears when the session ends or
expires (the owner stopped heart-beating for the session timeout), and watchers see a
``deleted`` notification. Watches are recursive: ``watch(path, listener)`` reports every
change at or below ``path``.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

NOT_EXISTS = -1
"""``expected_version`` for create-only puts."""


@dataclass(frozen=True, slots=True)
class Stat:
    version: int
    ephemeral: bool = False
    created_ms: int = 0
    modified_ms: int = 0


@dataclass(frozen=True, slots=True)
class GetResult:
    value: bytes
    stat: Stat

    @property
    def version(self) -> int:
        return self.stat.version


class NotificationType(str, enum.Enum):
    CREATED = "created"
    MODIFIED = "modified"
    DELETED = "deleted"
    CHILDREN_CHANGED = "children_changed"


@dataclass(frozen=True, slots=True)
class Notification:
    path: str
    type: NotificationType


class SessionEvent(str, enum.Enum):
    """Pulsar's ``SessionEvent``: what a store tells its owner about its session."""

    CONNECTION_LOST = "ConnectionLost"
    RECONNECTED = "Reconnected"
    SESSION_LOST = "SessionLost"
    """The session expired: every ephemeral key of this store is gone."""
    SESSION_REESTABLISHED = "SessionReestablished"


Listener = Callable[[Notification], None]
SessionListener = Callable[[SessionEvent], None]


def validate_path(path: str) -> None:
    """Raise ValueError unless ``path`` is absolute, normalised and has no empty segments."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"metadata path must start with '/': {path!r}")
    if path != "/" and (path.endswith("/") or "//" in path):
        raise ValueError(f"metadata path has an empty segment: {path!r}")


def parent_of(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


def is_under(path: str, prefix: str) -> bool:
    """True when ``path`` is ``prefix`` or below it."""
    return prefix == "/" or path == prefix or path.startswith(prefix + "/")


class MetadataStore(ABC):
    """Async key-value store with versions, ephemeral keys, children and watches."""

    @abstractmethod
    async def get(self, path: str) -> GetResult | None:
        """The value and stat at ``path``, or None when there is no such key."""

    @abstractmethod
    async def put(
        self, path: str, value: bytes, expected_version: int | None = None, *, ephemeral: bool = False
    ) -> Stat:
        """Write ``value`` at ``path`` (see the module docstring for ``expected_version``).

        Raises:
            BadVersionError: the key is not at ``expected_version``.
            AlreadyExistsError: ``expected_version`` is -1 and the key exists.
            NotFoundError: ``expected_version`` is >= 0 and the key does not exist.
        """

    @abstractmethod
    async def delete(self, path: str, expected_version: int | None = None) -> None:
        """Delete ``path``.

        Raises:
            NotFoundError, BadVersionError, NotEmptyError.
        """

    @abstractmethod
    async def children(self, path: str) -> list[str]:
        """Sorted names directly below ``path`` ([] when it has none or does not exist)."""

    async def exists(self, path: str) -> bool:
        return await self.get(path) is not None

    async def create_sequential(self, prefix: str, value: bytes, *, ephemeral: bool = False) -> str:
        """Create ``prefix`` + a 10-digit sequence number no other key under the same parent got
        (ZooKeeper's sequential znodes), and return that path.

        This default emulates them: the parent's value is the next number, taken by
        compare-and-set. Backends with native sequential nodes override it.
        """
        validate_path(prefix)
        from minipulsar.errors import AlreadyExistsError, BadVersionError, NotFoundError

        parent = parent_of(prefix)
        while True:
            current = await self.get(parent)
            try:
                if current is None or not current.value:
                    sequence = 0
                    await self.put(parent, b"1", NOT_EXISTS if current is None else current.version)
                else:
                    sequence = int(current.value)
                    await self.put(parent, str(sequence + 1).encode(), current.version)
            except (AlreadyExistsError, BadVersionError, NotFoundError):
                continue
            path = f"{prefix}{sequence:010d}"
            await self.put(path, value, NOT_EXISTS, ephemeral=ephemeral)
            return path

    @abstractmethod
    def watch(self, path: str, listener: Listener) -> None:
        """Call ``listener`` for every change at or below ``path`` (on the store's loop)."""

    @abstractmethod
    def add_session_listener(self, listener: SessionListener) -> None:
        """Call ``listener`` on session events (lost, re-established, connection changes)."""

    @abstractmethod
    async def close(self) -> None:
        """End the session (its ephemeral keys go) and release resources."""

    @property
    def backend(self) -> MetadataStore:
        """The store that does the work: this one, or the one a wrapper wraps."""
        return self

    async def delete_recursive(self, path: str) -> None:
        for child in await self.children(path):
            await self.delete_recursive(f"{path.rstrip('/')}/{child}")
        from minipulsar.errors import NotFoundError

        try:
            await self.delete(path)
        except NotFoundError:
            pass
