"""ManagedLedger: a topic's log as an ordered list of BookKeeper ledgers.

Writing. Only the last ledger is written. Adds are issued in order on it and complete in
order; each completed add advances ``last_confirmed``, may land in the entry cache (when an
active cursor reads near the tail) and wakes the cursors waiting for entries. States follow
Pulsar's ``ManagedLedgerImpl``: LedgerOpened → (full) ClosingLedger → ClosedLedger →
CreatingLedger → LedgerOpened. Adds arriving while no ledger is open queue, and are issued in
order on the next ledger: nothing queued is lost or reordered.

Rollover: checked on each add and by a timer at the ledger's maximum age (the broker's one
:class:`~broker.managed_ledger.timers.LedgerTimers` serves every managed ledger).
The add that fills the ledger is its last: it is marked ``close_when_done``, and the ledger
is closed once it (and so every add before it) completed. The next ledger is created lazily,
on the next write (Pulsar's choice: an idle topic holds no open ledger). A failed add closes
the ledger the same way (at its last-add-confirmed) and is issued again, first and in order
with those that failed behind it, on the next ledger — up to ``MAX_ADD_ATTEMPTS`` ledgers.
An add whose failure reaches its producer takes every add behind it along (those waiting and
those still failing on the same ledger): a later add stored after an earlier one failed would
leave a hole in its producer's sequence, and deduplication would then take the earlier one's
resend for a duplicate and acknowledge a message that is nowhere.

Trimming (rules in retention.py): every ``retentionCheckIntervalInSeconds`` (the shared
timers' retention walk),
after a ledger closes and when a durable cursor's mark-delete leaves a ledger. Ledgers are
removed from the managed-ledger info first (compare-and-set), then deleted from BookKeeper
(the bookies' garbage collection reclaims the data), then dropped from the entry cache;
non-durable cursors left behind skip forward.

On open, the previous owner's last ledger is recovered (fenced and closed) and a new ledger
is started, so a restarted broker never appends to a ledger another writer may still hold.
The ledger list is written by compare-and-set: losing the race means another broker owns
the topic now, and this managed ledger turns FENCED.

Invariants:

- adds complete in order; ``last_confirmed`` only moves forward;
- when an add fails to its caller, no add issued after it succeeds;
- only the last ledger is written, and a new ledger's id is above every earlier one;
- every state change follows the transition table;
- a ledger leaves the stored list before it is deleted from BookKeeper.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Protocol

from minipulsar import diagnostics
from minipulsar.broker.managed_ledger import metrics
from minipulsar.broker.managed_ledger.config import ManagedLedgerConfig
from minipulsar.broker.managed_ledger.cursor_info import decode_mark_delete
from minipulsar.broker.managed_ledger.entry_cache import EntryCache
from minipulsar.broker.managed_ledger.entry_reader import CursorReadCounters, EntryReader
from minipulsar.broker.managed_ledger.info import LedgerInfo, ManagedLedgerInfo, managed_ledger_path
from minipulsar.broker.managed_ledger.ledger_client import LedgerClient
from minipulsar.broker.managed_ledger.ledger_list import LedgerList
from minipulsar.broker.managed_ledger.position import Entry, Position
from minipulsar.broker.managed_ledger.retention import current_ledger_is_full, ledgers_to_trim
from minipulsar.broker.managed_ledger.stats_buckets import WRITE_LATENCY_BUCKETS_MS, StatsBuckets
from minipulsar.broker.managed_ledger.timers import LedgerTimers
from minipulsar.errors import (
    BadVersionError,
    MiniPulsarError,
    NoSuchLedgerError,
    PersistenceError,
    ServiceNotReadyError,
)
from minipulsar.metadata.cas import put_resolving
from minipulsar.metadata.store import NOT_EXISTS, MetadataStore
from minipulsar.supervision import spawn

if TYPE_CHECKING:
    from minipulsar.bookkeeper.ledger_handle import LedgerHandle
    from minipulsar.broker.managed_ledger.range_set import PositionRangeSet

log = logging.getLogger(__name__)


class State(enum.Enum):
    NONE = "None"
    LEDGER_OPENED = "LedgerOpened"
    CLOSING_LEDGER = "ClosingLedger"
    CREATING_LEDGER = "CreatingLedger"
    CLOSED_LEDGER = "ClosedLedger"
    FENCED = "Fenced"
    CLOSED = "Closed"


_TRANSITIONS = {
    State.NONE: {State.CREATING_LEDGER, State.CLOSED, State.FENCED},
    State.CREATING_LEDGER: {State.LEDGER_OPENED, State.CLOSED_LEDGER, State.FENCED, State.CLOSED},
    State.LEDGER_OPENED: {State.CLOSING_LEDGER, State.FENCED, State.CLOSED},
    State.CLOSING_LEDGER: {State.CLOSED_LEDGER, State.FENCED, State.CLOSED},
    State.CLOSED_LEDGER: {State.CREATING_LEDGER, State.FENCED, State.CLOSED},
    State.FENCED: {State.CLOSED},
    State.CLOSED: set(),
}


MAX_ADD_ATTEMPTS = 3
"""Ledgers an add is tried on before its failure reaches the producer."""


AddEntryCallback = Callable[[Position | None, BaseException | None], None]
"""Told an add's outcome once: ``(position, None)`` or ``(None, error)``."""


