"""A non-persistent topic (``non-persistent://…``): no managed ledger, no cursors, no cache.

Each published entry goes at once to every subscription's connected consumers that can take
it — one with permits whose socket accepts writes; when no consumer of a subscription can,
the subscription drops it and counts it (``msgDropRate``, ``pulsar_subscription_msg_drop_rate``).
The producer's receipt is immediate and carries ``(-1, -1)``: there is no durable position.
Subscriptions live in memory only and go away with their last consumer (as in Pulsar).

Consumers still see increasing message ids ``(-1, n)`` (``n`` counts the topic's entries), so
client code that keys on message ids — batch acknowledgement, unacked tracking — keeps working.

Invariants:

- nothing is stored: no ledger, no cursor, no deduplication; a receipt never waits;
- each entry goes to at most one consumer per subscription, or is counted as dropped there;
- message ids ``(-1, n)`` increase by one per entry delivered to at least one subscription.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable
from typing import Any

from minipulsar.broker.managed_ledger.position import Entry, Position
from minipulsar.broker.topics import topic_stats
from minipulsar.broker.topics.base import Consumer, PublishCallback
from minipulsar.broker.topics.counters import TopicCounters
from minipulsar.broker.topics.rates import RateTable
from minipulsar.entry_format import decode_batch
from minipulsar.errors import ConsumerBusyError, InvalidCommandError, MiniPulsarError
from minipulsar.topic_name import TopicName

log = logging.getLogger(__name__)

NON_PERSISTENT_POSITION = Position(-1, -1)
"""The receipt position of a non-persistent message."""
SUBSCRIPTION_TYPES = ("Exclusive", "Shared", "Failover", "Key_Shared")


class NonPersistentSubscription:
    """A :class:`~broker.topics.base.Subscription` with nothing stored: consumers and the drop
    count. It is also its own dispatcher: entries are pushed as they are published."""

    cursor: None = None
    """Nothing is read back: no cursor."""
    durable = False
    blocked_on_unacked = False
    """No unacked limit applies: what a consumer cannot take is dropped instead."""
    msg_redeliver_counter = 0
    """Nothing is kept to deliver again."""

    def __init__(
        self, name: str, sub_type: str, on_empty: Callable[[NonPersistentSubscription], None] = lambda _: None
    ) -> None:
        self.name = name
        self.sub_type = sub_type
        self._on_empty = on_empty
        self.consumers: list[Consumer] = []
        self.msg_drop_counter = 0
        """Messages this subscription could not deliver (no consumer with permits)."""
        self._round_robin = 0

    # -- consumers ------------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer, sub_type: str) -> None:
        if sub_type != self.sub_type:
            if self.consumers:
                raise ConsumerBusyError(
                    f"subscription {self.name} is {self.sub_type}; cannot attach a {sub_type} consumer"
                )
            self.sub_type = sub_type
        if self.sub_type == "Exclusive" and self.consumers:
            raise ConsumerBusyError(f"subscription {self.name} already has an exclusive consumer")
        self.consumers.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
            consumer.take_pending()
            if not self.consumers:  # as Pulsar: a non-durable subscription ends with its last consumer
                self._on_empty(self)

    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.permits += permits

    def redeliver_unacknowledged(self, consumer: Consumer, positions: list[Position] | None = None) -> None:
        consumer.take_pending()  # nothing is kept to deliver again: whatever was asked, none is pending

    def read_more(self) -> None:
        """Nothing to read: messages are pushed as they arrive."""

    def acknowledge_batch_indexes(self, consumer: Consumer, acks: list[tuple[Position, int]]) -> list[Position]:
        """Nothing is redelivered, so nothing of a part is kept: the client acks the whole."""
        return []

    async def acknowledge(self, consumer: Consumer | None, positions: list[Position], cumulative: bool) -> None:
        """Acknowledgements only settle the consumer's unacked count; nothing is stored."""
        if consumer is None:
            return
        if cumulative:
            consumer.acked_up_to(max(positions))
        else:
            consumer.acked(positions)

    async def close(self) -> None:
        self.consumers.clear()

    # -- dispatch -------------------------------------------------------------------------------

    def dispatch(self, entry: Entry, key: str | None) -> None:
        consumer = self._pick(key)
        if consumer is None:
            self.msg_drop_counter += entry.num_messages
        else:
            consumer.send_entries([entry])

    def _pick(self, key: str | None) -> Consumer | None:
        consumers = self.consumers
        if not consumers:
            return None
        if self.sub_type in ("Exclusive", "Failover"):
            active = min(consumers, key=lambda c: (c.priority_level, c.name))
            return active if active.can_receive() else None
        if self.sub_type == "Key_Shared":
            ordered = sorted(consumers, key=lambda c: (c.name, c.consumer_id))
            chosen = ordered[zlib.crc32((key or "").encode()) % len(ordered)]
            return chosen if chosen.can_receive() else None
        for _ in range(len(consumers)):
            candidate = consumers[self._round_robin % len(consumers)]
            self._round_robin += 1
            if candidate.can_receive():
                return candidate
        return None


