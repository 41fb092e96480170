"""PersistentSubscription: a cursor plus the dispatcher feeding its consumers.

The subscription type is fixed while consumers are attached; the first consumer to attach to
an idle subscription sets it (Pulsar behaves the same), which also builds a new dispatcher.
A durable subscription's cursor is persisted; a non-durable one (a Reader) lives in memory
and the subscription goes away with its last consumer.

SEEK: Pulsar disconnects the subscription's consumers and they resubscribe. minipulsar does
not disconnect: dispatch pauses, every consumer's pending entries, the replay set and the
redelivery counts are dropped, the cursor is reset, the seeking consumer's permits are set to
zero, the broker answers SUCCESS and dispatch resumes from the new position. The seeking
client then clears its receiver queue (all of it predates the seek: it had no permits since)
and grants ``receiver_queue_size`` permits again, as after a resubscribe. Other consumers of
the same subscription are not told: what already sits in their receiver queues is still
delivered to them (Pulsar's disconnect would have dropped it).

Invariants:

- the subscription type changes only while no consumer is attached, and then the dispatcher
  is new and the cursor rewound;
- cumulative acknowledgement is refused on Shared and Key_Shared;
- after a seek nothing sent before it counts as pending, and dispatch stays paused until
  :meth:`PersistentSubscription.resume`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from minipulsar.broker.managed_ledger.position import Position
from minipulsar.broker.topics.base import Consumer, DispatchCursor
from minipulsar.broker.topics.batch_index_acks import BatchIndexAcks
from minipulsar.broker.topics.dispatch_settings import DispatchSettings
from minipulsar.broker.topics.dispatcher import Dispatcher
from minipulsar.broker.topics.dispatcher_shared import SharedDispatcher
from minipulsar.broker.topics.dispatcher_single import SingleActiveConsumerDispatcher
from minipulsar.broker.topics.key_shared import KeySharedDispatcher
from minipulsar.broker.topics.redelivery import RedeliveryTracker
from minipulsar.errors import ConsumerBusyError, InvalidCommandError

log = logging.getLogger(__name__)

SUBSCRIPTION_TYPES = ("Exclusive", "Shared", "Failover", "Key_Shared")
EARLIEST = Position(-1, -1)
"""Before every entry: MessageId.earliest on the wire."""
CUMULATIVE_ACK_REFUSED = ("Shared", "Key_Shared")


def check_sub_type(sub_type: str) -> None:
    if sub_type not in SUBSCRIPTION_TYPES:
        raise InvalidCommandError(
            f"subscription type {sub_type!r} is not supported; use one of {', '.join(SUBSCRIPTION_TYPES)}"
        )


class PersistentSubscription:
    """A :class:`~broker.topics.base.Subscription` that reads its topic's managed ledger."""

    def __init__(
        self,
        cursor: DispatchCursor,
        sub_type: str,
        settings: DispatchSettings | None = None,
        on_idle: Callable[[PersistentSubscription], None] | None = None,
    ) -> None:
        check_sub_type(sub_type)
        self.cursor = cursor
        self.sub_type = sub_type
        self.settings = settings or DispatchSettings()
        self.redelivery = RedeliveryTracker(self.settings.redelivery_tracker_enabled)
        self.batch_acks = BatchIndexAcks() if self.settings.batch_index_ack_enabled else None
        """Acks of parts of batches, kept with acknowledgmentAtBatchIndexLevelEnabled (else an
        official client acks a batch once all of it is, and a redelivery sends it whole)."""
        self.dispatcher: Dispatcher = self._make_dispatcher(sub_type)
        self._on_idle = on_idle
        """Called when a non-durable subscription loses its last consumer."""

    def _make_dispatcher(self, sub_type: str) -> Dispatcher:
        dispatcher: Dispatcher
        if sub_type == "Shared":
            dispatcher = SharedDispatcher(self.cursor, self.settings, self.redelivery)
        elif sub_type == "Key_Shared":
            dispatcher = KeySharedDispatcher(self.cursor, self.settings, self.redelivery)
        else:
            dispatcher = SingleActiveConsumerDispatcher(self.cursor, sub_type, self.settings, self.redelivery)
        dispatcher.batch_acks = self.batch_acks
        return dispatcher

    @property
    def name(self) -> str:
        return self.cursor.name

    @property
    def durable(self) -> bool:
        return self.cursor.durable

    @property
    def consumers(self) -> list[Consumer]:
        return self.dispatcher.consumers

    @property
    def msg_redeliver_counter(self) -> int:
        """Entries handed back for redelivery since the subscription was loaded (Pulsar counts
        messages; an entry is one producer batch)."""
        return self.dispatcher.redelivered_messages

    @property
    def unacked_messages(self) -> int:
        return sum(consumer.unacked_messages for consumer in self.consumers)

    @property
    def msg_drop_counter(self) -> int:
        """Nothing is dropped: what a consumer cannot take now stays in the backlog."""
        return 0

    @property
    def blocked_on_unacked(self) -> bool:
        return self.dispatcher.blocked_on_unacked

    # -- consumers ------------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer, sub_type: str) -> None:
        check_sub_type(sub_type)
        if sub_type != self.sub_type:
            if self.consumers:
                raise ConsumerBusyError(
                    f"subscription {self.name} is {self.sub_type}; cannot attach a {sub_type} consumer"
                )
            redelivered = self.dispatcher.redelivered_messages
            self.dispatcher.stop()
            self.sub_type = sub_type
            self.dispatcher = self._make_dispatcher(sub_type)
            self.dispatcher.redelivered_messages = redelivered
            self.cursor.rewind()  # the old dispatcher's replay set is gone: read every unacked entry again
        self.dispatcher.add_consumer(consumer)
        self._set_cursor_active()

    def remove_consumer(self, consumer: Consumer) -> None:
        self.dispatcher.remove_consumer(consumer)
        self._set_cursor_active()
        if not self.consumers and not self.durable and self._on_idle is not None:
            self._on_idle(self)

    def _set_cursor_active(self) -> None:
        """The entry cache keeps entries for cursors that are read (helper C's ``active`` flag)."""
        self.cursor.active = bool(self.consumers)

    def flow(self, consumer: Consumer, permits: int) -> None:
        self.dispatcher.flow(consumer, permits)

    def read_more(self) -> None:
        self.dispatcher.read_more()

    # -- acknowledgements and redelivery --------------------------------------------------------

    async def acknowledge(self, consumer: Consumer | None, positions: list[Position], cumulative: bool) -> None:
        if cumulative:
            if self.sub_type in CUMULATIVE_ACK_REFUSED:
                raise InvalidCommandError(
                    f"cumulative acknowledgement is not allowed on a {self.sub_type} subscription"
                )
            last = max(positions)
            if self.batch_acks is not None:
                self.batch_acks.forget_up_to(last)
            self.dispatcher.acknowledged_up_to(consumer, last)
            await self.cursor.acknowledge_cumulative(last)
        else:
            if self.batch_acks is not None:
                self.batch_acks.forget(positions)
            self.dispatcher.acknowledged(consumer, positions)
            await self.cursor.acknowledge(positions)
        self.dispatcher.acks_applied()

    def acknowledge_batch_indexes(self, consumer: Consumer, acks: list[tuple[Position, int]]) -> list[Position]:
        """Only entries sent to ``consumer`` and not acknowledged count, each within its size:
        what is kept stays bounded by what was delivered."""
        held = self.batch_acks
        if held is None:
            return []
        sent = consumer.pending_acks
        whole = []
        for position, remaining in acks:
            messages = sent.get(position)
            if messages is not None and held.acknowledge(position, remaining & ((1 << messages) - 1)):
                whole.append(position)
        return whole

    def redeliver_unacknowledged(self, consumer: Consumer, positions: list[Position] | None = None) -> None:
        """REDELIVER_UNACKED: Shared/Key_Shared send ``positions`` (or all) again through the
        replay set; Exclusive/Failover rewind the cursor whatever ``positions`` says."""
        self.dispatcher.redeliver(consumer, positions)

    # -- seek -----------------------------------------------------------------------------------

    async def seek(self, position: Position | None = None, publish_time_ms: int | None = None) -> Position:
        """Reset the cursor to ``position`` (the next entry to deliver) or to the first entry
        published at or after ``publish_time_ms``; dispatch stays paused until :meth:`resume`."""
        ledger = self.cursor.ledger
        await self.dispatcher.pause()
        try:
            if publish_time_ms is not None:
                position = await ledger.find_position_by_publish_time(publish_time_ms)
            assert position is not None
            position = self._seek_target(position)
            self.dispatcher.reset_after_seek()
            await self.cursor.reset(position)
            if self.batch_acks is not None:
                self.batch_acks.clear()
            self.dispatcher.reset_after_seek()  # drop whatever an ack or redelivery added meanwhile
        except BaseException:
            self.dispatcher.resume()
            raise
        log.info("subscription %s: reset to %s", self.name, position)
        return position

    def _seek_target(self, position: Position) -> Position:
        """MessageId.earliest (negative ids) → the first entry; past the end → after the last."""
        ledger = self.cursor.ledger
        if position.ledger_id < 0:
            return ledger.next_position(ledger.first_position)
        last = ledger.last_confirmed
        if position > last:
            return ledger.next_position(last)
        return position

    def resume(self) -> None:
        self.dispatcher.resume()

    async def close(self) -> None:
        await self.dispatcher.close()
        self.cursor.active = False
