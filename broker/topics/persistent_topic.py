"""A persistent topic: producers append to its managed ledger; subscriptions read from it.

Publishing goes through deduplication first when it is on (:mod:`broker.dedup`): a resent
message is answered without a second write.

Invariants:

- a subscription name maps to one subscription; concurrent SUBSCRIBEs of a new name open its
  cursor once;
- a non-durable subscription ends (its cursor closed) with its last consumer;
- counters count what was accepted for writing, before deduplication's answer for a resend.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any

from minipulsar import entry_format
from minipulsar.broker.dedup import DEDUP_CURSOR, MessageDeduplication
from minipulsar.broker.managed_ledger.cursor import ManagedCursor
from minipulsar.broker.managed_ledger.ledger import ManagedLedger
from minipulsar.broker.managed_ledger.position import Position
from minipulsar.broker.topics import topic_stats
from minipulsar.broker.topics.base import Consumer, PublishCallback, future_to_callback
from minipulsar.broker.topics.counters import TopicCounters
from minipulsar.broker.topics.dispatch_settings import DispatchSettings
from minipulsar.broker.topics.persistent_subscription import EARLIEST, PersistentSubscription, check_sub_type
from minipulsar.broker.topics.rates import RateTable
from minipulsar.errors import ConsumerBusyError, InvalidCommandError, MiniPulsarError
from minipulsar.metadata.store import MetadataStore
from minipulsar.supervision import spawn
from minipulsar.topic_name import TopicName

log = logging.getLogger(__name__)


class PersistentTopic:
    """A :class:`~broker.topics.base.Topic` stored in a managed ledger (slotted: one per loaded topic)."""

    __slots__ = (
        "_store",
        "_subscribing",
        "counters",
        "deduplication",
        "dispatch_settings",
        "ledger",
        "name",
        "rates",
        "subscriptions",
    )

    def __init__(
        self, name: TopicName, ledger: ManagedLedger, store: MetadataStore, dispatch: DispatchSettings
    ) -> None:
        self.name = name
        self.ledger = ledger
        self._store = store
        self.dispatch_settings = dispatch
        """How subscriptions dispatch (from BrokerConfig)."""
        self.subscriptions: dict[str, PersistentSubscription] = {}
        self._subscribing: dict[str, asyncio.Future[PersistentSubscription]] = {}
        self.counters = TopicCounters()
        self.rates = RateTable()
        self.deduplication: MessageDeduplication | None = None
        """Set (and recovered) by the broker when brokerDeduplicationEnabled."""

    @classmethod
    async def load(
        cls, name: TopicName, ledger: ManagedLedger, store: MetadataStore, dispatch: DispatchSettings
    ) -> PersistentTopic:
        """The topic with its durable subscriptions re-opened (their type is set again by the
        first consumer that attaches)."""
        topic = cls(name, ledger, store, dispatch)
        for cursor_name in await store.children(ledger.path):
            if cursor_name == DEDUP_CURSOR:  # deduplication's, not a subscription (Pulsar hides it too)
                continue
            cursor = await ManagedCursor.open(ledger, cursor_name, store, start_at_earliest=False)
            topic.subscriptions[cursor_name] = PersistentSubscription(cursor, "Exclusive", topic.dispatch_settings)
        return topic

    @property
    def last_message_id(self) -> Position:
        return self.ledger.last_confirmed

    # -- producing ------------------------------------------------------------------------------

    def publish(
        self,
        payload: bytes,
        num_messages: int,
        producer_name: str | None = None,
        sequence_id: int = -1,
        highest_sequence_id: int = -1,
    ) -> asyncio.Future[Position]:
        """Append one entry (a batch); the future gives its position once durable, or
        ``DUPLICATE`` (-1:-1) for a message deduplication recognised as already stored."""
        dedup = self.deduplication
        if dedup is not None and producer_name and sequence_id >= 0:
            answer = dedup.check(producer_name, sequence_id, highest_sequence_id)
            if answer is not None:
                return answer
        counters = self.counters
        counters.messages_in += num_messages
        counters.bytes_in += len(payload)
        added = self.ledger.add_entry(payload, num_messages)
        if dedup is not None and producer_name and sequence_id >= 0 and not entry_format.is_intermediate_chunk(payload):
            dedup.track(producer_name, sequence_id, highest_sequence_id, added)
        return added

    def publish_then(
        self,
        payload: bytes,
        num_messages: int,
        producer_name: str | None,
        sequence_id: int,
        highest_sequence_id: int,
        callback: PublishCallback,
    ) -> None:
        """:meth:`publish` with a callback: straight from the managed ledger's add when
        deduplication is off (no future per entry), through :meth:`publish`'s future when on."""
        if self.deduplication is not None:
            added = self.publish(payload, num_messages, producer_name, sequence_id, highest_sequence_id)
            added.add_done_callback(partial(future_to_callback, callback))
            return
        counters = self.counters
        counters.messages_in += num_messages
        counters.bytes_in += len(payload)
        self.ledger.add_entry_then(payload, num_messages, callback)

    # -- consuming ------------------------------------------------------------------------------

    async def subscribe(
        self,
        consumer: Consumer,
        subscription_name: str,
        sub_type: str,
        start_at_earliest: bool,
        *,
        durable: bool = True,
        start_position: Position | None = None,
    ) -> PersistentSubscription:
        """Attach ``consumer``, creating the subscription if it does not exist.

        A durable subscription starts at the earliest or latest entry; a non-durable one (a
        Reader) at ``start_position`` (inclusive) when given, else likewise.
        """
        check_sub_type(sub_type)
        subscription = self.subscriptions.get(subscription_name)
        if subscription is None:
            subscription = await self._create_subscription(
                subscription_name, sub_type, start_at_earliest, durable, start_position
            )
        try:
            subscription.add_consumer(consumer, sub_type)
        except MiniPulsarError:
            if not subscription.durable and not subscription.consumers:
                self._subscription_idle(subscription)
            raise
        return subscription

    async def _create_subscription(
        self,
        name: str,
        sub_type: str,
        start_at_earliest: bool,
        durable: bool = True,
        start_position: Position | None = None,
    ) -> PersistentSubscription:
        pending = self._subscribing.get(name)
        if pending is None:
            pending = asyncio.ensure_future(
                self._open_subscription(name, sub_type, start_at_earliest, durable, start_position)
            )
            self._subscribing[name] = pending
            pending.add_done_callback(lambda _: self._subscribing.pop(name, None))
        return await asyncio.shield(pending)

    async def _open_subscription(
        self,
        name: str,
        sub_type: str,
        start_at_earliest: bool,
        durable: bool = True,
        start_position: Position | None = None,
    ) -> PersistentSubscription:
        if name == DEDUP_CURSOR:
            raise InvalidCommandError(f"subscription name {name!r} is reserved for deduplication")
        if durable:
            cursor = await ManagedCursor.open(self.ledger, name, self._store, start_at_earliest)
        else:
            if start_position is None and start_at_earliest:
                start_position = EARLIEST
            cursor = ManagedCursor.open_non_durable(self.ledger, name, start_position, inclusive=True)
        subscription = PersistentSubscription(cursor, sub_type, self.dispatch_settings, on_idle=self._subscription_idle)
        self.subscriptions[name] = subscription
        return subscription

    def _subscription_idle(self, subscription: PersistentSubscription) -> None:
        """A non-durable subscription lost its last consumer: it ends (as in Pulsar)."""
        if self.subscriptions.get(subscription.name) is subscription:
            del self.subscriptions[subscription.name]
        spawn(self._close_subscription(subscription), name=f"{self.name}: close {subscription.name}", logger=log)

    async def _close_subscription(self, subscription: PersistentSubscription) -> None:
        await subscription.close()
        await subscription.cursor.close()

    async def unsubscribe(self, subscription_name: str, consumer: Consumer) -> None:
        subscription = self.subscriptions.get(subscription_name)
        if subscription is None:
            return
        others = [c for c in subscription.consumers if c is not consumer]
        if others:
            raise ConsumerBusyError(f"subscription {subscription_name} has other consumers attached")
        subscription.remove_consumer(consumer)
        await subscription.close()
        self.subscriptions.pop(subscription_name, None)
        await subscription.cursor.delete()

    # -- lifecycle ------------------------------------------------------------------------------

    def fence(self, error: MiniPulsarError) -> None:
        self.ledger.fence(error)

    async def close(self) -> None:
        if self.deduplication is not None:
            await self.deduplication.take_snapshot()
        for subscription in self.subscriptions.values():
            await subscription.close()
        try:
            await self.ledger.close()
        except MiniPulsarError as error:
            log.warning("%s: closing the managed ledger failed: %s", self.name, error)

    def stats(self) -> dict[str, Any]:
        """``pulsar-admin topics stats``: same field names (see :mod:`broker.topics.topic_stats`)."""
        return topic_stats.topic_stats(self)

    def internal_stats(self) -> dict[str, Any]:
        """``pulsar-admin topics stats-internal``: ledgers and cursors."""
        return topic_stats.internal_stats(self)

    def update_rates(self, elapsed_s: float) -> None:
        topic_stats.sample_rates(self, elapsed_s)
        self.ledger.write_latency.refresh()
