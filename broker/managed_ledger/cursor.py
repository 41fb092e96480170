"""ManagedCursor: a subscription's position in a managed ledger (reference §3.5).

- ``mark_delete``: every entry at or before it is acknowledged;
- ``individually_deleted``: acknowledged entries after ``mark_delete`` (ack holes); when the
  entry right after ``mark_delete`` is acknowledged, ``mark_delete`` moves forward over the
  contiguous run and the run leaves the set;
- ``read_position``: the next entry to dispatch; it moves on reads, not on acks, and a rewind
  puts it back at the first unacknowledged entry.

A durable cursor persists ``mark_delete`` and the holes to the metadata store at
``/managed-ledgers/{topic}/{cursor}``. Acknowledgements wait for that write (the client asked
for an ack receipt), and writes coalesce: at most one is in flight per cursor and it carries
every change made before it started, so a burst of acks costs a handful of metadata writes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterable

from minipulsar.errors import InvalidCommand, MiniPulsarError, NotFoundError
from minipulsar.metadata.store import NOT_EXISTS, MetadataStore

from broker.managed_ledger.ledger import ManagedLedger
from broker.managed_ledger.position import Entry, Position

log = logging.getLogger(__name__)

MAX_RANGES_PERSISTED = 1000  # Pulsar: managedLedgerMaxUnackedRangesToPersistInMetadataStore


class ManagedCursor:
    def __init__(self, ledger: ManagedLedger, name: str, store: MetadataStore | None,
                 mark_delete: Position, individually_deleted: Iterable[Position] = (),
                 version: int = NOT_EXISTS) -> None:
        self.ledger = ledger
        self.name = name
        self._store = store
        self.path = f"{ledger.path}/{name}"
        self.mark_delete = mark_delete
        self.individually_deleted: set[Position] = set(individually_deleted)
        self.read_position = ledger.next_position(mark_delete)
        self._version = version
        self._changes = 0
        self._persisted = 0
        self._persisting = False
        self._persist_waiters: list[tuple[int, asyncio.Future[None]]] = []

    @property
    def durable(self) -> bool:
        return self._store is not None

    @classmethod
    async def open(cls, ledger: ManagedLedger, name: str, store: MetadataStore | None,
                   start_at_earliest: bool) -> "ManagedCursor":
        """Load a durable cursor, or create it at the earliest or latest position."""
        if not name or "/" in name:
            raise InvalidCommand(f"invalid subscription name {name!r}")
        if store is not None:
            stored = await store.get(f"{ledger.path}/{name}")
            if stored is not None:
                mark_delete, holes = _decode(stored.value)
                return cls(ledger, name, store, mark_delete, holes, stored.version)
        start = ledger.first_position if start_at_earliest else ledger.last_confirmed
        cursor = cls(ledger, name, store, start)
        if store is not None:
            cursor._changes += 1
            await cursor._flush(cursor._changes)
        return cursor

    # -- reading --------------------------------------------------------------------------------

    async def read_entries(self, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` unacknowledged entries from ``read_position``, advancing it."""
        start = self.ledger.normalize(self.read_position)
        entries = await self.ledger.read_entries(start, max_entries)
        if not entries:
            return []
        if self.read_position <= entries[-1].position:
            self.read_position = self.ledger.next_position(entries[-1].position)
        return [entry for entry in entries if not self.is_acked(entry.position)]

    def has_more_entries(self) -> bool:
        return self.ledger.normalize(self.read_position) <= self.ledger.last_confirmed

    def rewind(self) -> None:
        """Dispatch again from the first unacknowledged entry."""
        self.read_position = self.ledger.next_position(self.mark_delete)

    def seek(self, position: Position) -> None:
        self.read_position = self.ledger.normalize(position)

    def is_acked(self, position: Position) -> bool:
        return position <= self.mark_delete or position in self.individually_deleted

    @property
    def backlog_entries(self) -> int:
        return max(0, self.ledger.count_entries(self.mark_delete, self.ledger.last_confirmed)
                   - len(self.individually_deleted))

    # -- acknowledging --------------------------------------------------------------------------

    async def acknowledge(self, positions: Iterable[Position]) -> None:
        """Acknowledge each position individually; returns once durable."""
        changed = False
        for position in positions:
            if not self.is_acked(position) and position <= self.ledger.last_confirmed:
                self.individually_deleted.add(position)
                changed = True
        if changed:
            self._advance_mark_delete()
        await self._flush(self._changes)

    async def acknowledge_cumulative(self, position: Position) -> None:
        """Acknowledge everything up to and including ``position``; returns once durable."""
        position = min(position, self.ledger.last_confirmed)
        if position > self.mark_delete:
            self.mark_delete = position
            self.individually_deleted = {p for p in self.individually_deleted if p > position}
            self._advance_mark_delete()
        await self._flush(self._changes)

    def _advance_mark_delete(self) -> None:
        holes = self.individually_deleted
        following = self.ledger.next_position(self.mark_delete)
        while following in holes:
            holes.discard(following)
            self.mark_delete = following
            following = self.ledger.next_position(following)
        self._changes += 1

    # -- persistence ----------------------------------------------------------------------------

    async def _flush(self, target: int) -> None:
        if self._store is None or self._persisted >= target:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._persist_waiters.append((target, waiter))
        if not self._persisting:
            self._persisting = True
            asyncio.get_running_loop().create_task(self._persist_loop())
        await waiter

    async def _persist_loop(self) -> None:
        try:
            while self._persisted < self._changes:
                target = self._changes
                data = _encode(self.mark_delete, self.individually_deleted)
                try:
                    stat = await self._store.put(self.path, data, self._version)  # type: ignore[union-attr]
                except MiniPulsarError as error:
                    log.warning("cursor %s: persisting the mark-delete position failed: %s", self.path, error)
                    self._resolve_waiters(self._changes, error)
                    return
                self._version = stat.version
                self._persisted = target
                self._resolve_waiters(target, None)
        finally:
            self._persisting = False

    def _resolve_waiters(self, up_to: int, error: MiniPulsarError | None) -> None:
        remaining = []
        for target, waiter in self._persist_waiters:
            if target > up_to:
                remaining.append((target, waiter))
            elif not waiter.done():
                waiter.set_exception(error) if error else waiter.set_result(None)
        self._persist_waiters = remaining

    async def delete(self) -> None:
        if self._store is not None:
            try:
                await self._store.delete(self.path)
            except NotFoundError:
                pass


