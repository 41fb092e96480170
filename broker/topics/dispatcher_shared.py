"""Shared: entries spread round-robin over the consumers that can take them (Pulsar's
PersistentDispatcherMultipleConsumers).

- A read asks for entries for the sum of the permits of every consumer that can receive.
- Each turn goes to the next consumer, in attach order, among those with permits at the best
  (lowest) ``priority_level`` that has any; it takes up to ``dispatcherMaxRoundRobinBatchSize``
  entries, and no more than its permits allow (entries vs. permits when flow control is not
  precise, messages when it is — see :mod:`broker.topics.dispatcher`).
- Entries nobody can take now, entries handed back for redelivery (REDELIVER_UNACKED, negative
  acks, ack timeouts) and the unacknowledged entries of a consumer that left go to the replay
  set, which is read before the cursor. Ordering is not guaranteed, as in Pulsar.
- ``maxUnackedMessagesPerConsumer``: a consumer with that many unacked messages gets nothing
  until acks bring it down to half; ``maxUnackedMessagesPerSubscription`` does the same for the
  whole subscription. 0 turns either off.

Invariants:

- an entry is pending at one consumer at most, or waits in the replay set;
- nothing goes to a consumer (or the subscription) blocked on its unacked limit.
"""

from __future__ import annotations

import logging

from minipulsar.broker.managed_ledger.position import Entry, Position
from minipulsar.broker.topics.base import Consumer, DispatchCursor
from minipulsar.broker.topics.dispatch_settings import DispatchSettings
from minipulsar.broker.topics.dispatcher import Dispatcher, entries_for_permits, entries_within_permits
from minipulsar.broker.topics.redelivery import RedeliveryTracker
from minipulsar.broker.topics.replay import ReplayQueue

log = logging.getLogger(__name__)