class OpAddEntry:
    __slots__ = ("attempts", "callback", "close_when_done", "num_messages", "payload", "started_s")

    def __init__(self, payload: bytes, num_messages: int, callback: AddEntryCallback) -> None:
        self.payload = payload
        self.num_messages = num_messages
        self.callback: AddEntryCallback | None = callback
        """Called once with the outcome, then None."""
        self.close_when_done = False
        """The ledger is full: close it once this add (the last issued on it) completes."""
        self.attempts = 0
        self.started_s = time.monotonic()
        """When ``add_entry`` took it: the write latency runs from here to its completion."""


class LatencyObserver(Protocol):
    """Where a managed ledger reports each write latency beside its own buckets (the broker's
    ``pulsar_storage_write_latency_ms`` child of its cluster)."""

    def observe(self, value: float) -> None: ...


class LedgerCursor(Protocol):
    """A cursor of the managed ledger (a ManagedCursor), as the ledger and its stats read it."""

    active: bool
    """Read now: the cache keeps entries for active readers near the tail."""
    cache_hits_tailing: int
    cache_hits_catch_up: int
    cache_misses_tailing: int
    cache_misses_catch_up: int

    @property
    def name(self) -> str: ...

    @property
    def durable(self) -> bool:
        """Persisted (its cursor ledger, named by its metadata key): its mark-delete position holds
        data back from trimming."""
        ...

    @property
    def mark_delete(self) -> Position: ...

    def fence(self) -> None:
        """The managed ledger is fenced: write no more to the metadata store."""
        ...

    @property
    def read_position(self) -> Position: ...

    @property
    def backlog_entries(self) -> int: ...

    @property
    def individually_deleted(self) -> PositionRangeSet: ...

    async def flush(self) -> None:
        """Persist what is pending (durable cursors)."""
        ...

    async def close(self) -> None:
        """Persist what is pending and leave the managed ledger (a durable cursor's clean close)."""
        ...

    def skip_trimmed(self, first: Position) -> None:
        """Move a non-durable cursor past ledgers trimmed away, to ``first``."""
        ...