class NonPersistentTopic:
    """A :class:`~broker.topics.base.Topic` that stores nothing."""

    ledger: None = None
    """Nothing is stored: no managed ledger."""
    deduplication: None = None
    """Nothing is stored to deduplicate against."""

    def __init__(self, name: TopicName) -> None:
        assert not name.is_persistent
        self.name = name
        self.subscriptions: dict[str, NonPersistentSubscription] = {}
        self.counters = TopicCounters()
        self.rates = RateTable()
        self._next_entry_id = 0
        self._loop = asyncio.get_running_loop()

    @property
    def last_message_id(self) -> Position:
        """The id of the last message delivered to subscribers here (``(-1, -1)`` before the first;
        messages published while nobody subscribed get no id)."""
        return Position(-1, self._next_entry_id - 1)

    # -- producing ------------------------------------------------------------------------------

    def publish(
        self,
        payload: bytes,
        num_messages: int,
        producer_name: str | None = None,
        sequence_id: int = -1,
        highest_sequence_id: int = -1,
    ) -> asyncio.Future[Position]:
        """Deliver to whoever can take it now; the receipt is immediate (``-1:-1``)."""
        counters = self.counters
        counters.messages_in += num_messages
        counters.bytes_in += len(payload)
        if self.subscriptions:
            entry = Entry(Position(-1, self._next_entry_id), payload, num_messages)
            self._next_entry_id += 1
            key = _first_key(payload) if any(s.sub_type == "Key_Shared" for s in self.subscriptions.values()) else None
            for subscription in list(self.subscriptions.values()):
                subscription.dispatch(entry, key)
        done = self._loop.create_future()
        done.set_result(NON_PERSISTENT_POSITION)
        return done

    def publish_then(
        self,
        payload: bytes,
        num_messages: int,
        producer_name: str | None,
        sequence_id: int,
        highest_sequence_id: int,
        callback: PublishCallback,
    ) -> None:
        self.publish(payload, num_messages, producer_name, sequence_id, highest_sequence_id)
        callback(NON_PERSISTENT_POSITION, None)

    # -- consuming ------------------------------------------------------------------------------

    async def subscribe(
        self,
        consumer: Consumer,
        subscription_name: str,
        sub_type: str,
        start_at_earliest: bool = False,
        *,
        durable: bool = True,
        start_position: Position | None = None,
    ) -> NonPersistentSubscription:
        """Attach ``consumer``; where to start and durability do not apply (nothing is stored)."""
        if not subscription_name or "/" in subscription_name:
            raise InvalidCommandError(f"invalid subscription name {subscription_name!r}")
        if sub_type not in SUBSCRIPTION_TYPES:
            raise InvalidCommandError(
                f"subscription type {sub_type!r} is not supported; use one of {', '.join(SUBSCRIPTION_TYPES)}"
            )
        subscription = self.subscriptions.get(subscription_name)
        if subscription is None:
            subscription = self.subscriptions[subscription_name] = NonPersistentSubscription(
                subscription_name, sub_type, self._subscription_empty
            )
        subscription.add_consumer(consumer, sub_type)
        return subscription

    def _subscription_empty(self, subscription: NonPersistentSubscription) -> None:
        if self.subscriptions.get(subscription.name) is subscription:
            del self.subscriptions[subscription.name]

    async def unsubscribe(self, subscription_name: str, consumer: Consumer) -> None:
        subscription = self.subscriptions.get(subscription_name)
        if subscription is None:
            return
        if any(c is not consumer for c in subscription.consumers):
            raise ConsumerBusyError(f"subscription {subscription_name} has other consumers attached")
        subscription.remove_consumer(consumer)
        self.subscriptions.pop(subscription_name, None)

    # -- lifecycle and stats --------------------------------------------------------------------

    def fence(self, error: MiniPulsarError) -> None:
        """Nothing stored, nothing to fence."""

    async def close(self) -> None:
        for subscription in self.subscriptions.values():
            await subscription.close()

    def stats(self) -> dict[str, Any]:
        return topic_stats.topic_stats(self)

    def internal_stats(self) -> dict[str, Any]:
        return topic_stats.internal_stats(self)

    def update_rates(self, elapsed_s: float) -> None:
        topic_stats.sample_rates(self, elapsed_s)


def _first_key(payload: bytes) -> str | None:
    try:
        messages = decode_batch(payload).messages
    except MiniPulsarError:
        return None
    return (messages[0].ordering_key or messages[0].key) if messages else None  # Pulsar's order
