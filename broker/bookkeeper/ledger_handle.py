"""A ledger open for writing or reading.

Writes (first cut, no ensemble change yet): entry ``e`` goes to its write set; it completes
when ``Qa`` bookies acknowledged it *and* every earlier entry completed, so completions and
the last-add-confirmed (LAC) advance strictly in order. The writer's LAC rides on every add.
A failed bookie write fails the handle: every pending add fails with the error, and the
managed ledger moves on to a new ledger. (Ensemble changes come with the BookKeeper-client issue.)

Reads go to the replicas of each entry in turn, the next one after an error.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import deque
from dataclasses import replace
from functools import partial

from minipulsar.errors import MiniPulsarError, NoSuchEntryError, PersistenceError
from minipulsar.metadata.store import MetadataStore
from minipulsar.protocol.commands import ReadEntryResponse

from broker.bookkeeper.bookie_client import BookieClient
from broker.bookkeeper.ledger_metadata import LedgerMetadata, ledger_path

log = logging.getLogger(__name__)


class HandleState(enum.Enum):
    OPEN = "open"
    FAILED = "failed"
    CLOSED = "closed"


class PendingAdd:
    """One add in flight; completes once ``Qa`` bookies acknowledged it."""

    __slots__ = ("entry_id", "payload", "future", "acks", "quorum_reached")

    def __init__(self, entry_id: int, payload: bytes, future: asyncio.Future[int]) -> None:
        self.entry_id = entry_id
        self.payload = payload
        self.future = future
        self.acks = 0
        self.quorum_reached = False


class LedgerHandle:
    """Handle on one ledger. Writable only when created by this client and not yet closed."""

    def __init__(self, metadata: LedgerMetadata, bookies: BookieClient, store: MetadataStore,
                 *, writable: bool) -> None:
        self.metadata = metadata
        self._bookies = bookies
        self._store = store
        self.writable = writable
        self.state = HandleState.OPEN if writable else HandleState.CLOSED
        self.last_add_confirmed = metadata.last_entry_id
        self.length = metadata.length
        self._next_entry_id = metadata.last_entry_id + 1
        self._pending: deque[PendingAdd] = deque()
        self._loop = asyncio.get_running_loop()
        self.failure: MiniPulsarError | None = None

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id

    @property
    def last_entry_id(self) -> int:
        """The last readable entry: LAC while open, the final entry once closed."""
        return self.last_add_confirmed

    # -- writing --------------------------------------------------------------------------------

    def add(self, payload: bytes) -> asyncio.Future[int]:
        """Append ``payload``; the future yields its entry id once durable on ``Qa`` bookies."""
        future: asyncio.Future[int] = self._loop.create_future()
        if self.state is not HandleState.OPEN:
            future.set_exception(self.failure or PersistenceError(f"ledger {self.ledger_id} is {self.state.value}"))
            return future
        op = PendingAdd(self._next_entry_id, payload, future)
        self._next_entry_id += 1
        self._pending.append(op)
        for bookie in self.metadata.write_set(op.entry_id):
            request = self._bookies.add_entry(bookie, self.ledger_id, op.entry_id, self.last_add_confirmed, payload)
            request.add_done_callback(partial(self._add_completed, op, bookie))
        return future

    def _add_completed(self, op: PendingAdd, bookie: str, request: asyncio.Future) -> None:
        if request.cancelled():
            return
        error = request.exception()
        if error is not None:
            self._fail(PersistenceError(f"add of entry {op.entry_id} of ledger {self.ledger_id} "
                                        f"to bookie {bookie} failed: {error}"))
            return
        op.acks += 1
        if not op.quorum_reached and op.acks >= self.metadata.ack_quorum:
            op.quorum_reached = True
            self._complete_in_order()

    def _complete_in_order(self) -> None:
        pending = self._pending
        while pending and pending[0].quorum_reached:
            op = pending.popleft()
            assert op.entry_id == self.last_add_confirmed + 1, "adds complete in entry order"
            self.last_add_confirmed = op.entry_id
            self.length += len(op.payload)
            if not op.future.done():
                op.future.set_result(op.entry_id)

    def _fail(self, error: MiniPulsarError) -> None:
        if self.state is not HandleState.OPEN:
            return
        log.warning("ledger %d: %s; failing %d pending adds", self.ledger_id, error, len(self._pending))
        self.state = HandleState.FAILED
        self.failure = error
        pending, self._pending = self._pending, deque()
        for op in pending:
            if not op.future.done():
                op.future.set_exception(error)

    @property
    def pending_adds(self) -> int:
        return len(self._pending)

    async def close(self) -> None:
        """Write the final last entry id (the LAC) into the ledger metadata."""
        if not self.writable or self.metadata.is_closed:
            return
        if self.state is HandleState.OPEN:
            self.state = HandleState.CLOSED
        closed = self.metadata.closed(self.last_add_confirmed, self.length)
        stat = await self._store.put(ledger_path(self.ledger_id), closed.to_bytes(), self.metadata.version)
        self.metadata = replace(closed, version=stat.version)
        for op in self._pending:  # adds still without quorum never became part of the ledger
            if not op.future.done():
                op.future.set_exception(PersistenceError(f"ledger {self.ledger_id} closed"))
        self._pending.clear()

    # -- reading --------------------------------------------------------------------------------

    async def read(self, first_entry_id: int, last_entry_id: int) -> list[tuple[int, bytes]]:
        """Entries ``first..last`` inclusive, all of them, in order.

        Raises:
            NoSuchEntryError: asked beyond the last readable entry.
            PersistenceError: no replica could serve an entry.
        """
        if first_entry_id > last_entry_id:
            return []
        if last_entry_id > self.last_entry_id:
            raise NoSuchEntryError(f"ledger {self.ledger_id} has entries up to {self.last_entry_id}, "
                                   f"asked for {last_entry_id}")
        entries: list[tuple[int, bytes]] = []
        next_id = first_entry_id
        while next_id <= last_entry_id:
            batch = await self._read_from_replicas(next_id, last_entry_id - next_id + 1)
            entries.extend(batch)
            next_id = batch[-1][0] + 1
        return entries

    async def _read_from_replicas(self, first_entry_id: int, count: int) -> list[tuple[int, bytes]]:
        """One READ_ENTRY to the first replica that answers; with striping (E > Qw) one entry at a time."""
        if self.metadata.ensemble_size != self.metadata.write_quorum:
            count = 1
        errors = []
        for bookie in self.metadata.write_set(first_entry_id):
            try:
                response: ReadEntryResponse = await self._bookies.read_entries(
                    bookie, self.ledger_id, first_entry_id, count)
            except MiniPulsarError as error:
                errors.append(f"{bookie}: {error}")
                continue
            entries = [(int(e), bytes(p)) for e, p in response.entries]
            if entries and entries[0][0] == first_entry_id:
                return entries
            errors.append(f"{bookie}: empty read")
        raise PersistenceError(f"cannot read entry {first_entry_id} of ledger {self.ledger_id}: "
                               + "; ".join(errors))
