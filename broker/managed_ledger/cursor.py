"""ManagedCursor: a subscription's (or a reader's) position in a managed ledger.

- ``mark_delete``: every entry at or before it is acknowledged;
- ``individually_deleted``: acknowledged entries after ``mark_delete`` (ack holes), as sorted
  ranges (range_set.py); when the entry right after ``mark_delete`` is acknowledged,
  ``mark_delete`` moves forward over the contiguous run and the run leaves the set;
- ``read_position``: the next entry to dispatch; it moves on reads, not on acks (but never
  stays at or before ``mark_delete``), and a rewind puts it back at the first unacknowledged
  entry.

A durable cursor persists ``mark_delete``, the first ``managedLedgerMaxUnackedRangesToPersist``
ranges and its ``properties`` as one entry of its cursor ledger on the bookies
(cursor_ledger.py: the metadata key only names that ledger, so an ack costs no metadata
write). Writes coalesce — at most one in flight per cursor, carrying every change made before
it started — and are spaced out to
``managedLedgerDefaultMarkDeleteRateLimit`` per second, except that a caller waiting for
durability (an ack that asked for a receipt, a reset, a close) is never held back by the
rate: its change goes out with the next write, at once. Delaying it would hold a consumer's
receipt for up to a second per ack; coalescing still bounds the writes to one in flight.
Nothing is dropped: a change not yet written is written later, and after a crash the
acknowledgements not written are delivered again.

A non-durable cursor (a Reader, or a non-durable subscription) lives in memory only, never
holds data back from trimming, and skips forward when the ledgers under it are trimmed.

``active`` tells the managed ledger that a consumer reads from this cursor (entries are
cached for it): non-durable cursors start active (Pulsar PR 6769), durable ones become
active when read; the subscription layer may set it either way.

Invariants:

- ``mark_delete`` only moves forward, except on a reset;
- no position at or before ``mark_delete`` is in ``individually_deleted``;
- ``read_position`` is after ``mark_delete``;
- at most one write of a durable cursor is in flight, carrying every change made before it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from minipulsar.broker.managed_ledger import metrics
from minipulsar.broker.managed_ledger.cursor_ledger import CursorLedger
from minipulsar.broker.managed_ledger.ledger import ManagedLedger
from minipulsar.broker.managed_ledger.position import Entry, Position
from minipulsar.broker.managed_ledger.position_info import CursorPosition
from minipulsar.broker.managed_ledger.range_set import PositionRangeSet
from minipulsar.errors import BadVersionError, InvalidCommandError, MiniPulsarError, NotFoundError
from minipulsar.metadata.store import NOT_EXISTS, MetadataStore
from minipulsar.supervision import spawn

log = logging.getLogger(__name__)

WRITE_RETRY_S = 1.0
"""After a failed position write, when to try again the changes nobody waits for."""


class ManagedCursor:
    def __init__(
        self,
        ledger: ManagedLedger,
        name: str,
        store: MetadataStore | None,
        mark_delete: Position,
        individually_deleted: Iterable[Position] | PositionRangeSet = (),
        version: int = NOT_EXISTS,
        *,
        persistence: CursorLedger | None = None,
        properties: dict[str, int] | None = None,
    ) -> None:
        self.ledger = ledger
        self.name = name
        self._store = store
        self.path = f"{ledger.path}/{name}"
        if persistence is None and store is not None:
            persistence = CursorLedger(ledger.name, name, self.path, store, ledger.bookkeeper, ledger.config, version)
        self.persistence = persistence
        """Where the position goes (None: a non-durable cursor)."""
        self.properties: dict[str, int] = dict(properties or {})
        """Pulsar's mark-delete ``properties``: persisted with every position."""
        self.mark_delete = mark_delete
        self.individually_deleted = (
            individually_deleted
            if isinstance(individually_deleted, PositionRangeSet)
            else PositionRangeSet(individually_deleted)
        )
        self.read_position = ledger.next_position(mark_delete)
        self.active = store is None
        self._read_epoch = 0
        """Bumped by seek/rewind/reset: a read that started before one is dropped."""
        self._changes = 0
        self._persisted = 0
        self._writing = False
        self._last_write_s = -float("inf")
        self._write_timer: asyncio.TimerHandle | None = None
        self._persist_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._closed = False
        self._warned_ranges = False
        self.unpersisted_ranges = 0
        """Ranges left out of the last write (beyond managedLedgerMaxUnackedRangesToPersist)."""
        self.ranges_over_limit = 0
        """Writes that left ranges out (counter)."""
        self.cache_hits_tailing = 0
        self.cache_hits_catch_up = 0
        self.cache_misses_tailing = 0
        self.cache_misses_catch_up = 0
        ledger.add_cursor(self)

    @property
    def durable(self) -> bool:
        return self._store is not None

    def fence(self) -> None:
        """Its managed ledger is fenced: the position goes to the cursor ledger alone, never
        to the metadata key (:meth:`CursorLedger.fence`)."""
        if self.persistence is not None:
            self.persistence.fence()

    @classmethod
    async def open(
        cls, ledger: ManagedLedger, name: str, store: MetadataStore | None, start_at_earliest: bool
    ) -> ManagedCursor:
        """Load a durable cursor, or create it at the earliest or latest position."""
        if not name or "/" in name:
            raise InvalidCommandError(f"invalid subscription name {name!r}")
        if store is not None:
            path = f"{ledger.path}/{name}"
            recovered = await CursorLedger.recover(ledger.name, name, path, store, ledger.bookkeeper, ledger.config)
            if recovered is not None:
                persistence, position = recovered
                return cls(
                    ledger,
                    name,
                    store,
                    position.mark_delete,
                    position.acked(),
                    persistence=persistence,
                    properties=position.properties,
                )
        start = ledger.first_position if start_at_earliest else ledger.last_confirmed
        cursor = cls(ledger, name, store, start)
        if cursor.persistence is not None:
            await cursor.persistence.initialize(cursor._position())
        return cursor

    @classmethod
    def open_non_durable(
        cls, ledger: ManagedLedger, name: str, start: Position | None, inclusive: bool = True
    ) -> ManagedCursor:
        """An in-memory cursor reading from ``start`` (None: after the last entry); with
        ``inclusive`` the entry at ``start`` is the first read, else the one after it. A start
        that was trimmed away, or ``(L, -1)``, begins at the first existing entry."""
        if start is None:
            mark_delete = ledger.last_confirmed
        else:
            target = _clamp(ledger, start)
            if not inclusive and target == start:
                mark_delete = start
            else:
                mark_delete = Position(target.ledger_id, target.entry_id - 1)
        return cls(ledger, name, None, mark_delete)

    # -- reading --------------------------------------------------------------------------------

    async def read_entries(self, max_entries: int, max_bytes: int | None = None) -> list[Entry]:
        """Up to ``max_entries`` (and ``max_bytes``) unacknowledged entries from ``read_position``,
        advancing it. Empty when a seek or rewind happened meanwhile."""
        self.active = True
        epoch = self._read_epoch
        start = self.ledger.normalize(self.read_position)
        entries = await self.ledger.read_entries(start, max_entries, max_bytes, cursor=self)
        if not entries or epoch != self._read_epoch:
            return []
        if self.read_position <= entries[-1].position:
            self.read_position = self.ledger.next_position(entries[-1].position)
        return [entry for entry in entries if not self.is_acked(entry.position)]

    def has_more_entries(self) -> bool:
        """True when an entry is ready at ``read_position``. Asking is reading: the cursor is active."""
        self.active = True
        return self.ledger.normalize(self.read_position) <= self.ledger.last_confirmed

    def rewind(self) -> None:
        """Dispatch again from the first unacknowledged entry."""
        self.read_position = self.ledger.next_position(self.mark_delete)
        self._read_epoch += 1

    def seek(self, read_position: Position) -> None:
        self.read_position = self.ledger.normalize(read_position)
        self._read_epoch += 1

    async def reset(self, position: Position) -> None:
        """SEEK: everything before ``position`` is acknowledged, nothing at or after it is
        (holes cleared); reading restarts at it. Returns once durable."""
        target = _clamp(self.ledger, position)
        previous = self.mark_delete
        self.mark_delete = Position(target.ledger_id, target.entry_id - 1)
        self.individually_deleted.clear()
        self.read_position = target
        self._read_epoch += 1
        self._changes += 1
        if self.durable and self.mark_delete > previous:
            self.ledger.mark_delete_moved(previous, self.mark_delete)
        await self.flush()

    def skip_trimmed(self, first: Position) -> None:
        """The ledgers before ``first`` are gone: a non-durable cursor moves past them."""
        if self.mark_delete < first:
            self.mark_delete = first
            self.individually_deleted.remove_up_to(first)
        if self.read_position <= self.mark_delete:
            self.read_position = self.ledger.next_position(self.mark_delete)

    def is_acked(self, position: Position) -> bool:
        return position <= self.mark_delete or position in self.individually_deleted

    @property
    def backlog_entries(self) -> int:
        """Unacknowledged entries up to the last confirmed one."""
        ledger = self.ledger
        return max(
            0, ledger.count_entries(self.mark_delete, ledger.last_confirmed) - self.individually_deleted.entry_count
        )

    @property
    def non_contiguous_deleted_ranges(self) -> int:
        """Pulsar's ``nonContiguousDeletedMessagesRange``: the ack holes, as ranges."""
        return len(self.individually_deleted)

    @property
    def cache_hits(self) -> int:
        return self.cache_hits_tailing + self.cache_hits_catch_up

    @property
    def cache_misses(self) -> int:
        return self.cache_misses_tailing + self.cache_misses_catch_up

    # -- acknowledging --------------------------------------------------------------------------

    async def acknowledge(self, positions: Iterable[Position], wait_durable: bool = True) -> None:
        """Acknowledge each position individually (unknown positions are ignored); with
        ``wait_durable`` returns once durable, else the write follows within the rate limit."""
        acked = self.individually_deleted
        contains = self.ledger.contains
        changed = False
        for position in positions:
            if position > self.mark_delete and contains(position) and acked.add(position):
                changed = True
        if changed:
            previous = self.mark_delete
            self._advance_mark_delete()
            self._changed(previous)
        await self._settle(wait_durable)

    async def acknowledge_cumulative(self, position: Position, wait_durable: bool = True) -> None:
        """Acknowledge everything up to and including ``position``."""
        position = min(position, self.ledger.last_confirmed)
        if position > self.mark_delete:
            previous = self.mark_delete
            self.mark_delete = position
            self.individually_deleted.remove_up_to(position)
            self._advance_mark_delete()
            self._changed(previous)
        await self._settle(wait_durable)

    async def mark_delete_with_properties(self, position: Position, properties: dict[str, int]) -> None:
        """Pulsar's ``markDelete(position, properties)``: acknowledge up to ``position`` and
        replace the properties persisted with it; returns once durable."""
        self.properties = dict(properties)
        self._changes += 1
        await self.acknowledge_cumulative(position, wait_durable=True)

    def _advance_mark_delete(self) -> None:
        acked = self.individually_deleted
        following = self.ledger.next_position(self.mark_delete)
        while (first := acked.first()) is not None and first[0] <= following:
            self.mark_delete = acked.pop_first()[1]
            following = self.ledger.next_position(self.mark_delete)
        if self.read_position <= self.mark_delete:
            self.read_position = following

    def _changed(self, previous_mark_delete: Position) -> None:
        self._changes += 1
        if self.durable and self.mark_delete != previous_mark_delete:
            self.ledger.mark_delete_moved(previous_mark_delete, self.mark_delete)

    async def _settle(self, wait_durable: bool) -> None:
        if wait_durable:
            await self.flush()
        else:
            self._request_write(urgent=False)

    # -- persistence ----------------------------------------------------------------------------

    async def flush(self) -> None:
        """Return once every change made so far is durable (at once for a non-durable cursor)."""
        target = self._changes
        if self._store is None or self._persisted >= target:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._persist_waiters.append((target, waiter))
        self._request_write(urgent=True)
        await waiter

    def _request_write(self, urgent: bool) -> None:
        if self._store is None or self._writing or self._persisted >= self._changes:
            return
        rate = self.ledger.config.mark_delete_rate_limit
        if not urgent and rate > 0:
            delay_s = self._last_write_s + 1 / rate - time.monotonic()
            if delay_s > 0:
                if self._write_timer is None and not self._closed:
                    self._write_timer = asyncio.get_running_loop().call_later(delay_s, self._write_timer_fired)
                return
        self._cancel_write_timer()
        self._writing = True
        spawn(self._write(), name=f"cursor {self.path}: write", logger=log)

    def _write_timer_fired(self) -> None:
        self._write_timer = None
        self._request_write(urgent=bool(self._persist_waiters))

    def _cancel_write_timer(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _position(self) -> CursorPosition:
        max_ranges = self.ledger.config.max_unacked_ranges_to_persist
        position, left_out = CursorPosition.of(self.mark_delete, self.individually_deleted, max_ranges, self.properties)
        self._note_left_out(left_out)
        return position

    async def _write(self) -> None:
        assert self.persistence is not None
        target = self._changes
        position = self._position()
        self._last_write_s = time.monotonic()
        try:
            await self.persistence.persist(position)
        except MiniPulsarError as error:
            self._writing = False
            log.warning("cursor %s: persisting the mark-delete position failed: %s", self.path, error)
            self._resolve_waiters(self._changes, error)
            if not self._closed and not isinstance(error, (BadVersionError, NotFoundError)):
                self._write_timer = asyncio.get_running_loop().call_later(WRITE_RETRY_S, self._write_timer_fired)
            return
        self._writing = False
        self._persisted = target
        self._resolve_waiters(target, None)
        if self._persisted < self._changes:
            self._request_write(urgent=bool(self._persist_waiters))

    def _note_left_out(self, left_out: int) -> None:
        self.unpersisted_ranges = left_out
        if left_out <= 0:
            return
        self.ranges_over_limit += 1
        metrics.CURSOR_RANGES_OVER_LIMIT.inc()
        if not self._warned_ranges:
            self._warned_ranges = True
            log.warning(
                "cursor %s: %d acknowledged ranges beyond managedLedgerMaxUnackedRangesToPersist=%d "
                "are kept in memory only (redelivered after a crash); further occurrences are counted "
                "in pulsar_ml_cursor_nonContiguousDeletedMessagesRange_over_limit",
                self.path,
                left_out,
                self.ledger.config.max_unacked_ranges_to_persist,
            )

    def _resolve_waiters(self, up_to: int, error: MiniPulsarError | None) -> None:
        remaining = []
        for target, waiter in self._persist_waiters:
            if target > up_to:
                remaining.append((target, waiter))
            elif not waiter.done():
                waiter.set_exception(error) if error else waiter.set_result(None)
        self._persist_waiters = remaining

    # -- lifecycle ------------------------------------------------------------------------------

    async def close(self) -> None:
        """Write what is pending (durable), store the position in the key (a clean close: see
        cursor_ledger.py) and leave the managed ledger's cursors."""
        if self._closed:
            return
        try:
            await self.flush()
        except MiniPulsarError as error:
            log.warning("cursor %s: final position write failed: %s", self.path, error)
        self._closed = True
        self._cancel_write_timer()
        self.ledger.remove_cursor(self)
        if self.persistence is not None:
            try:
                await self.persistence.close(self._position())
            except MiniPulsarError as error:  # the cursor ledger still holds the last position written
                log.warning("cursor %s: closing the cursor ledger failed: %s", self.path, error)

    async def delete(self) -> None:
        """Forget the cursor (unsubscribe): it no longer holds data back from trimming."""
        self._closed = True
        self._cancel_write_timer()
        self.ledger.remove_cursor(self)
        if self.persistence is not None:
            await self.persistence.delete()
            self.ledger.trim_soon()


def _clamp(ledger: ManagedLedger, position: Position) -> Position:
    """``position`` as an existing entry, or the position just past the last one."""
    if position.entry_id < 0:
        position = Position(position.ledger_id, 0)
    tail = ledger.next_position(ledger.last_confirmed)
    return min(ledger.normalize(position), tail)
