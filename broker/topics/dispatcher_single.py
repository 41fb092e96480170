"""Exclusive and Failover: one active consumer gets every entry (Pulsar's
PersistentDispatcherSingleActiveConsumer).

- Exclusive: a second consumer is refused with ConsumerBusy.
- Failover: every consumer attaches; the active one is the first by ``(priority_level, name)``
  (ties: the earliest attached). Pulsar does this for partitions of a partitioned topic
  (index = partition mod n) and uses a hash ring of names on non-partitioned topics; we use
  the sorted order everywhere, which gives the same "highest priority, then name" fail-over.
  When the active consumer changes, every consumer gets ACTIVE_CONSUMER_CHANGE at once, and
  the cursor is rewound so the new active consumer receives every unacknowledged entry,
  including those the previous one had been sent. If a consumer *was* active before (it left,
  or one that sorts first joined), dispatch stops and that rewind-and-read waits
  ``activeConsumerFailoverDelayTimeMillis`` — time for the previous consumer to acknowledge
  what it is processing, so that less is delivered twice; the first consumer of an idle
  subscription starts at once. Further changes during the wait do not restart it.

Only the active consumer may ask for redelivery (Pulsar ignores the others); any consumer may
acknowledge. A redelivery request rewinds the cursor, with or without message ids (as Pulsar).

Invariants:

- at most one consumer is active; only it is sent entries;
- a change of active consumer rewinds, so the new one gets every unacknowledged entry.
"""

from __future__ import annotations

import asyncio
import logging

from minipulsar.broker.managed_ledger.position import Entry, Position
from minipulsar.broker.topics.base import Consumer, DispatchCursor
from minipulsar.broker.topics.dispatch_settings import DispatchSettings
from minipulsar.broker.topics.dispatcher import Dispatcher, entries_for_permits
from minipulsar.broker.topics.redelivery import RedeliveryTracker
from minipulsar.errors import ConsumerBusyError
from minipulsar.protocol.commands import ActiveConsumerChange

log = logging.getLogger(__name__)


class SingleActiveConsumerDispatcher(Dispatcher):
    def __init__(
        self, cursor: DispatchCursor, sub_type: str, settings: DispatchSettings, redelivery: RedeliveryTracker
    ) -> None:
        super().__init__(cursor, settings, redelivery)
        self.sub_type = sub_type
        self.active: Consumer | None = None
        self._switch_timer: asyncio.TimerHandle | None = None

    @property
    def switching(self) -> bool:
        """A Failover switch is waiting out activeConsumerFailoverDelayTimeMillis."""
        return self._switch_timer is not None

    # -- consumers ------------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        if self.sub_type == "Exclusive" and self.consumers:
            raise ConsumerBusyError(f"subscription {self.cursor.name} already has an exclusive consumer")
        self.consumers.append(consumer)
        if not self._pick_active() and self.sub_type == "Failover":
            consumer.connection.send(
                ActiveConsumerChange(consumer_id=consumer.consumer_id, is_active=consumer is self.active)
            )

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer not in self.consumers:
            return
        self.consumers.remove(consumer)
        left_behind = consumer.take_pending()  # an inactive consumer holds nothing since the last switch
        if consumer is self.active:
            self._count_redelivered(left_behind)
            self._pick_active()

    def _pick_active(self) -> bool:
        """Choose the active consumer; True if it changed (and the switch was scheduled)."""
        chosen = min(self.consumers, key=lambda c: (c.priority_level, c.name), default=None)
        previous = self.active
        if chosen is previous:
            return False
        self.active = chosen
        self._rewind()  # what anyone was sent and did not ack goes to the new active consumer
        if chosen is None:
            self._cancel_switch()
            return True
        self._notify_active()
        if self.sub_type == "Failover" and previous is not None and self.settings.failover_delay_ms > 0:
            if self._switch_timer is None:
                self._switch_timer = asyncio.get_running_loop().call_later(
                    self.settings.failover_delay_ms / 1000, self._switch_now
                )
            return True
        self.read_more()
        return True

    def _switch_now(self) -> None:
        self._switch_timer = None
        if self._closed or self.active is None:
            return
        self._rewind()
        log.info("subscription %s: %s is the active consumer", self.cursor.name, self.active.name)
        self.read_more()

    def _cancel_switch(self) -> None:
        if self._switch_timer is not None:
            self._switch_timer.cancel()
            self._switch_timer = None

    def _notify_active(self) -> None:
        if self.sub_type != "Failover":
            return
        for consumer in self.consumers:
            consumer.connection.send(
                ActiveConsumerChange(consumer_id=consumer.consumer_id, is_active=consumer is self.active)
            )

    # -- redelivery -----------------------------------------------------------------------------

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        if consumer is not self.active:
            log.info(
                "subscription %s: ignoring a redelivery request of inactive consumer %s",
                self.cursor.name,
                consumer.name,
            )
            return
        self._rewind()
        self.read_more()

    # -- reading and sending --------------------------------------------------------------------

    def _entries_wanted(self) -> int:
        active = self.active
        if active is None or self._switch_timer is not None or not active.writable:
            return 0
        return entries_for_permits(
            active.permits,
            self._estimate(active),
            self.settings.precise_flow_control,
            self.settings.max_read_batch_size,
        )

    def _dispatch(self, entries: list[Entry]) -> None:
        """Everything read goes to the active consumer: the read was sized by its permits."""
        if self.active is None:
            self.cursor.seek(min(self.cursor.read_position, entries[0].position))
            return
        self.active.send_entries(entries, self.redelivery, self.batch_acks)

    def stop(self) -> None:
        self._cancel_switch()
        super().stop()
