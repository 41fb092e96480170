"""The metastore's write-ahead log: record format, reader, and the group-commit writer thread.

A log file is ``log.<first txid as 16 hex digits>`` in the data dir::

    b"MPWAL01\\n" | record | record | ...
    record = uint32 BE body length | uint32 BE crc32(body) | body
    body   = msgpack [txid, txn]            (txn: see :mod:`minipulsar.metadata.txn`)

Txids are consecutive across files. Reading stops cleanly at the first record that is short
(a torn write at the tail), has a bad CRC, or does not decode: everything before it is
returned, nothing after it is trusted.

:class:`LogWriter` owns the files. The event loop hands it records (never blocking); its
thread drains whatever is queued, writes it with one ``write``, makes it durable with one
``fdatasync`` (group commit, as BookKeeper's journal), then reports the highest durable txid
back to the loop with one ``call_soon_threadsafe``. Every ``snapCount`` changes the loop also
queues a snapshot: the thread makes the records before it durable, writes the snapshot
atomically, starts a new log file, and deletes the older logs and snapshots.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import struct
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

from minipulsar.durable_file import fsync_directory, sync_data
from minipulsar.metadata import snapshot
from minipulsar.metadata.txn import Txn
from minipulsar.protocol.codec import MSGPACK_SHAPE_ERRORS
from minipulsar.supervision import failure_of

log = logging.getLogger(__name__)

MAGIC = b"MPWAL01\n"
PREFIX = "log."
_RECORD = struct.Struct(">II")
RECORD_BYTES_MAX = 256 * 1024 * 1024
"""A length prefix above this is garbage, not a record (a record holds one frame's value)."""


def encode_record(txid: int, txn: Txn) -> bytes:
    body: bytes = msgpack.packb([txid, txn], use_bin_type=True)
    return _RECORD.pack(len(body), zlib.crc32(body)) + body


@dataclass
class LogContents:
    records: list[tuple[int, Txn]] = field(default_factory=list)
    valid_bytes: int = 0
    """Offset just past the last good record."""
    stop_reason: str | None = None
    """Why reading stopped before the end of the data (torn tail, bad CRC ...), or None."""


def decode_log(data: bytes) -> LogContents:
    """Every good record of one log file's bytes, up to the first bad one."""
    contents = LogContents()
    if not data.startswith(MAGIC):
        contents.stop_reason = "no log header" if data else None
        return contents
    offset = contents.valid_bytes = len(MAGIC)
    while offset < len(data):
        reason, record, offset = _decode_one(data, offset)
        if reason is not None:
            contents.stop_reason = f"{reason} at byte {contents.valid_bytes}"
            break
        contents.records.append(record)
        contents.valid_bytes = offset
    return contents


def _decode_one(data: bytes, offset: int) -> tuple[str | None, Any, int]:
    if len(data) - offset < _RECORD.size:
        return "torn record header", None, offset
    length, crc = _RECORD.unpack_from(data, offset)
    start = offset + _RECORD.size
    if length == 0 or length > RECORD_BYTES_MAX:
        return f"implausible record length {length}", None, offset
    if len(data) - start < length:
        return "torn record body", None, offset
    body = data[start : start + length]
    if zlib.crc32(body) != crc:
        return "CRC mismatch", None, offset
    try:
        txid, txn = msgpack.unpackb(body, raw=False)
    except MSGPACK_SHAPE_ERRORS:
        return "undecodable record", None, offset
    if not (isinstance(txid, int) and isinstance(txn, list) and txn):
        return "undecodable record", None, offset
    return None, (txid, txn), start + length


def read_log(path: Path) -> LogContents:
    return decode_log(path.read_bytes())


_STOP = object()
_RECORD_ITEM, _SNAPSHOT_ITEM = 0, 1


class LogWriter:
    """Durable appends on a dedicated thread; see the module docstring.

    Invariant: ``on_synced(txid)`` is called (on the loop) only once every record with a
    txid <= ``txid`` is on disk (or written, when ``sync`` is off), in increasing order.
    After ``on_failed`` nothing more is written.
    """

    def __init__(
        self,
        data_dir: Path,
        loop: asyncio.AbstractEventLoop,
        *,
        on_synced: Callable[[int], None],
        on_failed: Callable[[BaseException], None],
        sync: bool = True,
    ) -> None:
        self.data_dir = data_dir
        self.sync = sync
        self._loop = loop
        self._on_synced, self._on_failed = on_synced, on_failed
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="metastore-wal", daemon=True)
        self._fd = -1
        self.groups = 0
        """Group commits (fsyncs, when ``sync``) so far."""
        self.records = 0
        self.snapshots = 0
        """Snapshots written, the one :meth:`open` writes included."""
        self.fsync_ms_total = 0.0
        """Time in the group commits' ``fdatasync`` (ZooKeeper's ``fsynctime``), written by the thread."""
        self.snapshot_ms_total = 0.0
        """Time writing snapshots and starting their logs (ZooKeeper's ``snapshottime``)."""

    # -- loop side (never blocks) -----------------------------------------------------------------

    def append(self, txid: int, record: bytes) -> None:
        self._queue.put((_RECORD_ITEM, txid, record))

    def roll(self, txid: int, snapshot_data: bytes) -> None:
        """Snapshot ``snapshot_data`` (the tree as of ``txid``, the last appended) and roll."""
        self._queue.put((_SNAPSHOT_ITEM, txid, snapshot_data))

    # -- blocking (call from a thread) --------------------------------------------------------------

    def open(self, txid: int, snapshot_data: bytes) -> None:
        """Checkpoint the recovered state, then start the writer thread.

        Writes the snapshot of ``txid``, starts an empty ``log.<txid+1>`` and deletes every
        other log and snapshot: what recovery did not replay (a torn tail) is garbage now.
        """
        assert self._fd < 0, "already open"
        self._checkpoint(txid, snapshot_data)
        self._thread.start()

    def close(self) -> None:
        """Write and sync everything queued, then stop the thread and close the file."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # -- the thread -----------------------------------------------------------------------------

    def _run(self) -> None:
        """The thread's body: a bug fails the WAL as a write error does, so no change waits forever."""
        error = failure_of(log, "the metastore WAL's writer thread", self._write_until_stopped)
        if error is not None:
            self._post(self._on_failed, error)

    def _write_until_stopped(self) -> None:
        try:
            while self._write_group():
                pass
        except OSError as error:  # disk full, EIO ...: report once, write nothing more
            log.critical("metastore WAL write failed: %s", error, exc_info=True)
            self._post(self._on_failed, error)

    def _write_group(self) -> bool:
        """Drain the queue once; False after the stop item."""
        items = [self._queue.get()]
        while True:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                break
        pending: list[bytes] = []
        last_txid = -1
        for item in items:
            if item is _STOP:
                self._flush(pending, last_txid)
                return False
            kind, txid, data = item
            if kind == _RECORD_ITEM:
                pending.append(data)
                last_txid = txid
            else:
                self._flush(pending, last_txid)
                pending = []
                self._checkpoint(txid, data)
        self._flush(pending, last_txid)
        return True

    def _flush(self, records: list[bytes], last_txid: int) -> None:
        if not records:
            return
        _write_all(self._fd, b"".join(records) if len(records) > 1 else records[0])
        if self.sync:
            started = time.perf_counter()
            sync_data(self._fd)
            self.fsync_ms_total += (time.perf_counter() - started) * 1000
        self.groups += 1
        self.records += len(records)
        self._post(self._on_synced, last_txid)

    def _checkpoint(self, txid: int, snapshot_data: bytes) -> None:
        started = time.perf_counter()
        snapshot.write(self.data_dir, txid, snapshot_data)
        self._start_log(txid + 1)
        self.snapshot_ms_total += (time.perf_counter() - started) * 1000
        self.snapshots += 1
        self._delete_older(txid)

    def _start_log(self, first_txid: int) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        path = self.data_dir / snapshot.file_name(PREFIX, first_txid)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        _write_all(self._fd, MAGIC)
        os.fsync(self._fd)
        fsync_directory(self.data_dir)

    def _delete_older(self, txid: int) -> None:
        for first_txid, path in snapshot.list_files(self.data_dir, PREFIX):
            if first_txid != txid + 1:
                path.unlink(missing_ok=True)
        for snap_txid, path in snapshot.list_files(self.data_dir, snapshot.PREFIX):
            if snap_txid != txid:
                path.unlink(missing_ok=True)

    def _post(self, callback: Callable[[Any], None], argument: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(callback, argument)
        except RuntimeError:  # the loop is closed: the process is shutting down
            pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
