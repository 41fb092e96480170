"""Dispatchers: move entries from a subscription's cursor to its consumers within their permits.

One read loop per subscription (never a task per message), as Pulsar's ``readMoreEntries``.
It runs while some consumer can take messages: each turn it reads up to
``entries_to_read`` entries — at most ``dispatcherMaxReadBatchSize`` entries and about
``dispatcherMaxReadSizeBytes`` bytes — hands them out, and when the cursor is caught up it
waits for the managed ledger's next add. Anything that may give it work (FLOW, an ack that
unblocks a consumer, a redelivery, a consumer joining) calls :meth:`Dispatcher.read_more`.

How many entries one read asks for, from the permits (which count messages):

- ``preciseDispatcherFlowControl=false`` (Pulsar's default): ``min(permits, batch)`` entries.
  Permits are compared with *entries*, so a consumer with 100 permits on a topic whose
  producer batches 100 messages per entry may be sent 100 entries = 10 000 messages.
- ``preciseDispatcherFlowControl=true``: ``min(ceil(permits / avg), batch)`` entries, where
  ``avg`` is the EMA of messages per entry sent to that consumer (else the subscription's);
  before any sample exists one entry is read to learn it (Pulsar ≤ 2.x started the EMA at
  1000, which does the same). A consumer then holds at most about one entry beyond its permits.

Reset of dispatch state (rewind, seek, Failover switch) bumps ``_epoch``: a read that was in
flight meanwhile is dropped when it lands (Pulsar cancels the pending read instead); the
cursor itself ignores a read that a rewind or seek overtook, so its read position stays put.

Invariants:

- at most one read loop per subscription; it runs only while some consumer can take messages;
- a read that a reset overtook (``_epoch`` moved) is never dispatched;
- a read that fails with a MiniPulsarError is retried after :data:`READ_FAILURE_BACKOFF_S`.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Iterable

from minipulsar.broker.managed_ledger.position import Entry, Position
from minipulsar.broker.topics.base import Consumer, DispatchCursor
from minipulsar.broker.topics.batch_index_acks import BatchIndexAcks
from minipulsar.broker.topics.dispatch_settings import DispatchSettings
from minipulsar.broker.topics.redelivery import RedeliveryTracker
from minipulsar.errors import MiniPulsarError
from minipulsar.supervision import spawn

log = logging.getLogger(__name__)

READ_FAILURE_BACKOFF_S = 1.0


def entries_for_permits(permits: int, avg_messages_per_entry: float | None, precise: bool, max_entries: int) -> int:
    """Entries to read for ``permits`` messages (see the module docstring)."""
    if permits <= 0:
        return 0
    if not precise:
        return min(permits, max_entries)
    if avg_messages_per_entry is None:
        return 1
    return min(math.ceil(permits / max(1.0, avg_messages_per_entry)), max_entries)


def entries_within_permits(permits: int, entries: list[Entry], precise: bool, max_entries: int) -> int:
    """How many of ``entries`` (a prefix) a consumer with ``permits`` may be sent now.

    Not precise: as many entries as it has permits. Precise: entries while its permits are not
    used up, so the last one may go over by less than one entry.
    """
    if permits <= 0:
        return 0
    limit = min(len(entries), max_entries)
    if not precise:
        return min(limit, permits)
    count = messages = 0
    while count < limit and messages < permits:
        messages += entries[count].num_messages
        count += 1
    return count


class Dispatcher:
    """The read loop and the state every subscription type shares; subclasses decide who gets what."""

    def __init__(self, cursor: DispatchCursor, settings: DispatchSettings, redelivery: RedeliveryTracker) -> None:
        self.cursor = cursor
        self.settings = settings
        self.redelivery = redelivery
        self.batch_acks: BatchIndexAcks | None = None
        """The subscription's acks of parts of batches (acknowledgmentAtBatchIndexLevelEnabled):
        a delivery of such an entry names what is left of it."""
        self.consumers: list[Consumer] = []
        self.avg_messages_per_entry: float | None = None
        """The subscription's EMA of messages per entry: the estimate for a consumer without one."""
        self.redelivered_messages = 0
        self.blocked_on_unacked = False
        """Shared/Key_Shared: maxUnackedMessagesPerSubscription reached; cleared at half of it
        (a single-active dispatcher never blocks)."""
        self._loop_task: asyncio.Task[None] | None = None
        self._idle: asyncio.Future[None] | None = None
        self._closed = False
        self._paused = False
        self._epoch = 0

    # -- consumers (subclasses) -----------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        raise NotImplementedError

    def remove_consumer(self, consumer: Consumer) -> None:
        raise NotImplementedError

    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.permits += permits
        self.read_more()

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        """REDELIVER_UNACKED: all of ``consumer``'s unacknowledged entries, or ``positions``."""
        raise NotImplementedError

    def acknowledged(self, consumer: Consumer | None, positions: list[Position]) -> None:
        if consumer is not None:
            consumer.acked(positions)
        self.redelivery.remove(positions)

    def acknowledged_up_to(self, consumer: Consumer | None, position: Position) -> None:
        if consumer is not None:
            consumer.acked_up_to(position)
        self.redelivery.remove_up_to(position)

    def acks_applied(self) -> None:
        """The cursor took acknowledgements: something blocked on them may move now."""

    # -- resets ---------------------------------------------------------------------------------

    async def pause(self) -> None:
        """Stop dispatching (a seek is in progress) and wait for the read loop to end, so that
        no read lands on the cursor while it is reset; :meth:`resume` starts again."""
        self._paused = True
        self._epoch += 1
        task = self._loop_task
        if task is not None and not task.done():
            if self._idle is not None and not self._idle.done():
                self._idle.set_result(None)
            await asyncio.wait([task])

    def resume(self) -> None:
        self._paused = False
        self.read_more()

    def reset_after_seek(self) -> None:
        """The cursor was reset: nothing sent before counts as pending any more."""
        for consumer in self.consumers:
            consumer.take_pending()
        self.redelivery.clear()
        self._mark_reset()

    def _rewind(self) -> list[Position]:
        """Send every unacknowledged entry again from the start; returns what was pending."""
        pending = []
        for consumer in self.consumers:
            pending.extend(consumer.take_pending())
        self._count_redelivered(pending)
        self.cursor.rewind()
        self._mark_reset()
        return pending

    def _mark_reset(self) -> None:
        self._epoch += 1

    def _count_redelivered(self, positions: Iterable[Position]) -> None:
        positions = list(positions)
        self.redelivery.increment(positions)
        self.redelivered_messages += len(positions)

    # -- the read loop --------------------------------------------------------------------------

    def read_more(self) -> None:
        """Start the read loop, or wake it if it idles waiting for new entries (a rewind, a
        redelivery or new permits may have given it work that is not a new entry)."""
        if self._closed:
            return
        if self._loop_task is not None and not self._loop_task.done():
            if self._idle is not None and not self._idle.done():
                self._idle.set_result(None)
            return
        if self.entries_to_read() > 0:
            self._loop_task = spawn(self._read_loop(), name=f"dispatch {self.cursor.name}", logger=log)

    def entries_to_read(self) -> int:
        """Entries the next read asks for; 0 = nothing to do until ``read_more``."""
        if self._closed or self._paused or not self.consumers:
            return 0
        return self._entries_wanted()

    def _entries_wanted(self) -> int:
        raise NotImplementedError

    def _estimate(self, consumer: Consumer) -> float | None:
        return consumer.avg_messages_per_entry or self.avg_messages_per_entry

    async def _read_loop(self) -> None:
        while not self._closed and (count := self.entries_to_read()) > 0:
            epoch = self._epoch
            try:
                entries = await self._read(count)
            except MiniPulsarError as error:
                log.warning(
                    "subscription %s: read failed, retrying in %.1fs: %s",
                    self.cursor.name,
                    READ_FAILURE_BACKOFF_S,
                    error,
                )
                await asyncio.sleep(READ_FAILURE_BACKOFF_S)
                continue
            if epoch != self._epoch:  # reset while reading: these entries are stale
                continue
            if entries is None:
                self._idle = self.cursor.ledger.wait_for_entries()
                await self._idle
                self._idle = None
                continue
            if entries:
                self._note_sizes(entries)
                self._dispatch(entries)

    def _note_sizes(self, entries: list[Entry]) -> None:
        sample = sum(entry.num_messages for entry in entries) / len(entries)
        avg = self.avg_messages_per_entry
        self.avg_messages_per_entry = sample if avg is None else 0.9 * avg + 0.1 * sample

    async def _read(self, max_entries: int) -> list[Entry] | None:
        """Entries to dispatch; None when there is nothing to read until the next add."""
        return await self._read_from_cursor(max_entries)

    async def _read_from_cursor(self, max_entries: int) -> list[Entry] | None:
        if not self.cursor.has_more_entries():
            return None
        before = self.cursor.read_position
        entries = await self.cursor.read_entries(max_entries, max_bytes=self.settings.max_read_size_bytes)
        if not entries and self.cursor.read_position == before:
            return None  # nothing readable yet (never spin on an empty read)
        return entries

    def _dispatch(self, entries: list[Entry]) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        self.stop()
        if self._loop_task is not None:
            try:
                await self._loop_task
            except asyncio.CancelledError:
                pass

    def stop(self) -> None:
        self._closed = True
        if self._loop_task is not None:
            self._loop_task.cancel()
