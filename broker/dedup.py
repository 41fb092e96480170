"""Message deduplication by producer sequence ids (Pulsar's ``MessageDeduplication``).

Per topic and producer name the broker keeps two marks:

- ``pushed``: the highest sequence id accepted (sent to the managed ledger, maybe not durable);
- ``persisted``: the highest sequence id whose entry is durable.

A SEND covering ``sequence_id..highest_sequence_id`` (a batch; ``highest`` = -1 for one
message) is judged by its first id, as Pulsar does:

- ``seq > pushed``: new — written, and ``pushed`` moves to the batch's highest id;
- ``seq <= persisted``: a duplicate of a stored message — answered at once without a write,
  with the position ``(-1, -1)`` (:data:`DUPLICATE`);
- ``persisted < seq <= pushed``: the original is still in flight — where Pulsar answers an
  error for the client to retry, we wait for the original's add and answer with its result
  (the same position, or its error), so the client needs no retry.

A failed add resets ``pushed`` to ``persisted`` for its producer, so a resend is accepted.

The marks survive a restart as Pulsar keeps them (``MessageDeduplication.takeSnapshot``): every
``brokerDeduplicationEntriesInterval`` persisted entries, every
``brokerDeduplicationSnapshotIntervalSeconds`` when an entry was persisted since the last
snapshot (the broker's timer), and when the topic closes, the
durable cursor ``pulsar.dedup`` is mark-deleted at the position ``persisted`` is valid at, with
``persisted`` as the mark-delete's properties (producer name → sequence id) — one entry of its
cursor ledger on the bookies, no metadata write. On load the cursor's position and properties
are read back and the entries after it replayed (each entry names its producer and its
messages' sequence ids). A topic seen for the first time gets the cursor at its current end,
so a crash before the first interval still replays everything written under deduplication.
A snapshot of an older broker at ``/deduplication/{tenant}/{ns}/{domain}/{topic}`` is read
instead while it exists, and deleted once the cursor holds its state.

The cursor is no subscription (absent from the topic's subscriptions and their stats, the name
refused to SUBSCRIBE; internal stats list it among the cursors, as Pulsar's do). Its
mark-delete holds back trimming of at most the ledger holding the last snapshot's position —
never more than ``brokerDeduplicationEntriesInterval`` entries nor
``brokerDeduplicationSnapshotIntervalSeconds`` behind the persisted tail, and the tail itself
once the topic closed. With deduplication disabled the broker deletes the cursor (and its
ledger) when it loads the topic, so it holds nothing.

``brokerDeduplicationMaxNumberOfProducers`` bounds the maps: past it, the producer name
used least recently is forgotten (Pulsar forgets inactive producers after a timeout).

Invariants:

- ``persisted[p] <= pushed[p]`` for every producer ``p``;
- a message is written at most once while its original is stored or in flight (unless its
  producer was forgotten past ``brokerDeduplicationMaxNumberOfProducers``), and answered as a
  stored duplicate only when an earlier write of it is durable;
- at most one snapshot write is in flight;
- the ``pulsar.dedup`` cursor exists only while deduplication is enabled on the topic.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict, deque
from functools import partial

from minipulsar.broker.managed_ledger.cursor import ManagedCursor
from minipulsar.broker.managed_ledger.ledger import ManagedLedger
from minipulsar.broker.managed_ledger.position import Entry, Position
from minipulsar.entry_format import decode_batch, is_intermediate_chunk
from minipulsar.errors import MiniPulsarError, NotFoundError, ServiceNotReadyError
from minipulsar.metadata.store import MetadataStore
from minipulsar.supervision import spawn

log = logging.getLogger(__name__)

ROOT = "/deduplication"
"""Where an older broker kept the snapshot (read once, then deleted)."""
DEDUP_CURSOR = "pulsar.dedup"
"""Pulsar's ``MessageDeduplication.DEDUPLICATION_CURSOR_NAME``: the cursor holding the snapshot."""
DUPLICATE = Position(-1, -1)
"""The receipt position of a message that was already stored (as Pulsar: ledger/entry -1)."""
REPLAY_BATCH_ENTRIES = 100