class ManagedLedger:
    """One topic's log. ``timers``: the broker's shared :class:`LedgerTimers` (rollover checks,
    retention walk); without them (a library user, a test) the ledger runs its own.

    Slotted: a broker holds one per topic, and an idle topic's footprint counts.
    """

    __slots__ = (
        "_abandoned",
        "_bk",
        "_creation_error",
        "_current_bytes",
        "_current_entries",
        "_cursors",
        "_entry_waiters",
        "_in_flight",
        "_info_lock",
        "_info_version",
        "_latency_observer",
        "_ledger_cache",
        "_ledger_created_s",
        "_ledgers",
        "_loop",
        "_max_rollover_s",
        "_owns_timers",
        "_properties",
        "_queued",
        "_reader",
        "_retry",
        "_roll_timer_for_min",
        "_store",
        "_timers",
        "_trim_again",
        "_trim_task",
        "cache",
        "config",
        "entries_added",
        "ledgers_trimmed",
        "name",
        "path",
        "roll_due",
        "state",
        "write_latency",
    )

    def __init__(
        self,
        name: str,
        store: MetadataStore,
        bookkeeper: LedgerClient,
        cache: EntryCache,
        config: ManagedLedgerConfig,
        timers: LedgerTimers | None = None,
        write_latency: LatencyObserver | None = None,
    ) -> None:
        """``write_latency``: told every completed add's latency (ms) besides
        :attr:`write_latency`, this ledger's own per-interval buckets."""
        self.name = name
        self.path = managed_ledger_path(name)
        self._store = store
        self._bk = bookkeeper
        self.cache = cache
        self.config = config
        self.state = State.NONE
        self._ledgers = LedgerList([])
        self._properties: dict[str, str] = {}
        self._info_version = NOT_EXISTS
        self._info_lock = asyncio.Lock()
        self._queued: deque[OpAddEntry] | None = None
        """Adds waiting for a ledger, in arrival order (created on first use, as ``_retry``)."""
        self._retry: deque[OpAddEntry] | None = None
        """Adds that failed on a ledger that is now closed, in entry order: they go first on the next."""
        self._abandoned: LedgerHandle | None = None
        """The ledger whose failed add was given up on: every later add failing on it is given
        up on too (they are behind it)."""
        self._in_flight: deque[OpAddEntry] = deque()
        """Adds issued on the current ledger and not completed, in entry order."""
        self._entry_waiters: list[asyncio.Future[None]] = []
        self._cursors: list[LedgerCursor] = []
        self._ledger_cache = cache.for_ledger(name, self._cache_eviction_position)
        self._reader = EntryReader(
            self._ledgers, self._ledger_cache, cache, bookkeeper, config.cursor_backlogged_threshold
        )
        self._loop = asyncio.get_running_loop()
        self._current_entries = 0
        self._current_bytes = 0
        self._ledger_created_s = 0.0
        self._max_rollover_s = 0.0
        self.roll_due: float | None = None
        """When the pending timed rollover check is due (monotonic s; kept by ``_timers``)."""
        self._roll_timer_for_min = False
        self._trim_task: asyncio.Task[None] | None = None
        self._trim_again = False
        self._owns_timers = timers is None
        self._timers = LedgerTimers(config.retention_check_interval_s) if timers is None else timers
        """Rollover checks and, every ``retentionCheckIntervalInSeconds`` (from :meth:`open`), a trim."""
        self.entries_added = 0
        self.ledgers_trimmed = 0
        self.write_latency = StatsBuckets(WRITE_LATENCY_BUCKETS_MS)
        """add_entry → durable (ms) of the adds completed in the last stats interval (the topic
        refreshes it each ``statsUpdateFrequencyInSecs``): ``pulsar_storage_write_latency_le_*``."""
        self._latency_observer = write_latency
        self._creation_error: MiniPulsarError | None = None
        """Why the last ledger creation failed (named in the error open() raises)."""

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        """Load the ledger list, recover the previous last ledger, start a new one."""
        await self._load_info()
        empty = await self._recover_last_ledger()
        await self._create_ledger()
        if self.state is not State.LEDGER_OPENED:  # the reason goes to the client (its root cause)
            reason = f": {self._creation_error}" if self._creation_error is not None else ""
            raise ServiceNotReadyError(f"managed ledger {self.name}: cannot create a ledger{reason}")
        if empty is not None:  # out of the stored list now: its metadata can go
            try:
                await self._bk.delete_ledger(empty)
            except MiniPulsarError as error:
                log.warning("%s: deleting empty ledger %d failed: %s", self.name, empty, error)
        self._timers.attach(self)

    async def _load_info(self) -> None:
        current = await self._store.get(self.path)
        if current is not None:
            info = ManagedLedgerInfo.from_bytes(current.value)
            self._ledgers.replace(info.ledgers)
            self._properties = info.properties
            self._info_version = current.version

    async def _recover_last_ledger(self) -> int | None:
        """Fence and close the last ledger if the previous owner left it open; an empty one
        leaves the list (its id is returned, to delete once the list without it is stored)."""
        if not self._ledgers.infos or self._ledgers.infos[-1].entries is not None:
            return None
        last = self._ledgers.infos[-1]
        try:
            handle = await self._bk.open_ledger(last.ledger_id, recovery=True)
        except NoSuchLedgerError:  # created, then deleted as empty before the list was stored
            self._ledgers.remove({last.ledger_id})
            return None
        last.entries, last.size = handle.last_entry_id + 1, handle.length
        last.timestamp_ms = _now_ms()
        if last.entries == 0:
            self._ledgers.remove({last.ledger_id})
            return last.ledger_id
        self._reader.add_handle(handle)
        return None

    def _transition(self, to: State) -> None:
        assert to in _TRANSITIONS[self.state], f"managed ledger {self.name}: {self.state} -> {to}"
        self.state = to

    async def close(self) -> None:
        """Stop writing; close the durable cursors (their clean close stores each position in its
        key), or only flush them when fenced (another broker owns the topic); free the cache."""
        if self.state is State.CLOSED:
            return
        fenced = self.state is State.FENCED
        self._transition(State.CLOSED)
        self._cancel_roll_check()
        if self._trim_task is not None:
            self._trim_task.cancel()
        self._timers.detach(self)
        if self._owns_timers:
            await self._timers.close()
        self._fail_queued(ServiceNotReadyError(f"managed ledger {self.name} is closed"))
        durable = [cursor for cursor in self._cursors if cursor.durable]
        await asyncio.gather(*(c.flush() if fenced else c.close() for c in durable), return_exceptions=True)
        current = self._ledgers.current
        if current is not None:
            self._ledgers.close_current()
            try:
                await current.close()
            except MiniPulsarError as error:
                log.warning(
                    "%s: closing ledger %d failed (recovery will close it): %s", self.name, current.ledger_id, error
                )
        self._ledger_cache.clear()
        self._wake_waiters()

    def fence(self, error: MiniPulsarError) -> None:
        """Another broker owns the topic now (a compare-and-set lost, or this broker's metadata
        session expired with its ownership): queued adds fail with ``error``, and neither the
        managed ledger nor its cursors write the metadata store again — a write there would
        overwrite the next owner's keys. The cursors' ledgers still take appends until the next
        owner's recovery fences them (what it reads from them is then as new as possible)."""
        if self.state not in (State.FENCED, State.CLOSED):
            log.warning("%s: fenced (another broker owns the topic now?): %s", self.name, error)
            self._transition(State.FENCED)
        self._cancel_roll_check()
        self._fail_queued(error)
        for cursor in self._cursors:
            if cursor.durable:
                cursor.fence()

    # -- writing --------------------------------------------------------------------------------

    def add_entry(self, payload: bytes, num_messages: int = 1) -> asyncio.Future[Position]:
        """Append one entry; the future gives its position once durable (Qa bookies)."""
        future: asyncio.Future[Position] = self._loop.create_future()
        self.add_entry_then(payload, num_messages, partial(_settle, future))
        return future

    def add_entry_then(self, payload: bytes, num_messages: int, callback: AddEntryCallback) -> None:
        """:meth:`add_entry` for the hot path (no future): ``callback(position, None)`` once the
        entry is durable — synchronously, in entry order, from the bookie answer that completes
        it — or ``callback(None, error)`` on a later loop iteration once it failed."""
        op = OpAddEntry(payload, num_messages, callback)
        state = self.state
        if state is State.LEDGER_OPENED:
            self._initiate(op)
        elif state is State.CLOSING_LEDGER or state is State.CREATING_LEDGER:
            self._queue(op)
        elif state is State.CLOSED_LEDGER:
            self._queue(op)
            spawn(self._create_ledger(), name=f"{self.name}: create ledger", logger=log)
        else:
            op.callback = None
            self._loop.call_soon(callback, None, ServiceNotReadyError(f"managed ledger {self.name} is {state.value}"))

    def _queue(self, op: OpAddEntry) -> None:
        if self._queued is None:
            self._queued = deque()
        self._queued.append(op)

    def _initiate(self, op: OpAddEntry) -> None:
        handle = self._ledgers.current
        assert handle is not None and self.state is State.LEDGER_OPENED
        self._current_entries += 1
        self._current_bytes += len(op.payload)
        self._in_flight.append(op)
        handle.add_then(op.payload, partial(self._add_completed, op, handle))
        if self._current_ledger_is_full():
            op.close_when_done = True
            self._transition(State.CLOSING_LEDGER)
        elif self._roll_timer_for_min is False and self._space_full():
            self._roll_timer_for_min = True  # full but too young: roll as soon as the minimum age passes
            self._schedule_roll_check()

    def _add_completed(
        self, op: OpAddEntry, handle: LedgerHandle, entry_id: int | None, error: MiniPulsarError | None
    ) -> None:
        """The ledger handle's answer to ``op``: synchronously, in entry order, on success."""
        in_flight = self._in_flight
        if in_flight and in_flight[0] is op:
            in_flight.popleft()
        elif op in in_flight:
            in_flight.remove(op)
        if error is not None or entry_id is None:
            self._add_failed(op, handle, error or PersistenceError("add failed without an error"))
            return
        position = Position(handle.ledger_id, entry_id)
        self.entries_added += 1
        latency_ms = (time.monotonic() - op.started_s) * 1000
        self.write_latency.add_value(latency_ms)
        if self._latency_observer is not None:
            self._latency_observer.observe(latency_ms)
        if self._should_cache():
            self._ledger_cache.insert(Entry(position, op.payload, op.num_messages))
        callback = op.callback
        if callback is not None:
            op.callback = None
            callback(position, None)
        self._wake_waiters()
        if op.close_when_done and handle is self._ledgers.current:
            self._start_closing(handle)

    def _add_failed(self, op: OpAddEntry, handle: LedgerHandle, error: BaseException) -> None:
        """Like Pulsar: the ledger is closed at its last-add-confirmed and the adds that failed
        on it are issued again, first and in order, on the next ledger (the closed ledger ends
        before them, so nobody reads them twice).

        A fenced ledger is handled the same way: AutoRecovery fences an open ledger whose last
        fragment lost a bookie, and the topic rolls on. If another broker fenced it because it
        took the topic over, the new ledger list cannot be stored (the new owner changed its
        version): the managed ledger is then fenced (:meth:`_creation_failed`)."""
        op.attempts += 1
        if op.attempts >= MAX_ADD_ATTEMPTS or self.state in (State.CLOSED, State.FENCED) or handle is self._abandoned:
            self._fail_op(op, error)
            # Everything behind it fails with it (the module docstring says why).
            self._abandoned = handle
            self._fail_queued(error if isinstance(error, MiniPulsarError) else PersistenceError(str(error)))
        else:
            if self._retry is None:
                self._retry = deque()
            self._retry.append(op)
        if handle is self._ledgers.current:
            log.warning("%s: add to ledger %d failed, closing it: %s", self.name, handle.ledger_id, error)
            self._start_closing(handle)
        elif self.state is State.LEDGER_OPENED:  # the next ledger is already open: never strand an add
            self._issue_waiting()

    def _issue_waiting(self) -> None:
        """Issue the retried adds, then the queued ones, until the ledger fills up."""
        for waiting in (self._retry, self._queued):
            while waiting and self.state is State.LEDGER_OPENED:
                self._initiate(waiting.popleft())

    def _fail_op(self, op: OpAddEntry, error: BaseException) -> None:
        """Tell ``op`` it failed, on a later loop iteration (as a failed future would): the
        failure never runs the caller's code inside the ledger's own state changes."""
        callback = op.callback
        if callback is not None:
            op.callback = None
            self._loop.call_soon(callback, None, error)

    def _fail_queued(self, error: MiniPulsarError) -> None:
        for waiting in (self._retry, self._queued):
            if not waiting:
                continue
            ops = list(waiting)
            waiting.clear()
            for op in ops:
                self._fail_op(op, error)

    # -- rollover -------------------------------------------------------------------------------

    def _current_ledger_is_full(self) -> bool:
        age_s = time.monotonic() - self._ledger_created_s
        return current_ledger_is_full(
            self.config, self._current_entries, self._current_bytes, age_s, self._max_rollover_s
        )

    def _space_full(self) -> bool:
        config = self.config
        return (
            self._current_entries >= config.max_entries_per_ledger
            or self._current_bytes >= config.max_size_per_ledger_bytes
        )

    def _schedule_roll_check(self) -> None:
        """The timed half of the rollover check: when the ledger reaches its maximum age — or,
        when it is full but younger than the minimum rollover time, when it reaches that."""
        self._cancel_roll_check()
        if self._space_full():
            due_s = self.config.min_rollover_s
        elif self._max_rollover_s > 0:
            due_s = max(self._max_rollover_s, self.config.min_rollover_s)
        else:
            return
        self._timers.roll_check_at(self, self._ledger_created_s + due_s)

    def _cancel_roll_check(self) -> None:
        self._timers.cancel_roll_check(self)

    def roll_check_due(self) -> None:
        """The timed rollover check (called by the timers when it is due)."""
        handle = self._ledgers.current
        if self.state is not State.LEDGER_OPENED or handle is None or self._current_entries == 0:
            return  # an idle empty ledger is not rolled: the next add checks its age
        if not self._current_ledger_is_full():
            self._schedule_roll_check()
            return
        self._transition(State.CLOSING_LEDGER)
        if self._in_flight:
            self._in_flight[-1].close_when_done = True
        else:
            self._start_closing(handle)

    def _start_closing(self, handle: LedgerHandle) -> None:
        """Leave ``handle`` (full, or failed): it stops being current now, closes in the background."""
        if self.state is State.LEDGER_OPENED:
            self._transition(State.CLOSING_LEDGER)
        elif self.state is not State.CLOSING_LEDGER:
            return
        self._ledgers.close_current()
        diagnostics.record("ledger_rollover", ledger_id=handle.ledger_id, topic=self.name)
        self._reader.add_handle(handle)
        self._cancel_roll_check()
        spawn(self._finish_closing(handle), name=f"{self.name}: close ledger {handle.ledger_id}", logger=log)

    async def _finish_closing(self, handle: LedgerHandle) -> None:
        try:
            await handle.close()
        except MiniPulsarError as error:  # the ledger stays OPEN in its metadata; recovery closes it
            log.warning("%s: closing ledger %d failed: %s", self.name, handle.ledger_id, error)
        info = self._ledgers.get(handle.ledger_id)
        if info is not None:
            info.timestamp_ms = _now_ms()
        metrics.LEDGERS_ROLLED.inc()
        log.info("%s: closed ledger %d (%s entries)", self.name, handle.ledger_id, info and info.entries)
        if self.state is not State.CLOSING_LEDGER:
            return
        self._transition(State.CLOSED_LEDGER)
        if self._queued or self._retry:
            await self._create_ledger()
        else:
            try:
                await self._store_info()
            except MiniPulsarError as error:
                self._info_write_failed(error)
        self.trim_soon()

    async def _create_ledger(self) -> None:
        """Start a new ledger and issue the queued adds on it."""
        state = self.state  # a local: the awaits below may change self.state again
        if state not in (State.NONE, State.CLOSED_LEDGER):
            return
        self._transition(State.CREATING_LEDGER)
        config = self.config
        try:
            last_id = self._ledgers.infos[-1].ledger_id if self._ledgers.infos else -1
            handle = await self._bk.create_ledger(
                config.ensemble_size,
                config.write_quorum,
                config.ack_quorum,
                custom={"pulsar/managed-ledger": self.name},
                id_above=last_id,
            )
        except MiniPulsarError as error:
            self._creation_failed(error)
            return
        infos = self._ledgers.infos
        if infos and handle.ledger_id <= infos[-1].ledger_id:  # positions order by ledger id
            spawn(self._discard(handle), name=f"{self.name}: discard ledger {handle.ledger_id}", logger=log)
            self._creation_failed(
                ServiceNotReadyError(
                    f"managed ledger {self.name}: new ledger id {handle.ledger_id} is not above {infos[-1].ledger_id}"
                )
            )
            return
        self._ledgers.append(LedgerInfo(handle.ledger_id))
        try:
            await self._store_info()
        except MiniPulsarError as error:
            self._ledgers.remove({handle.ledger_id})
            spawn(self._discard(handle), name=f"{self.name}: discard ledger {handle.ledger_id}", logger=log)
            self._creation_failed(error)
            return
        if self.state is not State.CREATING_LEDGER:  # closed meanwhile; recovery drops the empty ledger
            try:
                await handle.close()
            except MiniPulsarError as error:
                log.warning("%s: closing unused ledger %d failed: %s", self.name, handle.ledger_id, error)
            return
        self._ledgers.current = handle
        self._current_entries = self._current_bytes = 0
        self._roll_timer_for_min = False
        self._ledger_created_s = time.monotonic()
        self._max_rollover_s = config.max_rollover_s * (1 + random.uniform(0, 0.05))  # Pulsar's jitter
        self._transition(State.LEDGER_OPENED)
        self._schedule_roll_check()
        log.info("%s: writing to ledger %d", self.name, handle.ledger_id)
        self._issue_waiting()

    def _creation_failed(self, error: MiniPulsarError) -> None:
        log.warning("%s: cannot create a ledger: %s", self.name, error)
        self._creation_error = error
        if isinstance(error, BadVersionError):
            self.fence(error)
            return
        if self.state is State.CREATING_LEDGER:
            self._transition(State.CLOSED_LEDGER)
        self._fail_queued(error)

    async def _discard(self, handle: LedgerHandle) -> None:
        try:
            await handle.close()
            await self._bk.delete_ledger(handle.ledger_id)
        except MiniPulsarError as error:
            log.warning("%s: cannot discard unused ledger %d: %s", self.name, handle.ledger_id, error)

    async def _store_info(self) -> None:
        """Write the current ledger list (compare-and-set); writes are serialised, each carries
        every change made before it started."""
        async with self._info_lock:
            info = ManagedLedgerInfo(self._ledgers.infos, self._properties)
            stat = await put_resolving(self._store, self.path, info.to_bytes(), self._info_version)
            self._info_version = stat.version

    def _info_write_failed(self, error: MiniPulsarError) -> None:
        if isinstance(error, BadVersionError):
            self.fence(error)
        else:
            log.warning("%s: writing the ledger list failed: %s", self.name, error)

    # -- trimming -------------------------------------------------------------------------------

    def may_trim(self) -> bool:
        """A ledger besides the last one exists (the last is never trimmed): a trim may find work."""
        return len(self._ledgers.infos) > 1 and self.state not in (State.CLOSED, State.FENCED)

    def trim_soon(self) -> None:
        """Trim in the background; calls while a trim runs coalesce into one more round."""
        if self.state in (State.CLOSED, State.FENCED):
            return
        if self._trim_task is not None and not self._trim_task.done():
            self._trim_again = True
            return
        self._trim_task = spawn(self._trim_rounds(), name=f"{self.name}: trim", logger=log)

    async def _trim_rounds(self) -> None:
        self._trim_again = True
        while self._trim_again and self.state not in (State.CLOSED, State.FENCED):
            self._trim_again = False
            try:
                await self.trim_consumed_ledgers()
            except MiniPulsarError as error:
                log.warning("%s: trimming failed: %s", self.name, error)

    async def trim_consumed_ledgers(self) -> list[int]:
        """Delete the consumed ledgers outside retention (retention.py); returns their ids."""
        unopened = await self._unopened_cursor_positions()
        async with self._info_lock:  # the slowest position and the list must not move under us
            if self.state in (State.CLOSED, State.FENCED):
                return []
            durable = [cursor.mark_delete for cursor in self._cursors if cursor.durable] + unopened
            doomed = ledgers_to_trim(
                self.config,
                self._ledgers.infos,
                min(durable) if durable else None,
                self._ledgers.total_size_bytes(),
                _now_ms(),
            )
            if not doomed:
                return []
            doomed_ids = {info.ledger_id for info in doomed}
            kept = [info for info in self._ledgers.infos if info.ledger_id not in doomed_ids]
            try:
                stored = ManagedLedgerInfo(kept, self._properties).to_bytes()
                self._info_version = (await put_resolving(self._store, self.path, stored, self._info_version)).version
            except MiniPulsarError as error:
                self._info_write_failed(error)
                return []
            # Only now, durable, do readers stop seeing them (a ledger appended meanwhile is kept).
            deleted = [info.ledger_id for info in self._ledgers.remove(doomed_ids)]
        first = self._ledgers.first_position
        for cursor in self._cursors:  # before any await: nobody sees a cursor in a trimmed ledger
            if not cursor.durable:
                cursor.skip_trimmed(first)
        for ledger_id in deleted:
            self._reader.forget(ledger_id)
            try:
                await self._bk.delete_ledger(ledger_id)
            except MiniPulsarError as error:  # out of the list already: an orphan for an operator, not a retry
                log.warning("%s: deleting trimmed ledger %d failed: %s", self.name, ledger_id, error)
        self._ledger_cache.invalidate_before(Position(first.ledger_id, 0))
        self.ledgers_trimmed += len(deleted)
        metrics.LEDGERS_TRIMMED.inc(len(deleted))
        log.info("%s: trimmed ledgers %s", self.name, deleted)
        return deleted

    async def _unopened_cursor_positions(self) -> list[Position]:
        """Mark-delete positions of durable cursors stored but not opened (yet): a topic's
        subscriptions are opened after its managed ledger, and must not lose data meanwhile."""
        opened = {cursor.name for cursor in self._cursors if cursor.durable}
        positions = []
        for name in await self._store.children(self.path):
            if name in opened:
                continue
            stored = await self._store.get(f"{self.path}/{name}")
            if stored is not None:
                positions.append(decode_mark_delete(stored.value))
        return positions

    # -- cursors --------------------------------------------------------------------------------

    @property
    def bookkeeper(self) -> LedgerClient:
        """The BookKeeper client the cursors create their cursor ledgers with."""
        return self._bk

    @property
    def cursors(self) -> list[LedgerCursor]:
        """Live cursors, durable and not."""
        return list(self._cursors)

    def add_cursor(self, cursor: LedgerCursor) -> None:
        self._cursors.append(cursor)

    def remove_cursor(self, cursor: LedgerCursor) -> None:
        if cursor in self._cursors:
            self._cursors.remove(cursor)

    def mark_delete_moved(self, previous: Position, current: Position) -> None:
        """A durable cursor's mark-delete moved: trim when it left a ledger."""
        info = self._ledgers.get(current.ledger_id)
        finished = info is not None and info.entries is not None and current.entry_id >= info.entries - 1
        if previous.ledger_id != current.ledger_id or finished:
            self.trim_soon()

    def is_caching_reader(self, cursor: LedgerCursor) -> bool:
        """Active, and within ``managedLedgerCursorBackloggedThreshold`` entries of the tail (a
        non-durable cursor never, with ``minipulsarNonDurableCursorsInactive``: Pulsar before PR 6769)."""
        config = self.config
        if not cursor.active or (config.non_durable_cursors_inactive and not cursor.durable):
            return False
        threshold = config.cursor_backlogged_threshold
        return self._ledgers.entries_from(cursor.read_position, threshold) < threshold

    def _should_cache(self) -> bool:
        cursors = self._cursors
        return bool(cursors) and self.cache.max_bytes > 0 and any(self.is_caching_reader(c) for c in cursors)

    def _cache_eviction_position(self) -> Position | None:
        readers = [cursor for cursor in self._cursors if self.is_caching_reader(cursor)]
        if not readers:
            return None
        if self.config.cache_evict_by_mark_delete:
            slowest = min(cursor.mark_delete for cursor in readers)
            return Position(slowest.ledger_id, slowest.entry_id + 1)
        return min(cursor.read_position for cursor in readers)

    # -- positions ------------------------------------------------------------------------------

    @property
    def ledgers(self) -> list[LedgerInfo]:
        return self._ledgers.infos

    @property
    def last_confirmed(self) -> Position:
        """The last durable entry, or ``(first ledger, -1)`` when there is none."""
        return self._ledgers.last_confirmed

    @property
    def first_position(self) -> Position:
        return self._ledgers.first_position

    @property
    def total_size_bytes(self) -> int:
        return self._ledgers.total_size_bytes()

    def normalize(self, position: Position) -> Position:
        return self._ledgers.normalize(position)

    def next_position(self, position: Position) -> Position:
        return self._ledgers.next_position(position)

    def contains(self, position: Position) -> bool:
        return self._ledgers.contains(position)

    def count_entries(self, after: Position, up_to: Position) -> int:
        """Entries in ``(after, up_to]``."""
        return self._ledgers.count_entries(after, up_to)

    # -- reading --------------------------------------------------------------------------------

    async def read_entries(
        self, start: Position, max_entries: int, max_bytes: int | None = None, cursor: CursorReadCounters | None = None
    ) -> list[Entry]:
        """Up to ``max_entries`` consecutive entries from ``start`` within one ledger, and at most
        ``max_bytes`` (but always one entry when there is one); see entry_reader.py."""
        return await self._reader.read(start, max_entries, max_bytes, cursor)

    async def find_position_by_publish_time(self, publish_time_ms: int) -> Position:
        """The first entry published at or after ``publish_time_ms`` (past the tail when none)."""
        return await self._reader.find_by_publish_time(publish_time_ms)

    @property
    def cache_hits_tailing(self) -> int:
        return self._reader.counters.hits_tailing

    @property
    def cache_hits_catch_up(self) -> int:
        return self._reader.counters.hits_catch_up

    @property
    def cache_misses_tailing(self) -> int:
        return self._reader.counters.misses_tailing

    @property
    def cache_misses_catch_up(self) -> int:
        return self._reader.counters.misses_catch_up

    @property
    def cache_hits(self) -> int:
        return self._reader.counters.hits

    @property
    def cache_misses(self) -> int:
        return self._reader.counters.misses

    @property
    def cached_entries(self) -> int:
        return len(self._ledger_cache)

    def wait_for_entries(self) -> asyncio.Future[None]:
        """Resolves on the next completed add (or close)."""
        future = self._loop.create_future()
        self._entry_waiters.append(future)
        return future

    def _wake_waiters(self) -> None:
        if not self._entry_waiters:  # once per add: most have nobody waiting
            return
        waiters, self._entry_waiters = self._entry_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def _now_ms() -> int:
    return int(time.time() * 1000)


__all__ = ["ManagedLedger", "ManagedLedgerConfig", "OpAddEntry", "State"]


def _settle(future: asyncio.Future[Position], position: Position | None, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None or position is None:
        future.set_exception(error or PersistenceError("add failed without an error"))
    else:
        future.set_result(position)
