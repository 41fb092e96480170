"""Restart: the newest snapshot, then every logged change after it, in txid order.

Rules (ZooKeeper's, simplified to one server):

- the newest snapshot that passes its CRC is the base; none at all means an empty tree at
  txid 0; snapshot files that all fail their CRC refuse the start (data would be lost);
- log files are read in order of their first txid; records at or below the current txid are
  skipped (the snapshot holds them), the next one must be exactly current + 1;
- a torn or corrupt record ends its file: the rest of that file is not trusted, and the
  next file must continue the txid sequence, else replay stops there (a gap);
- restored sessions get a fresh deadline, ``now + timeout``: a client that reconnects in
  time keeps its ephemeral keys, a dead owner's keys expire one timeout after the restart.

Blocking file I/O: run :func:`recover` in a thread.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from minipulsar.errors import PersistenceError, ServerError
from minipulsar.metadata import snapshot, txn, wal
from minipulsar.metadata.tree import KeyTree

log = logging.getLogger(__name__)


@dataclass
class Recovered:
    tree: KeyTree
    txid: int
    """The last change applied."""
    snapshot_txid: int = 0
    replayed: int = 0
    """Log records applied on top of the snapshot."""
    problems: list[str] = field(default_factory=list)
    """Torn tails, bad CRCs and gaps met on the way (already logged)."""


def recover(data_dir: Path, now_ms: float) -> Recovered:
    """Rebuild the tree from ``data_dir`` (created when missing).

    Raises:
        PersistenceError: snapshots exist but none is readable, or a log does not apply.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    for leftover in data_dir.glob("*" + snapshot.TMP_SUFFIX):
        leftover.unlink(missing_ok=True)
    state = _load_snapshot(data_dir)
    for _, path in snapshot.list_files(data_dir, wal.PREFIX):
        if not _replay_file(state, path, now_ms):
            break
    state.tree.restart_sessions(now_ms)
    log.info(
        "metastore recovered to txid %d: snapshot %d + %d logged changes, %d keys, %d sessions",
        state.txid,
        state.snapshot_txid,
        state.replayed,
        len(state.tree),
        len(state.tree.sessions),
    )
    return state


def _load_snapshot(data_dir: Path) -> Recovered:
    found = snapshot.list_files(data_dir, snapshot.PREFIX)
    for txid, path in reversed(found):
        try:
            tree, snap_txid = snapshot.read(path)
        except snapshot.CorruptSnapshotError as exc:
            log.error("snapshot %s is unreadable (%s); trying an older one", path, exc)
            continue
        assert snap_txid == txid, f"{path} holds txid {snap_txid}"
        return Recovered(tree, snap_txid, snapshot_txid=snap_txid)
    if found:
        raise PersistenceError(f"no readable snapshot in {data_dir}; refusing to start without its data")
    return Recovered(KeyTree(), 0)


def _replay_file(state: Recovered, path: Path, now_ms: float) -> bool:
    """Apply ``path``'s records that follow ``state``; False when replay must stop (a gap)."""
    contents = wal.read_log(path)
    for txid, change in contents.records:
        if txid <= state.txid:
            continue
        if txid != state.txid + 1:
            _problem(state, f"{path.name}: txid {txid} follows {state.txid}; stopping replay at the gap")
            return False
        try:
            txn.apply(state.tree, change, now_ms)
        except (ServerError, ValueError) as exc:
            raise PersistenceError(f"{path.name}: txid {txid} does not apply: {exc}") from exc
        state.txid = txid
        state.replayed += 1
    if contents.stop_reason is not None:
        _problem(state, f"{path.name}: {contents.stop_reason}; ignoring the rest of this file")
    return True


def _problem(state: Recovered, message: str) -> None:
    log.warning("metastore recovery: %s", message)
    state.problems.append(message)
