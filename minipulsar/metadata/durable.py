"""The metastore server's state: the key tree, every change logged, answers held until durable.

A change is applied to the in-memory tree at once (so the next request's compare-and-set
sees it) and handed to the :class:`LogWriter`. Nobody may *observe* it before it is on disk,
so every answer and notification waits on :meth:`DurableTree.when_durable`: it runs once
every change applied so far is durable. With no write in flight that is immediately; with
writes in flight, a read waits for the current group commit (a few hundred µs). Hence:
whatever a client saw survives a crash.

Invariants: ``synced_txid <= txid``; waiters are queued in txid order and run in that order;
after a WAL failure every waiter, current and future, gets the failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from pathlib import Path

from minipulsar.errors import PersistenceError
from minipulsar.metadata import snapshot, txn
from minipulsar.metadata.store import Notification, Stat
from minipulsar.metadata.tree import KeyTree
from minipulsar.metadata.wal import LogWriter, encode_record
from minipulsar.supervision import guarded

log = logging.getLogger(__name__)

DurableCallback = Callable[[BaseException | None], None]


class DurableTree:
    """A :class:`KeyTree` whose every change goes through the write-ahead log."""

    def __init__(
        self,
        tree: KeyTree,
        txid: int,
        data_dir: Path,
        *,
        snapshot_every_txns: int,
        sync: bool = True,
        on_failed: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.tree = tree
        self.txid = txid
        self.synced_txid = txid
        self.snapshot_txid = txid
        self.snapshot_every_txns = snapshot_every_txns
        self.failure: BaseException | None = None
        self._on_failed_hook = on_failed
        self._waiters: deque[tuple[int, DurableCallback]] = deque()
        self.writer = LogWriter(
            data_dir, asyncio.get_running_loop(), sync=sync, on_synced=self._synced, on_failed=self._failed
        )

    async def open(self) -> None:
        """Checkpoint the recovered state and start the writer thread."""
        data = snapshot.encode(self.tree, self.txid)
        await asyncio.to_thread(self.writer.open, self.txid, data)

    async def close(self) -> None:
        """Make every queued change durable and stop the writer."""
        await asyncio.to_thread(self.writer.close)

    # -- changes --------------------------------------------------------------------------------

    def put(
        self, path: str, value: bytes, expected_version: int | None, owner: int | None, time_ms: int
    ) -> tuple[Stat, list[Notification]]:
        self._check_healthy()
        stat, notifications = self.tree.put(path, value, expected_version, owner=owner, time_ms=time_ms)
        self._log(txn.put(path, value, owner, time_ms))
        return stat, notifications

    def delete(self, path: str, expected_version: int | None) -> list[Notification]:
        self._check_healthy()
        notifications = self.tree.delete(path, expected_version)
        self._log(txn.delete(path))
        return notifications

    def create_session(self, timeout_ms: int, now_ms: float) -> int:
        self._check_healthy()
        session_id = self.tree.create_session(timeout_ms, now_ms)
        self._log(txn.session_create(session_id, timeout_ms))
        return session_id

    def close_session(self, session_id: int) -> list[Notification]:
        """Close (or expire) a session; unknown sessions change nothing and log nothing."""
        self._check_healthy()
        if self.tree.session(session_id) is None:
            return []
        notifications = self.tree.close_session(session_id)
        self._log(txn.session_close(session_id))
        return notifications

    def _log(self, change: txn.Txn) -> None:
        self.txid += 1
        self.writer.append(self.txid, encode_record(self.txid, change))
        if self.txid - self.snapshot_txid >= self.snapshot_every_txns:
            # Packed here, on the loop, so it is exactly the state as of self.txid.
            self.writer.roll(self.txid, snapshot.encode(self.tree, self.txid))
            self.snapshot_txid = self.txid

    def _check_healthy(self) -> None:
        if self.failure is not None:
            raise PersistenceError(f"the metastore WAL failed: {self.failure}")

    # -- durability barrier ---------------------------------------------------------------------

    def when_durable(self, callback: DurableCallback) -> None:
        """Call ``callback(None)`` once every change applied so far is durable (now, if it is).

        ``callback(error)`` instead when the WAL failed: those changes may be lost.
        """
        if self.failure is not None:
            callback(self.failure)
        elif self.synced_txid >= self.txid:
            callback(None)
        else:
            self._waiters.append((self.txid, callback))

    def _synced(self, txid: int) -> None:
        assert self.synced_txid <= txid <= self.txid, (self.synced_txid, txid, self.txid)
        self.synced_txid = txid
        waiters = self._waiters
        while waiters and waiters[0][0] <= txid:
            _, callback = waiters.popleft()
            self._run(callback, None)

    def _failed(self, error: BaseException) -> None:
        self.failure = error
        waiters, self._waiters = self._waiters, deque()
        for _, callback in waiters:
            self._run(callback, error)
        if self._on_failed_hook is not None:
            self._on_failed_hook(error)

    @staticmethod
    def _run(callback: DurableCallback, error: BaseException | None) -> None:
        guarded(log, "a metastore durability callback", callback, error)