def snapshot_path(persistence_path: str) -> str:
    return f"{ROOT}/{persistence_path}"


class _InFlight:
    __slots__ = ("added", "first", "highest")

    def __init__(self, first: int, highest: int, added: asyncio.Future[Position]) -> None:
        self.first, self.highest, self.added = first, highest, added


class MessageDeduplication:
    def __init__(self, persistence_path: str, store: MetadataStore, entries_interval: int, max_producers: int) -> None:
        self.path = snapshot_path(persistence_path)
        self._store = store
        self._entries_interval = entries_interval
        self._max_producers = max_producers
        self.pushed: OrderedDict[str, int] = OrderedDict()
        self.persisted: dict[str, int] = {}
        self._in_flight: dict[str, deque[_InFlight]] = {}
        self._last_persisted = Position(-1, -1)
        self._entries_since_snapshot = 0
        self._snapshotting = False
        self._cursor: ManagedCursor | None = None

    # -- recovery -------------------------------------------------------------------------------

    async def recover(self, ledger: ManagedLedger) -> None:
        """Load the snapshot and replay the entries written after it (see the module docstring)."""
        cursor = self._cursor = await ManagedCursor.open(ledger, DEDUP_CURSOR, self._store, start_at_earliest=False)
        legacy = await self._store.get(self.path)
        if legacy is not None:
            raw = json.loads(legacy.value)
            self._last_persisted = Position(raw["ledgerId"], raw["entryId"])
            producers = raw.get("producers", {})
        else:
            self._last_persisted, producers = cursor.mark_delete, cursor.properties
        for name, sequence_id in producers.items():
            self._set_persisted(name, sequence_id)
        replayed = await self._replay(ledger, self._last_persisted)
        log.info(
            "%s: deduplication state of %d producers recovered (%d entries replayed)",
            cursor.path,
            len(self.persisted),
            replayed,
        )
        if legacy is not None:  # the cursor holds it from now on (a failure fails the load: retried)
            self._entries_since_snapshot = 0
            await cursor.mark_delete_with_properties(self._last_persisted, dict(self.persisted))
            try:
                await self._store.delete(self.path, legacy.version)
            except NotFoundError:
                pass

    @staticmethod
    async def forget(ledger: ManagedLedger, store: MetadataStore) -> None:
        """Deduplication is disabled: a ``pulsar.dedup`` cursor left from when it was enabled
        goes (with its cursor ledger), so it holds nothing back from trimming."""
        if not await store.exists(f"{ledger.path}/{DEDUP_CURSOR}"):
            return
        cursor = await ManagedCursor.open(ledger, DEDUP_CURSOR, store, start_at_earliest=False)
        try:
            await cursor.delete()
        except NotFoundError:
            pass

    async def _replay(self, ledger: ManagedLedger, after: Position) -> int:
        position, last, replayed = ledger.next_position(after), ledger.last_confirmed, 0
        while position <= last:
            entries = await ledger.read_entries(position, REPLAY_BATCH_ENTRIES)
            if not entries:
                break
            for entry in entries:
                self._replay_entry(entry)
            replayed += len(entries)
            position = ledger.next_position(entries[-1].position)
        return replayed

    def _replay_entry(self, entry: Entry) -> None:
        self._last_persisted = entry.position
        if is_intermediate_chunk(entry.payload):  # its message is stored only with its last chunk
            return
        try:
            batch = decode_batch(entry.payload)
        except MiniPulsarError:  # not written by a producer of ours: nothing to learn from it
            return
        if batch.messages and batch.producer_name:
            self._set_persisted(batch.producer_name, max(m.sequence_id for m in batch.messages))

    def _set_persisted(self, name: str, sequence_id: int) -> None:
        if sequence_id > self.persisted.get(name, -1):
            self.persisted[name] = sequence_id
        if sequence_id > self.pushed.get(name, -1):
            self.pushed[name] = sequence_id
        self._touch(name)

    # -- publishing -----------------------------------------------------------------------------

    def last_sequence_id(self, producer_name: str) -> int:
        """What PRODUCER_SUCCESS tells a producer reusing ``producer_name`` (-1: unknown)."""
        return self.pushed.get(producer_name, -1)

    def check(self, producer_name: str, sequence_id: int, highest_sequence_id: int) -> asyncio.Future[Position] | None:
        """None: a new message, to be written (then call :meth:`track`); else the answer to a
        duplicate: resolved at once for a stored one, after the original's add for an in-flight one."""
        pushed = self.pushed.get(producer_name, -1)
        if sequence_id > pushed:
            return None
        loop = asyncio.get_running_loop()
        if sequence_id <= self.persisted.get(producer_name, -1):
            answer = loop.create_future()
            answer.set_result(DUPLICATE)
            return answer
        original = next(
            (op for op in self._in_flight.get(producer_name, ()) if op.first <= sequence_id <= op.highest), None
        )
        answer = loop.create_future()
        if original is None:  # pushed by an add that failed and was not reset yet
            answer.set_exception(
                ServiceNotReadyError(f"message {sequence_id} of {producer_name} is still in flight; retry")
            )
        else:
            original.added.add_done_callback(partial(_copy_outcome, answer))
        return answer

    def track(
        self, producer_name: str, sequence_id: int, highest_sequence_id: int, added: asyncio.Future[Position]
    ) -> None:
        """Record an accepted message; ``added`` is its managed-ledger add."""
        highest = max(sequence_id, highest_sequence_id)
        self.pushed[producer_name] = highest
        self._touch(producer_name)
        queue = self._in_flight.setdefault(producer_name, deque())
        op = _InFlight(sequence_id, highest, added)
        queue.append(op)
        added.add_done_callback(partial(self._added, producer_name, op))

    def _added(self, producer_name: str, op: _InFlight, added: asyncio.Future[Position]) -> None:
        queue = self._in_flight.get(producer_name)
        if queue is not None:
            try:
                queue.remove(op)
            except ValueError:
                pass
            if not queue:
                del self._in_flight[producer_name]
        if added.cancelled() or added.exception() is not None:
            # Pulsar's resetHighestSequenceIdPushed: let the client's resend through.
            if producer_name in self.pushed:
                self.pushed[producer_name] = self.persisted.get(producer_name, -1)
            return
        if op.highest > self.persisted.get(producer_name, -1):
            self.persisted[producer_name] = op.highest
        position = added.result()
        if position > self._last_persisted:
            self._last_persisted = position
        self._entries_since_snapshot += 1
        if self._entries_since_snapshot >= self._entries_interval and not self._snapshotting:
            spawn(self.take_snapshot(), name=f"{self.path}: snapshot", logger=log)

    def _touch(self, name: str) -> None:
        self.pushed.move_to_end(name)
        while len(self.pushed) > self._max_producers:
            forgotten, _ = self.pushed.popitem(last=False)
            self.persisted.pop(forgotten, None)

    # -- snapshots ------------------------------------------------------------------------------

    async def snapshot_if_changed(self) -> None:
        """The timed snapshot (``brokerDeduplicationSnapshotIntervalSeconds``): only when an
        entry was persisted since the last one."""
        if self._entries_since_snapshot > 0:
            await self.take_snapshot()

    async def take_snapshot(self) -> None:
        """Mark-delete the ``pulsar.dedup`` cursor at the position ``persisted`` holds for, with
        ``persisted`` as its properties; at most one write at a time."""
        if self._snapshotting or self._cursor is None:
            return
        self._snapshotting = True
        try:
            self._entries_since_snapshot = 0
            await self._cursor.mark_delete_with_properties(self._last_persisted, dict(self.persisted))
        except MiniPulsarError as error:  # the next interval tries again; replay covers the gap
            log.warning("%s: deduplication snapshot failed: %s", self.path, error)
        finally:
            self._snapshotting = False


def _copy_outcome(answer: asyncio.Future[Position], original: asyncio.Future[Position]) -> None:
    if answer.done():
        return
    if original.cancelled():
        answer.set_exception(ServiceNotReadyError("the original message's write was cancelled"))
    elif (error := original.exception()) is not None:
        answer.set_exception(error)
    else:
        answer.set_result(original.result())