class SharedDispatcher(Dispatcher):
    def __init__(self, cursor: DispatchCursor, settings: DispatchSettings, redelivery: RedeliveryTracker) -> None:
        super().__init__(cursor, settings, redelivery)
        self.replay = ReplayQueue()
        self._round_robin = 0
        self._read_from_replay = False

    @property
    def unacked_messages(self) -> int:
        return sum(consumer.unacked_messages for consumer in self.consumers)

    # -- consumers ------------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.read_more()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer not in self.consumers:
            return
        self.consumers.remove(consumer)
        self._hand_back(consumer.take_pending())
        self._unblock()
        self.read_more()

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        self._hand_back(consumer.take_pending(positions))
        self._unblock()
        self.read_more()

    def _hand_back(self, positions: list[Position]) -> None:
        """Entries sent and not acknowledged go to the replay set, counted as redelivered."""
        unacked = []
        for position in positions:
            key_hash = self._pending_key_hash(position)
            if not self.cursor.is_acked(position):
                self.replay.add(position, key_hash)
                unacked.append(position)
        self._count_redelivered(unacked)

    def _pending_key_hash(self, position: Position) -> int:
        return 0

    # -- acknowledgements -----------------------------------------------------------------------

    def acknowledged(self, consumer: Consumer | None, positions: list[Position]) -> None:
        super().acknowledged(consumer, positions)
        for position in positions:
            self.replay.discard(position)

    def acknowledged_up_to(self, consumer: Consumer | None, position: Position) -> None:
        super().acknowledged_up_to(consumer, position)
        self.replay.discard_up_to(position)

    def acks_applied(self) -> None:
        self._unblock()

    def _unblock(self) -> None:
        """Lift maxUnackedMessages blocks once the unacked count is down to half the limit."""
        changed = False
        limit = self.settings.max_unacked_per_consumer
        for consumer in self.consumers:
            if consumer.blocked_on_unacked and consumer.unacked_messages <= limit // 2:
                consumer.blocked_on_unacked = False
                changed = True
        limit = self.settings.max_unacked_per_subscription
        if self.blocked_on_unacked and self.unacked_messages <= limit // 2:
            self.blocked_on_unacked = False
            changed = True
        if changed:
            self.read_more()

    def _permits_within_limits(self, consumer: Consumer) -> int:
        """Its permits, but no more messages than the unacked limits leave room for (a
        consumer still gets one entry when it has any room: a batch is never split)."""
        permits = consumer.permits
        limit = self.settings.max_unacked_per_consumer
        if limit > 0:
            permits = min(permits, limit - consumer.unacked_messages)
        limit = self.settings.max_unacked_per_subscription
        if limit > 0:
            permits = min(permits, limit - self.unacked_messages)
        return permits

    def _check_unacked_limits(self, consumer: Consumer) -> None:
        limit = self.settings.max_unacked_per_consumer
        if limit > 0 and consumer.unacked_messages >= limit:
            consumer.blocked_on_unacked = True
        limit = self.settings.max_unacked_per_subscription
        if limit > 0 and self.unacked_messages >= limit:
            self.blocked_on_unacked = True

    def reset_after_seek(self) -> None:
        self.replay.clear()
        super().reset_after_seek()
        for consumer in self.consumers:
            consumer.blocked_on_unacked = False
        self.blocked_on_unacked = False

    # -- reading --------------------------------------------------------------------------------

    def _entries_wanted(self) -> int:
        if self.blocked_on_unacked:
            return 0
        settings = self.settings
        receiving = self._consumers_to_read_for()
        if not receiving:
            return 0
        if settings.precise_flow_control:
            wanted = sum(
                entries_for_permits(c.permits, self._estimate(c), True, settings.max_read_batch_size) for c in receiving
            )
        else:
            wanted = sum(c.permits for c in receiving)
        return min(wanted, settings.max_read_batch_size)

    def _consumers_to_read_for(self) -> list[Consumer]:
        return [c for c in self.consumers if c.can_receive()]

    async def _read(self, max_entries: int) -> list[Entry] | None:
        if self.replay:
            self._read_from_replay = True
            return await self._read_replay(max_entries)
        self._read_from_replay = False
        return await self._read_from_cursor(max_entries)

    async def _read_replay(self, max_entries: int) -> list[Entry]:
        """The lowest replay positions (acknowledged ones dropped), read run by run within
        dispatcherMaxReadSizeBytes; what is not read goes back to the replay set."""
        taken = {p: h for p, h in self.replay.pop_first(max_entries) if not self.cursor.is_acked(p)}
        budget = self.settings.max_read_size_bytes
        entries: list[Entry] = []
        try:
            for run in _runs(list(taken)):
                if budget <= 0:
                    break
                wanted = set(run)
                read = await self.cursor.ledger.read_entries(run[0], len(run), budget, cursor=self.cursor)
                for entry in read:
                    if entry.position in wanted:
                        entries.append(entry)
                        budget -= len(entry.payload)
        finally:
            read_positions = {entry.position for entry in entries}
            for position, key_hash in taken.items():  # not lost: read them again next time
                if position not in read_positions:
                    self.replay.add(position, key_hash)
        return entries

    # -- sending --------------------------------------------------------------------------------

    def _dispatch(self, entries: list[Entry]) -> None:
        settings = self.settings
        index = 0
        while index < len(entries) and not self.blocked_on_unacked:
            consumer = self._next_consumer()
            if consumer is None:
                break
            rest = entries[index:]
            count = entries_within_permits(
                self._permits_within_limits(consumer),
                rest,
                settings.precise_flow_control,
                settings.max_round_robin_batch_size,
            )
            if count == 0:  # no room under the unacked limits: block it and try the others
                self._check_unacked_limits(consumer)
                if consumer.blocked_on_unacked:
                    continue
                break
            consumer.send_entries(rest[:count], self.redelivery, self.batch_acks)
            self._sent(consumer, rest[:count])
            index += count
            self._check_unacked_limits(consumer)
        for entry in entries[index:]:
            self.replay.add(entry.position, self._entry_key_hash(entry))

    def _sent(self, consumer: Consumer, entries: list[Entry]) -> None:
        """Hook: entries went to ``consumer``."""

    def _entry_key_hash(self, entry: Entry) -> int:
        return 0

    def _next_consumer(self) -> Consumer | None:
        """Round-robin among consumers that can receive, at the best priority level that has any."""
        consumers = self.consumers
        receiving = [c for c in consumers if c.can_receive()]
        if not receiving:
            return None
        best = min(c.priority_level for c in receiving)
        count = len(consumers)
        for step in range(count):
            index = (self._round_robin + step) % count
            consumer = consumers[index]
            if consumer.priority_level == best and consumer.can_receive():
                self._round_robin = index + 1
                return consumer
        return None


def _runs(positions: list[Position]) -> list[list[Position]]:
    """Sorted positions split into runs of consecutive entries of one ledger."""
    runs: list[list[Position]] = []
    for position in sorted(positions):
        last = runs[-1][-1] if runs else None
        if last is not None and last.ledger_id == position.ledger_id and last.entry_id + 1 == position.entry_id:
            runs[-1].append(position)
        else:
            runs.append([position])
    return runs
