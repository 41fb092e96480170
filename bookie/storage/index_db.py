"""The index database of one ledger dir: ``current/index.db`` (sqlite3, in WAL mode).

BookKeeper's DbLedgerStorage keeps two RocksDB instances (entry locations, ledger metadata);
here one sqlite file holds every table, so one flush commits the locations, the ledgers'
state and the entry-log usage in a single transaction:

- ``locations``: (ledger_id, entry_id) → location in an entry log (:mod:`entry_location_index`);
- ``ledgers``: ledger_id → fenced, LAC, last entry id, master key (:mod:`ledger_metadata_index`);
- ``entry_log_ledgers``: (log_id, ledger_id) → bytes of that ledger in that log, what GC needs
  to compute each log's live fraction (:mod:`entry_log_metadata`);
- ``meta``: counters (entries indexed, highest entry-log id).

Invariants:
- one writer connection, used by one thread at a time (start-up, then the checkpoint's flush
  of this dir on the flush thread or a dir-flush thread, or garbage collection between
  checkpoints); a transaction is committed with ``synchronous=FULL``, i.e. the WAL is fsynced
  before :meth:`IndexDb.transaction` returns — the checkpoint is written only after that;
- readers get their own connection per thread (:meth:`IndexDb.reader`) and see the last
  committed transaction; no reader ever blocks the writer (WAL).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

INDEX_DB_FILE = "index.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS locations (
    ledger_id INTEGER NOT NULL, entry_id INTEGER NOT NULL, location INTEGER NOT NULL,
    PRIMARY KEY (ledger_id, entry_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledgers (
    ledger_id INTEGER PRIMARY KEY, fenced INTEGER NOT NULL, lac INTEGER NOT NULL,
    last_entry_id INTEGER NOT NULL, master_key BLOB);
CREATE TABLE IF NOT EXISTS entry_log_ledgers (
    log_id INTEGER NOT NULL, ledger_id INTEGER NOT NULL, bytes INTEGER NOT NULL,
    PRIMARY KEY (log_id, ledger_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


class IndexDb:
    def __init__(self, directory: Path) -> None:
        self.path = directory / INDEX_DB_FILE
        self._writer: sqlite3.Connection | None = None
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def open(self) -> None:
        """Create or open the database (blocking)."""
        writer = self._connect()
        writer.execute("PRAGMA journal_mode=WAL")
        writer.executescript(_SCHEMA)
        columns = {row[1] for row in writer.execute("PRAGMA table_info(ledgers)")}
        if "master_key" not in columns:  # an index.db from before master keys: they read as unknown
            writer.execute("ALTER TABLE ledgers ADD COLUMN master_key BLOB")
        self._writer = writer

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: no implicit transactions; transaction() says BEGIN/COMMIT itself.
        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        connection.execute("PRAGMA synchronous=FULL")
        return connection

    @property
    def writer(self) -> sqlite3.Connection:
        assert self._writer is not None, "index db not open"
        return self._writer

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Cursor]:
        """One write transaction: committed (durably) on exit, rolled back on an exception."""
        cursor = self.writer.cursor()
        cursor.execute("BEGIN IMMEDIATE")
        try:
            yield cursor
        except BaseException:
            cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")

    def reader(self) -> sqlite3.Connection:
        """This thread's read connection."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._connect()
            connection.execute("PRAGMA query_only=ON")
            with self._lock:
                self._readers.append(connection)
            self._local.connection = connection
        return connection

    def checkpoint_wal(self) -> tuple[int, int, int]:
        """Copy the WAL into the database and truncate it (writer thread; garbage collection
        after deleting rows: without it the WAL file keeps its largest size). Returns sqlite's
        (busy, WAL frames, frames checkpointed); busy=1 when readers kept it from finishing."""
        return tuple(self.writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())

    def get_meta(self, key: str, default: int = 0) -> int:
        row = self.writer.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else int(row[0])

    @staticmethod
    def add_meta(cursor: sqlite3.Cursor, key: str, delta: int) -> None:
        cursor.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = value + excluded.value",
            (key, delta),
        )

    @staticmethod
    def max_meta(cursor: sqlite3.Cursor, key: str, value: int) -> None:
        cursor.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = max(value, excluded.value)",
            (key, value),
        )

    def close(self) -> None:
        with self._lock:
            for connection in self._readers:
                connection.close()
            self._readers.clear()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
