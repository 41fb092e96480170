"""The versioned key tree: ZooKeeper's data model, sans-IO (no clocks, no files, no asyncio).

Both metadata backends keep their state in one :class:`KeyTree`: the in-process memory store
directly, the ``metastore`` server behind its write-ahead log. Callers pass the time in
(``time_ms``: wall clock, recorded in the nodes; ``now_ms``: any monotonic clock, for session
deadlines), so replaying the same calls on the same state always gives the same tree.

Invariants:

- ``/`` always exists; every other node's parent exists and lists it in ``children``;
- a node's ``version`` is 0 when created and grows by one per update;
- an ephemeral node has no children, and its owner session is live and lists it;
- a refused call (any raised error) leaves the tree unchanged;
- every accepted mutation returns the :class:`Notification` list it causes, in order:
  ``created``/``modified``/``deleted`` on the path, ``children_changed`` on the parent.

Compare-and-set follows :mod:`minipulsar.metadata.store`: ``expected_version`` None = any,
-1 = create only (:class:`AlreadyExistsError`), n >= 0 = must be at version n
(:class:`BadVersionError`, or :class:`NotFoundError` when the key is missing). For delete,
-1 also means "any version", as in ZooKeeper.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from minipulsar.errors import (
    AlreadyExistsError,
    BadVersionError,
    InvalidCommandError,
    NotEmptyError,
    NotFoundError,
    SessionExpiredError,
)
from minipulsar.metadata.store import (
    NOT_EXISTS,
    Notification,
    NotificationType,
    Stat,
    parent_of,
    validate_path,
)

ROOT = "/"


@dataclass(slots=True)
class Node:
    value: bytes
    version: int
    created_ms: int
    modified_ms: int
    owner: int | None = None
    """The session owning this ephemeral node; None for a persistent node."""
    children: set[str] = field(default_factory=set)
    """Names (not paths) of the nodes directly below."""

    def stat(self) -> Stat:
        return Stat(self.version, self.owner is not None, self.created_ms, self.modified_ms)


@dataclass(slots=True)
class Session:
    session_id: int
    timeout_ms: int
    deadline_ms: float
    """Expires when ``now_ms`` passes this; renewed by :meth:`KeyTree.keepalive`."""
    ephemerals: set[str] = field(default_factory=set)


def check_path(path: Any) -> str:
    """``path`` if it is a valid absolute key path, else :class:`InvalidCommandError`."""
    try:
        validate_path(path)
    except ValueError as exc:
        raise InvalidCommandError(str(exc)) from None
    valid: str = path  # validate_path accepts only a str
    return valid


def _child_name(path: str) -> str:
    return path.rsplit("/", 1)[1]


class KeyTree:
    """Nodes by path, plus the sessions owning ephemeral nodes."""

    __slots__ = ("_nodes", "_sessions", "next_session_id")

    def __init__(self) -> None:
        self._nodes: dict[str, Node] = {ROOT: Node(b"", 0, 0, 0)}
        self._sessions: dict[int, Session] = {}
        self.next_session_id = 1

    # -- reads ----------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._nodes)

    def get(self, path: str) -> Node | None:
        return self._nodes.get(path)

    def children(self, path: str) -> list[str]:
        """Sorted child names; [] when ``path`` does not exist."""
        node = self._nodes.get(path)
        return sorted(node.children) if node is not None else []

    # -- writes ---------------------------------------------------------------------------------

    def put(
        self,
        path: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        owner: int | None = None,
        time_ms: int = 0,
    ) -> tuple[Stat, list[Notification]]:
        """Create or update ``path``; ``owner`` makes a *new* node ephemeral to that session.

        Updating an existing node keeps its ephemerality (ZooKeeper ``setData``).

        Raises:
            AlreadyExistsError, BadVersionError, NotFoundError: the compare-and-set failed.
            SessionExpiredError: ``owner`` is not a live session.
            InvalidCommandError: a bad path or expected version, or a parent that is ephemeral.
        """
        check_path(path)
        if expected_version is not None and expected_version < NOT_EXISTS:
            raise InvalidCommandError(f"expected_version must be None, -1 or >= 0, got {expected_version}")
        node = self._nodes.get(path)
        if node is None:
            return self._create(path, value, expected_version, owner, time_ms)
        if expected_version == NOT_EXISTS:
            raise AlreadyExistsError(f"{path} already exists (version {node.version})")
        if expected_version is not None and expected_version != node.version:
            raise BadVersionError(f"{path} is at version {node.version}, not {expected_version}")
        node.value, node.version, node.modified_ms = value, node.version + 1, time_ms
        return node.stat(), [Notification(path, NotificationType.MODIFIED)]

    def _create(
        self,
        path: str,
        value: bytes,
        expected_version: int | None,
        owner: int | None,
        time_ms: int,
    ) -> tuple[Stat, list[Notification]]:
        if expected_version is not None and expected_version >= 0:
            raise NotFoundError(f"{path} does not exist (expected version {expected_version})")
        if owner is not None and owner not in self._sessions:
            raise SessionExpiredError(f"session {owner:#x} is not live; cannot create ephemeral {path}")
        missing = self._missing_ancestors(path)
        notifications: list[Notification] = []
        for ancestor in missing:  # top-down, so each parent exists before its child
            notifications += self._link(ancestor, Node(b"", 0, time_ms, time_ms))
        notifications += self._link(path, Node(value, 0, time_ms, time_ms, owner))
        if owner is not None:
            self._sessions[owner].ephemerals.add(path)
        return self._nodes[path].stat(), notifications

    def _missing_ancestors(self, path: str) -> list[str]:
        """Ancestors of ``path`` to auto-create, top-down; refuses to go below an ephemeral."""
        missing: list[str] = []
        parent = parent_of(path)
        while parent not in self._nodes:
            missing.append(parent)
            parent = parent_of(parent)
        if self._nodes[parent].owner is not None:
            raise InvalidCommandError(f"{parent} is ephemeral and cannot have children")
        missing.reverse()
        return missing

    def _link(self, path: str, node: Node) -> list[Notification]:
        parent = parent_of(path)
        self._nodes[parent].children.add(_child_name(path))
        self._nodes[path] = node
        return [Notification(path, NotificationType.CREATED), Notification(parent, NotificationType.CHILDREN_CHANGED)]

    def delete(self, path: str, expected_version: int | None = None) -> list[Notification]:
        """Remove ``path``; ``expected_version`` None or -1 means any version.

        Raises:
            NotFoundError, BadVersionError, NotEmptyError; InvalidCommandError for ``/``.
        """
        check_path(path)
        if path == ROOT:
            raise InvalidCommandError("the root cannot be deleted")
        node = self._nodes.get(path)
        if node is None:
            raise NotFoundError(f"{path} does not exist")
        if expected_version not in (None, NOT_EXISTS) and expected_version != node.version:
            raise BadVersionError(f"{path} is at version {node.version}, not {expected_version}")
        if node.children:
            raise NotEmptyError(f"{path} has {len(node.children)} children")
        return self._unlink(path, node)

    def _unlink(self, path: str, node: Node) -> list[Notification]:
        assert not node.children, path
        parent = parent_of(path)
        del self._nodes[path]
        self._nodes[parent].children.discard(_child_name(path))
        if node.owner is not None:
            self._sessions[node.owner].ephemerals.discard(path)
        return [Notification(path, NotificationType.DELETED), Notification(parent, NotificationType.CHILDREN_CHANGED)]

    # -- sessions -------------------------------------------------------------------------------

    def create_session(self, timeout_ms: int, now_ms: float, session_id: int | None = None) -> int:
        """A new live session; ``session_id`` is given when replaying a logged creation."""
        if session_id is None:
            session_id = self.next_session_id
        assert session_id not in self._sessions, f"session {session_id:#x} exists"
        self.next_session_id = max(self.next_session_id, session_id + 1)
        self._sessions[session_id] = Session(session_id, timeout_ms, now_ms + timeout_ms)
        return session_id

    def session(self, session_id: int) -> Session | None:
        return self._sessions.get(session_id)

    @property
    def sessions(self) -> list[Session]:
        return list(self._sessions.values())

    def keepalive(self, session_id: int, now_ms: float) -> None:
        """Push the session's deadline to ``now_ms + timeout``.

        Raises:
            SessionExpiredError: the session expired, was closed or never existed.
        """
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionExpiredError(f"session {session_id:#x} has expired")
        session.deadline_ms = now_ms + session.timeout_ms

    def close_session(self, session_id: int) -> list[Notification]:
        """End a session and delete its ephemeral nodes; an unknown session is a no-op."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return []
        notifications: list[Notification] = []
        for path in sorted(session.ephemerals):
            node = self._nodes[path]
            node.owner = None  # detached from the session we just removed
            notifications += self._unlink(path, node)
        return notifications

    def expired_sessions(self, now_ms: float) -> list[int]:
        return sorted(s.session_id for s in self._sessions.values() if s.deadline_ms <= now_ms)

    def expire(self, now_ms: float) -> list[tuple[int, list[Notification]]]:
        """Close every session whose deadline has passed: ``[(session_id, notifications)]``."""
        return [(sid, self.close_session(sid)) for sid in self.expired_sessions(now_ms)]

    def restart_sessions(self, now_ms: float) -> None:
        """Give every session a fresh deadline (after a restart: its owner may still be alive)."""
        for session in self._sessions.values():
            session.deadline_ms = now_ms + session.timeout_ms

    # -- snapshots ------------------------------------------------------------------------------

    def export(self) -> dict[str, Any]:
        """Plain data (lists, ints, bytes) that :meth:`restore` turns back into an equal tree."""
        return {
            "nodes": [[p, n.value, n.version, n.created_ms, n.modified_ms, n.owner] for p, n in self._nodes.items()],
            "sessions": [[s.session_id, s.timeout_ms] for s in self._sessions.values()],
            "next_session_id": self.next_session_id,
        }

    @classmethod
    def restore(cls, data: dict[str, Any], now_ms: float = 0) -> KeyTree:
        """The tree :meth:`export` described; sessions get deadlines from ``now_ms``."""
        tree = cls()
        for session_id, timeout_ms in data["sessions"]:
            tree.create_session(timeout_ms, now_ms, session_id)
        tree.next_session_id = max(tree.next_session_id, data["next_session_id"])
        for path, value, version, created_ms, modified_ms, owner in data["nodes"]:
            tree._nodes[path] = Node(value, version, created_ms, modified_ms, owner)
            if owner is not None:
                tree._sessions[owner].ephemerals.add(path)
        for path in tree._nodes:
            if path != ROOT:
                tree._nodes[parent_of(path)].children.add(_child_name(path))
        return tree

    def check_invariants(self) -> None:
        """Assert the module's invariants (tests and recovery)."""
        for path, node in self._nodes.items():
            if path != ROOT:
                assert _child_name(path) in self._nodes[parent_of(path)].children, path
            for name in node.children:
                assert (path.rstrip("/") + "/" + name) in self._nodes, (path, name)
            if node.owner is not None:
                assert not node.children, path
                assert path in self._sessions[node.owner].ephemerals, path
        for session in self._sessions.values():
            for path in session.ephemerals:
                assert self._nodes[path].owner == session.session_id, path
