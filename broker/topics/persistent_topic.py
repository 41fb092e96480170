"""A persistent topic: producers append to its managed ledger; subscriptions read from it."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from minipulsar.errors import ConsumerBusyError, MiniPulsarError
from minipulsar.metadata.store import MetadataStore
from minipulsar.topic_name import TopicName

from broker.managed_ledger.cursor import ManagedCursor
from broker.managed_ledger.ledger import ManagedLedger
from broker.managed_ledger.position import Position
from broker.topics.consumer import Consumer
from broker.topics.subscription import Subscription

log = logging.getLogger(__name__)


@dataclass
class TopicCounters:
    """Plain ints on the hot path; the Prometheus collector reads them at scrape time."""

    messages_in: int = 0
    bytes_in: int = 0
    messages_out: int = 0
    bytes_out: int = 0
    producers: dict[tuple[int, int], str] = field(default_factory=dict)


class PersistentTopic:
    def __init__(self, name: TopicName, ledger: ManagedLedger, store: MetadataStore, max_read_batch_size: int) -> None:
        self.name = name
        self.ledger = ledger
        self._store = store
        self._max_read_batch_size = max_read_batch_size
        self.subscriptions: dict[str, Subscription] = {}
        self._subscribing: dict[str, asyncio.Future[Subscription]] = {}
        self.counters = TopicCounters()

    @classmethod
    async def load(cls, name: TopicName, ledger: ManagedLedger, store: MetadataStore,
                   max_read_batch_size: int) -> "PersistentTopic":
        topic = cls(name, ledger, store, max_read_batch_size)
        for cursor_name in await store.children(ledger.path):
            cursor = await ManagedCursor.open(ledger, cursor_name, store, start_at_earliest=False)
            topic.subscriptions[cursor_name] = Subscription(cursor, "Exclusive", max_read_batch_size)
        return topic

    # -- producing ------------------------------------------------------------------------------

    def publish(self, payload: bytes, num_messages: int) -> asyncio.Future[Position]:
        counters = self.counters
        counters.messages_in += num_messages
        counters.bytes_in += len(payload)
        return self.ledger.add_entry(payload, num_messages)

    # -- consuming ------------------------------------------------------------------------------

    async def subscribe(self, consumer: Consumer, subscription_name: str, sub_type: str,
                        start_at_earliest: bool) -> Subscription:
        subscription = self.subscriptions.get(subscription_name) or await self._create_subscription(
            subscription_name, sub_type, start_at_earliest)
        subscription.add_consumer(consumer, sub_type)
        return subscription

    async def _create_subscription(self, name: str, sub_type: str, start_at_earliest: bool) -> Subscription:
        pending = self._subscribing.get(name)
        if pending is None:
            pending = asyncio.ensure_future(self._open_subscription(name, sub_type, start_at_earliest))
            self._subscribing[name] = pending
            pending.add_done_callback(lambda _: self._subscribing.pop(name, None))
        return await asyncio.shield(pending)

    async def _open_subscription(self, name: str, sub_type: str, start_at_earliest: bool) -> Subscription:
        cursor = await ManagedCursor.open(self.ledger, name, self._store, start_at_earliest)
        subscription = Subscription(cursor, sub_type, self._max_read_batch_size)
        self.subscriptions[name] = subscription
        return subscription

    async def unsubscribe(self, subscription_name: str, consumer: Consumer) -> None:
        subscription = self.subscriptions.get(subscription_name)
        if subscription is None:
            return
        others = [c for c in subscription.consumers if c is not consumer]
        if others:
            raise ConsumerBusyError(f"subscription {subscription_name} has other consumers attached")
        subscription.remove_consumer(consumer)
        await subscription.close()
        del self.subscriptions[subscription_name]
        await subscription.cursor.delete()

    # -- lifecycle ------------------------------------------------------------------------------

    async def close(self) -> None:
        for subscription in self.subscriptions.values():
            await subscription.close()
        try:
            await self.ledger.close()
        except MiniPulsarError as error:
            log.warning("%s: closing the managed ledger failed: %s", self.name, error)

    def stats(self) -> dict:
        """A subset of ``pulsar-admin topics stats`` output, same field names."""
        return {
            "msgInCounter": self.counters.messages_in,
            "bytesInCounter": self.counters.bytes_in,
            "msgOutCounter": self.counters.messages_out,
            "bytesOutCounter": self.counters.bytes_out,
            "publishers": [{"producerId": pid, "producerName": name}
                           for (_, pid), name in self.counters.producers.items()],
            "subscriptions": {
                name: {
                    "type": sub.sub_type,
                    "msgBacklog": sub.cursor.backlog_entries,
                    "markDeletePosition": str(sub.cursor.mark_delete),
                    "readPosition": str(sub.cursor.read_position),
                    "consumers": [{"consumerName": c.name, "availablePermits": c.permits,
                                   "unackedMessages": c.unacked_messages, "msgOutCounter": c.messages_out}
                                  for c in sub.consumers],
                }
                for name, sub in self.subscriptions.items()
            },
            "ledgers": [info.to_json() for info in self.ledger.ledgers],
            "lastConfirmedEntry": str(self.ledger.last_confirmed),
        }
