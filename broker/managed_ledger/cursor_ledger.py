"""CursorLedger: where one durable cursor's position is persisted — its own BookKeeper ledger,
with the metadata key naming it (Pulsar's ``ManagedCursorImpl`` cursor ledger).

Each persisted change appends one entry (position_info.py) to the **cursor ledger**, created
through the managed ledger's BookKeeper client with the managed ledger's quorums and
``customMetadata`` naming the managed ledger and the cursor. The key
``/managed-ledgers/{topic}/{cursor}`` (cursor_info.py) holds only ``cursorsLedgerId``, so an
ack costs a bookie write and no metadata write. States, as Pulsar's:

- ``NO_LEDGER``: nothing writable — a new cursor (its first position is in the key alone,
  :meth:`initialize`), a recovered one (the previous owner's ledger is read-only now), or after
  a write the bookies refused. The next persist **switches**: it
  creates a ledger, appends the position as its first entry, stores the key naming it by
  compare-and-set (with the mark-delete position, an older bound for anyone reading the key
  alone), and only then deletes the previous ledger;
- ``OPEN``: appends; once the ledger holds ``managedLedgerCursorMaxEntriesPerLedger`` entries
  or is ``managedLedgerCursorRolloverTimeInSeconds`` old, the next persist switches (rollover);
- ``CLOSED`` / ``DELETED``: after :meth:`close` (the position is in the key, cursorsLedgerId
  -1, and the ledger deleted — or, with more than
  ``managedLedgerMaxUnackedRangesToPersistInMetadataStore`` ranges, in a last entry of the
  ledger, which is closed and kept) or :meth:`delete` (key, then ledgers, gone).

A write the bookies refuse (creating the ledger or appending) falls back, as Pulsar's
``persistPositionToMetaStore``, to the key holding the whole position with cursorsLedgerId -1;
the failed ledger is deleted once the key no longer names it. Only when the metadata store
fails too does the persist fail (the cursor retries; nothing acknowledged in a receipt was
reported durable before one of the two writes succeeded).

Recovery (:meth:`recover`) reads the key; with a cursor ledger it opens it with recovery —
fencing it, so the previous owner can no longer append — and takes its last entry; a ledger
that is empty or gone falls back to the position in the key (Pulsar's rollback position).

Invariants:

- the key names the ledger holding the newest persisted position, or holds it itself;
- a ledger is deleted only after the key no longer names it;
- one operation at a time (a lock: the cursor's coalescing keeps one write in flight, and
  close or delete wait for it).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from typing import TYPE_CHECKING

from minipulsar.broker.managed_ledger import metrics
from minipulsar.broker.managed_ledger.config import ManagedLedgerConfig
from minipulsar.broker.managed_ledger.cursor_info import NO_LEDGER, decode_cursor_info, encode_cursor_info
from minipulsar.broker.managed_ledger.ledger_client import LedgerClient
from minipulsar.broker.managed_ledger.position_info import (
    CursorPosition,
    decode_position_info,
    encode_position_info,
)
from minipulsar.clock import MONOTONIC, Clock
from minipulsar.errors import (
    ConnectionClosedError,
    LedgerFencedError,
    MiniPulsarError,
    NoSuchLedgerError,
    NotFoundError,
    RequestTimeoutError,
    ServiceNotReadyError,
)
from minipulsar.metadata.cas import put_resolving
from minipulsar.metadata.store import NOT_EXISTS, MetadataStore

if TYPE_CHECKING:
    from minipulsar.bookkeeper.ledger_handle import LedgerHandle

log = logging.getLogger(__name__)

UNKNOWN_OUTCOME = (ConnectionClosedError, RequestTimeoutError)
"""A metadata write failing so may have been applied (§4.1): read back before deciding."""


class CursorLedgerState(enum.Enum):
    NO_LEDGER = "NoLedger"
    OPEN = "Open"
    CLOSED = "Closed"
    DELETED = "Deleted"


class CursorLedger:
    def __init__(
        self,
        managed_ledger: str,
        cursor: str,
        path: str,
        store: MetadataStore,
        bookkeeper: LedgerClient,
        config: ManagedLedgerConfig,
        version: int = NOT_EXISTS,
        stale_ledger_id: int | None = None,
        clock: Clock = MONOTONIC,
    ) -> None:
        self.managed_ledger = managed_ledger
        self.cursor = cursor
        self.path = path
        self._store = store
        self._bk = bookkeeper
        self._config = config
        self._version = version
        """The key's version as last written or read (compare-and-set)."""
        self.state = CursorLedgerState.NO_LEDGER
        self._handle: LedgerHandle | None = None
        self._entries = 0
        self._created_s = 0.0
        self._stale_ledger_id = stale_ledger_id
        """A ledger the key may still name that is not ours to write (the recovered one, or one
        the bookies refused): deleted once the key names another, or none."""
        self._lock = asyncio.Lock()
        self._clock = clock
        self.ledger_switches = 0
        self._fenced = False
        """Set by :meth:`fence`: the key is the next owner's now."""

    @property
    def ledger_id(self) -> int:
        """The cursor ledger written now, or -1."""
        return self._handle.ledger_id if self._handle is not None else NO_LEDGER

    # -- recovery -------------------------------------------------------------------------------

    @classmethod
    async def recover(
        cls,
        managed_ledger: str,
        cursor: str,
        path: str,
        store: MetadataStore,
        bookkeeper: LedgerClient,
        config: ManagedLedgerConfig,
        clock: Clock = MONOTONIC,
    ) -> tuple[CursorLedger, CursorPosition] | None:
        """The cursor's persistence and its newest position; None when the key does not exist.

        Raises:
            PersistenceError: the cursor ledger exists and its bookies cannot be read (the topic
                load fails and is retried: a position must not go back because a bookie is down).
        """
        stored = await store.get(path)
        if stored is None:
            return None
        info = decode_cursor_info(stored.value)
        position = info.position
        ledger_id = info.cursors_ledger_id
        if ledger_id != NO_LEDGER:
            from_ledger = await _last_position(bookkeeper, ledger_id)
            if from_ledger is None:
                log.warning("%s: cursor ledger %d is empty or gone: position from the key", path, ledger_id)
            else:
                position = from_ledger
        persistence = cls(
            managed_ledger,
            cursor,
            path,
            store,
            bookkeeper,
            config,
            stored.version,
            ledger_id if ledger_id != NO_LEDGER else None,
            clock,
        )
        return persistence, position

    def fence(self) -> None:
        """Another broker owns the topic (or may, any moment): never write the key again. Appends
        to the open ledger go on until the next owner's recovery fences it; a persist that would
        need the key (a switch, a fallback, a clean close) fails instead."""
        self._fenced = True

    # -- persisting -----------------------------------------------------------------------------

    async def initialize(self, position: CursorPosition) -> None:
        """A new cursor: its first position in the key, create-only, and no ledger yet (Pulsar's
        ``initialize``). Creating a subscription then costs one metadata write and no bookie —
        a bookie that hangs (still registered, never answering) cannot hold it for an add
        timeout; the first persisted change creates the ledger."""
        async with self._lock:
            await self._put_key(position, NO_LEDGER)

    async def persist(self, position: CursorPosition) -> None:
        """Make ``position`` durable: an entry of the cursor ledger, else the key (see above)."""
        async with self._lock:
            if self.state in (CursorLedgerState.CLOSED, CursorLedgerState.DELETED):
                raise ServiceNotReadyError(f"cursor {self.path} is {self.state.value}")
            handle = self._handle
            if self._fenced and handle is None:
                raise LedgerFencedError(f"cursor {self.path}: fenced, and no cursor ledger of its own to append to")
            if handle is not None and (self._fenced or not self._should_roll()):
                await self._append_or_fall_back(handle, position)
            elif await self._switch(position):
                pass
            elif handle is not None:  # the rollover failed on the bookies: the old ledger still takes writes
                self._created_s = self._clock()  # next attempt after another rollover period
                await self._append_or_fall_back(handle, position)
            else:
                await self._persist_to_key(position)

    def _should_roll(self) -> bool:
        config = self._config
        rollover_s = config.cursor_rollover_time_s
        aged = rollover_s > 0 and self._clock() - self._created_s >= rollover_s
        return self._entries >= config.cursor_max_entries_per_ledger or aged

    async def _append_or_fall_back(self, handle: LedgerHandle, position: CursorPosition) -> None:
        try:
            await handle.add(encode_position_info(position))
        except MiniPulsarError as error:
            metrics.CURSOR_PERSIST_LEDGER_ERRORS.inc()
            log.warning("%s: appending to cursor ledger %d failed: %s", self.path, handle.ledger_id, error)
            self._handle, self.state = None, CursorLedgerState.NO_LEDGER
            self._stale_ledger_id = handle.ledger_id
            await self._persist_to_key(position)
            return
        self._entries += 1
        metrics.CURSOR_PERSIST_LEDGER_SUCCEED.inc()

    async def _switch(self, position: CursorPosition) -> bool:
        """A new cursor ledger starting with ``position``, then the key naming it, then the
        ledgers it replaces deleted. False when the bookies refused (nothing changed);
        a metadata failure raises (the new ledger deleted)."""
        try:
            handle = await self._bk.create_ledger(
                self._config.ensemble_size,
                self._config.write_quorum,
                self._config.ack_quorum,
                custom={"pulsar/managed-ledger": self.managed_ledger, "pulsar/cursor": self.cursor},
            )
        except MiniPulsarError as error:
            metrics.CURSOR_PERSIST_LEDGER_ERRORS.inc()
            log.warning("%s: cannot create a cursor ledger: %s", self.path, error)
            return False
        try:
            await handle.add(encode_position_info(position))
        except MiniPulsarError as error:
            metrics.CURSOR_PERSIST_LEDGER_ERRORS.inc()
            log.warning("%s: writing new cursor ledger %d failed: %s", self.path, handle.ledger_id, error)
            await self._discard(handle.ledger_id)
            return False
        metrics.CURSOR_PERSIST_LEDGER_SUCCEED.inc()
        try:
            await self._put_key(position, handle.ledger_id)
        except UNKNOWN_OUTCOME:  # the key may name it: keep it (an orphan at worst)
            raise
        except MiniPulsarError:
            await self._discard(handle.ledger_id)  # the key never named it
            raise
        previous = self._handle
        self._handle, self.state = handle, CursorLedgerState.OPEN
        self._entries, self._created_s = 1, self._clock()
        self.ledger_switches += 1
        log.info("%s: writing positions to cursor ledger %d", self.path, handle.ledger_id)
        await self._delete_unnamed(previous)
        return True

    async def _persist_to_key(self, position: CursorPosition) -> None:
        """Pulsar's fallback: the whole position in the key, cursorsLedgerId -1."""
        await self._put_key(position, NO_LEDGER)
        await self._delete_unnamed(None)

    async def _put_key(self, position: CursorPosition, ledger_id: int) -> None:
        """Compare-and-set the key. A put whose outcome is unknown (the connection dropped) is
        settled by reading the key back (:func:`~minipulsar.metadata.cas.put_resolving`, §4.1).

        Raises:
            LedgerFencedError: the cursor is fenced (:meth:`fence`); nothing was written.
        """
        if self._fenced:
            raise LedgerFencedError(f"cursor {self.path}: fenced, its key is the next owner's")
        data = encode_cursor_info(position, ledger_id)
        try:
            version = (await put_resolving(self._store, self.path, data, self._version)).version
        except MiniPulsarError:
            metrics.CURSOR_PERSIST_ERRORS.inc()
            raise
        metrics.CURSOR_PERSIST_SUCCEED.inc()
        self._version = version

    async def _delete_unnamed(self, previous: LedgerHandle | None) -> None:
        """Delete the ledgers the key no longer names: ``previous`` and the stale one."""
        doomed = [previous.ledger_id] if previous is not None else []
        if self._stale_ledger_id is not None:
            doomed.append(self._stale_ledger_id)
            self._stale_ledger_id = None
        for ledger_id in doomed:
            await self._discard(ledger_id)

    async def _discard(self, ledger_id: int) -> None:
        try:
            await self._bk.delete_ledger(ledger_id)
        except MiniPulsarError as error:  # the key does not name it: an orphan for an operator
            log.warning("%s: deleting cursor ledger %d failed: %s", self.path, ledger_id, error)

    # -- lifecycle ------------------------------------------------------------------------------

    async def close(self, position: CursorPosition) -> None:
        """A clean close: the position into the key and the ledger deleted, or — with many
        ranges — into a last entry of the ledger, closed and kept (Pulsar's
        ``persistPositionWhenClosing``)."""
        async with self._lock:
            if self.state in (CursorLedgerState.CLOSED, CursorLedgerState.DELETED):
                return
            handle = self._handle
            many_ranges = len(position.ranges) > self._config.max_unacked_ranges_to_persist_in_metadata_store
            if handle is not None and many_ranges:
                await self._append_or_fall_back(handle, position)
                if self._handle is handle:
                    await handle.close()
            else:
                await self._put_key(position, NO_LEDGER)
                await self._delete_unnamed(handle)
            self._handle, self.state = None, CursorLedgerState.CLOSED

    async def delete(self) -> None:
        """Unsubscribe: the key first (nobody may recover from the ledger after), then the ledgers."""
        async with self._lock:
            self.state = CursorLedgerState.DELETED
            try:
                await self._store.delete(self.path)
            except NotFoundError:
                pass
            handle, self._handle = self._handle, None
            await self._delete_unnamed(handle)


async def _last_position(bookkeeper: LedgerClient, ledger_id: int) -> CursorPosition | None:
    """The last entry of a cursor ledger, opened with recovery (fenced); None if empty or gone."""
    try:
        handle = await bookkeeper.open_ledger(ledger_id, recovery=True)
    except NoSuchLedgerError:
        return None
    last = handle.last_entry_id
    if last < 0:
        return None
    [(_, data)] = await handle.read(last, last)
    return decode_position_info(data)
