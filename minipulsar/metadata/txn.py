"""Logged changes (transactions) of the metastore: what the WAL holds, and how to replay it.

A transaction records the *outcome* of an accepted request, never the request itself: a put
is logged without its expected version, because the compare-and-set already succeeded. So
replaying the log on the state it started from repeats exactly the same changes, including
the parents a put auto-created (they take the put's ``time_ms``).

Each transaction is a short list, packed with msgpack inside a WAL record:

- ``["p", path, value, owner, time_ms]``: put (``owner`` is a session id or None);
- ``["d", path]``: delete;
- ``["sc", session_id, timeout_ms]``: session created;
- ``["sx", session_id]``: session closed or expired (its ephemeral nodes are deleted).
"""

from __future__ import annotations

from typing import Any

from minipulsar.metadata.store import Notification
from minipulsar.metadata.tree import KeyTree

Txn = list[Any]

PUT, DELETE, SESSION_CREATE, SESSION_CLOSE = "p", "d", "sc", "sx"


def put(path: str, value: bytes, owner: int | None, time_ms: int) -> Txn:
    return [PUT, path, value, owner, time_ms]


def delete(path: str) -> Txn:
    return [DELETE, path]


def session_create(session_id: int, timeout_ms: int) -> Txn:
    return [SESSION_CREATE, session_id, timeout_ms]


def session_close(session_id: int) -> Txn:
    return [SESSION_CLOSE, session_id]


def apply(tree: KeyTree, txn: Txn, now_ms: float = 0) -> list[Notification]:
    """Replay one logged change on ``tree``.

    Raises:
        ValueError: an unknown transaction kind (a log written by a newer version).
        ServerError: the change does not apply to this state (the log does not belong here).
    """
    kind = txn[0]
    if kind == PUT:
        _, path, value, owner, time_ms = txn
        return tree.put(path, value, None, owner=owner, time_ms=time_ms)[1]
    if kind == DELETE:
        return tree.delete(txn[1])
    if kind == SESSION_CREATE:
        tree.create_session(txn[2], now_ms, session_id=txn[1])
        return []
    if kind == SESSION_CLOSE:
        return tree.close_session(txn[1])
    raise ValueError(f"unknown transaction kind {kind!r}")
