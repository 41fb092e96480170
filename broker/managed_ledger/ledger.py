"""ManagedLedger: a topic's log as an ordered list of BookKeeper ledgers (reference §3).

Only the last ledger is written. Adds are issued in order on it and complete in order; each
completed add advances ``last_confirmed``, lands in the entry cache and wakes the cursors
waiting for entries. When the current ledger fails (a bookie write failed), the ledger is
closed at its last-add-confirmed and the next add creates a new one; adds that arrive
meanwhile queue and are issued, in order, on the new ledger.

On open, the previous owner's last ledger is recovered (fenced and closed) and a new ledger
is started, so a restarted broker never appends to a ledger another writer may still hold.
The ledger list is written by compare-and-set: losing the race means another broker owns
the topic now, and this ledger turns FENCED.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import deque
from dataclasses import dataclass
from functools import partial

from minipulsar.errors import BadVersionError, MiniPulsarError, ServiceNotReadyError
from minipulsar.metadata.store import NOT_EXISTS, MetadataStore
from minipulsar.protocol.batch import peek_num_messages

from broker.bookkeeper import BookKeeper, LedgerHandle
from broker.managed_ledger.entry_cache import EntryCache
from broker.managed_ledger.info import LedgerInfo, ManagedLedgerInfo, managed_ledger_path
from broker.managed_ledger.position import Entry, Position

log = logging.getLogger(__name__)


class State(enum.Enum):
    NONE = "None"
    LEDGER_OPENED = "LedgerOpened"
    CREATING_LEDGER = "CreatingLedger"
    CLOSED_LEDGER = "ClosedLedger"
    FENCED = "Fenced"
    CLOSED = "Closed"


_TRANSITIONS = {
    State.NONE: {State.CREATING_LEDGER, State.CLOSED, State.FENCED},
    State.CREATING_LEDGER: {State.LEDGER_OPENED, State.CLOSED_LEDGER, State.FENCED, State.CLOSED},
    State.LEDGER_OPENED: {State.CLOSED_LEDGER, State.FENCED, State.CLOSED},
    State.CLOSED_LEDGER: {State.CREATING_LEDGER, State.FENCED, State.CLOSED},
    State.FENCED: {State.CLOSED},
    State.CLOSED: set(),
}


@dataclass(frozen=True, slots=True)
class ManagedLedgerConfig:
    ensemble_size: int = 1
    write_quorum: int = 1
    ack_quorum: int = 1


class OpAddEntry:
    __slots__ = ("payload", "num_messages", "future")

    def __init__(self, payload: bytes, num_messages: int, future: asyncio.Future[Position]) -> None:
        self.payload = payload
        self.num_messages = num_messages
        self.future = future


class ManagedLedger:
    def __init__(self, name: str, store: MetadataStore, bookkeeper: BookKeeper, cache: EntryCache,
                 config: ManagedLedgerConfig) -> None:
        self.name = name
        self.path = managed_ledger_path(name)
        self._store = store
        self._bk = bookkeeper
        self.cache = cache
        self.config = config
        self.state = State.NONE
        self._info = ManagedLedgerInfo()
        self._info_version = NOT_EXISTS
        self._current: LedgerHandle | None = None
        self._read_handles: dict[int, LedgerHandle] = {}
        self._queued: deque[OpAddEntry] = deque()
        self._entry_waiters: list[asyncio.Future[None]] = []
        self._loop = asyncio.get_running_loop()
        self.entries_added = 0

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        """Load the ledger list, recover the previous last ledger, start a new one."""
        await self._load_info()
        await self._recover_last_ledger()
        await self._create_ledger()
        if self.state is not State.LEDGER_OPENED:
            raise ServiceNotReadyError(f"managed ledger {self.name}: cannot create a ledger")

    async def _load_info(self) -> None:
        current = await self._store.get(self.path)
        if current is not None:
            self._info = ManagedLedgerInfo.from_bytes(current.value)
            self._info_version = current.version

    async def _recover_last_ledger(self) -> None:
        if not self._info.ledgers or self._info.ledgers[-1].entries is not None:
            return
        last = self._info.ledgers[-1]
        handle = await self._bk.open_ledger(last.ledger_id, recovery=True)
        last.entries, last.size = handle.last_entry_id + 1, handle.length
        if last.entries == 0:
            self._info.ledgers.pop()
            await self._bk.delete_ledger(last.ledger_id)
        else:
            self._read_handles[last.ledger_id] = handle

    def _transition(self, to: State) -> None:
        assert to in _TRANSITIONS[self.state], f"managed ledger {self.name}: {self.state} -> {to}"
        self.state = to

    async def close(self) -> None:
        if self.state is State.CLOSED:
            return
        self._transition(State.CLOSED)
        self._fail_queued(ServiceNotReadyError(f"managed ledger {self.name} is closed"))
        current, self._current = self._current, None
        if current is not None:
            try:
                await current.close()
            except MiniPulsarError as error:
                log.warning("%s: closing ledger %d failed (recovery will close it): %s",
                            self.name, current.ledger_id, error)
        self._wake_waiters()

    # -- writing --------------------------------------------------------------------------------

    def add_entry(self, payload: bytes, num_messages: int = 1) -> asyncio.Future[Position]:
        """Append one entry; the future gives its position once durable (Qa bookies)."""
        future: asyncio.Future[Position] = self._loop.create_future()
        op = OpAddEntry(payload, num_messages, future)
        if self.state is State.LEDGER_OPENED:
            self._initiate(op)
        elif self.state is State.CREATING_LEDGER:
            self._queued.append(op)
        elif self.state is State.CLOSED_LEDGER:
            self._queued.append(op)
            self._loop.create_task(self._create_ledger())
        else:
            future.set_exception(ServiceNotReadyError(f"managed ledger {self.name} is {self.state.value}"))
        return future

    def _initiate(self, op: OpAddEntry) -> None:
        assert self._current is not None
        self._current.add(op.payload).add_done_callback(partial(self._add_completed, op, self._current))

    def _add_completed(self, op: OpAddEntry, handle: LedgerHandle, added: asyncio.Future[int]) -> None:
        error = added.exception()
        if error is not None:
            if not op.future.done():
                op.future.set_exception(error)
            if handle is self._current and self.state is State.LEDGER_OPENED:
                self._transition(State.CLOSED_LEDGER)
            return
        position = Position(handle.ledger_id, added.result())
        self.entries_added += 1
        self.cache.insert(Entry(position, op.payload, op.num_messages))
        if not op.future.done():
            op.future.set_result(position)
        self._wake_waiters()

    async def _create_ledger(self) -> None:
        """Close the current ledger (if any), start a new one, issue the queued adds on it."""
        if self.state not in (State.NONE, State.CLOSED_LEDGER):
            return
        self._transition(State.CREATING_LEDGER)
        try:
            await self._close_current()
            handle = await self._bk.create_ledger(
                self.config.ensemble_size, self.config.write_quorum, self.config.ack_quorum,
                custom={"pulsar/managed-ledger": self.name})
            self._info.ledgers.append(LedgerInfo(handle.ledger_id, timestamp_ms=int(time.time() * 1000)))
            await self._store_info()
        except MiniPulsarError as error:
            log.warning("%s: cannot create a ledger: %s", self.name, error)
            if self.state is State.CREATING_LEDGER:
                self._transition(State.FENCED if isinstance(error, BadVersionError) else State.CLOSED_LEDGER)
            self._fail_queued(error)
            return
        if self.state is not State.CREATING_LEDGER:  # closed meanwhile
            await handle.close()
            return
        self._current = handle
        self._transition(State.LEDGER_OPENED)
        log.info("%s: writing to ledger %d", self.name, handle.ledger_id)
        queued, self._queued = self._queued, deque()
        for op in queued:
            self._initiate(op)

    async def _close_current(self) -> None:
        current, self._current = self._current, None
        if current is None:
            return
        self._read_handles[current.ledger_id] = current
        info = self._info.ledgers[-1]
        assert info.ledger_id == current.ledger_id
        info.entries, info.size = current.last_add_confirmed + 1, current.length
        try:
            await current.close()
        except MiniPulsarError as error:  # the ledger stays OPEN in its metadata; recovery closes it
            log.warning("%s: closing ledger %d failed: %s", self.name, current.ledger_id, error)

    async def _store_info(self) -> None:
        stat = await self._store.put(self.path, self._info.to_bytes(), self._info_version)
        self._info_version = stat.version

    def _fail_queued(self, error: MiniPulsarError) -> None:
        queued, self._queued = self._queued, deque()
        for op in queued:
            if not op.future.done():
                op.future.set_exception(error)

    # -- positions ------------------------------------------------------------------------------

    @property
    def ledgers(self) -> list[LedgerInfo]:
        return self._info.ledgers

    def _last_entry_of(self, info: LedgerInfo) -> int:
        if self._current is not None and info.ledger_id == self._current.ledger_id:
            return self._current.last_add_confirmed
        return (info.entries or 0) - 1

    @property
    def last_confirmed(self) -> Position:
        """The last durable entry, or ``(first ledger, -1)`` when there is none."""
        for info in reversed(self._info.ledgers):
            last = self._last_entry_of(info)
            if last >= 0:
                return Position(info.ledger_id, last)
        first = self._info.ledgers[0].ledger_id if self._info.ledgers else -1
        return Position(first, -1)

    @property
    def first_position(self) -> Position:
        return Position(self._info.ledgers[0].ledger_id if self._info.ledgers else -1, -1)

    def normalize(self, position: Position) -> Position:
        """The first existing entry at or after ``position``; past the end stays in the last ledger."""
        ledgers = self._info.ledgers
        for index, info in enumerate(ledgers):
            if info.ledger_id < position.ledger_id:
                continue
            if info.ledger_id > position.ledger_id:
                position = Position(info.ledger_id, 0)
            if position.entry_id <= self._last_entry_of(info) or index == len(ledgers) - 1:
                return position
        return position

    def next_position(self, position: Position) -> Position:
        return self.normalize(Position(position.ledger_id, position.entry_id + 1))

    def has_entries_after(self, position: Position) -> bool:
        return position < self.last_confirmed

    def count_entries(self, after: Position, up_to: Position) -> int:
        """Entries in ``(after, up_to]``."""
        total = 0
        for info in self._info.ledgers:
            last = self._last_entry_of(info)
            low = after.entry_id + 1 if info.ledger_id == after.ledger_id else 0
            high = up_to.entry_id if info.ledger_id == up_to.ledger_id else last
            if after.ledger_id <= info.ledger_id <= up_to.ledger_id and high >= low:
                total += high - low + 1
        return total

    # -- reading --------------------------------------------------------------------------------

    async def read_entries(self, start: Position, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` consecutive entries from ``start`` within one ledger."""
        start = self.normalize(start)
        info = next((i for i in self._info.ledgers if i.ledger_id == start.ledger_id), None)
        if info is None:
            return []
        last = min(self._last_entry_of(info), start.entry_id + max_entries - 1)
        if last < start.entry_id:
            return []
        entries: list[Entry] = []
        missing_from = None
        for entry_id in range(start.entry_id, last + 1):
            cached = self.cache.get(Position(start.ledger_id, entry_id))
            if cached is None:
                missing_from = entry_id
                break
            entries.append(cached)
        if missing_from is not None:
            handle = await self._read_handle(start.ledger_id)
            for entry_id, payload in await handle.read(missing_from, last):
                entries.append(Entry(Position(start.ledger_id, entry_id), payload, peek_num_messages(payload)))
        return entries

    async def _read_handle(self, ledger_id: int) -> LedgerHandle:
        if self._current is not None and self._current.ledger_id == ledger_id:
            return self._current
        handle = self._read_handles.get(ledger_id)
        if handle is None:
            handle = await self._bk.open_ledger(ledger_id, recovery=True)
            self._read_handles[ledger_id] = handle
        return handle

    def wait_for_entries(self) -> asyncio.Future[None]:
        """Resolves on the next completed add (or close)."""
        future = self._loop.create_future()
        self._entry_waiters.append(future)
        return future

    def _wake_waiters(self) -> None:
        waiters, self._entry_waiters = self._entry_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


__all__ = ["ManagedLedger", "ManagedLedgerConfig", "State"]