def _encode(mark_delete: Position, holes: set[Position]) -> bytes:
    return json.dumps({
        "markDeleteLedgerId": mark_delete.ledger_id,
        "markDeleteEntryId": mark_delete.entry_id,
        "individualDeletedMessages": _to_ranges(holes)[:MAX_RANGES_PERSISTED],
        "lastActive": int(time.time() * 1000),
    }, separators=(",", ":")).encode()


def _decode(data: bytes) -> tuple[Position, list[Position]]:
    raw = json.loads(data)
    mark_delete = Position(raw["markDeleteLedgerId"], raw["markDeleteEntryId"])
    holes = [Position(ledger_id, entry_id)
             for ledger_id, first, last in raw.get("individualDeletedMessages", [])
             for entry_id in range(first, last + 1)]
    return mark_delete, holes


def _to_ranges(positions: set[Position]) -> list[list[int]]:
    """Sorted positions as ``[ledger_id, first_entry, last_entry]`` runs."""
    ranges: list[list[int]] = []
    for position in sorted(positions):
        if ranges and ranges[-1][0] == position.ledger_id and ranges[-1][2] == position.entry_id - 1:
            ranges[-1][2] = position.entry_id
        else:
            ranges.append([position.ledger_id, position.entry_id, position.entry_id])
    return ranges
