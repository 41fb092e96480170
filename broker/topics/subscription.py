"""A persistent subscription: a durable cursor plus the dispatcher feeding its consumers."""

from __future__ import annotations

from minipulsar.errors import ConsumerBusyError, InvalidCommand

from broker.managed_ledger.cursor import ManagedCursor
from broker.managed_ledger.position import Position
from broker.topics.consumer import Consumer
from broker.topics.dispatcher import Dispatcher

SUBSCRIPTION_TYPES = ("Exclusive", "Shared", "Failover")


class Subscription:
    def __init__(self, cursor: ManagedCursor, sub_type: str, max_read_batch_size: int) -> None:
        if sub_type not in SUBSCRIPTION_TYPES:
            raise InvalidCommand(f"subscription type {sub_type!r} is not supported; "
                                 f"use one of {', '.join(SUBSCRIPTION_TYPES)}")
        self.cursor = cursor
        self.sub_type = sub_type
        self.dispatcher = Dispatcher(cursor, sub_type, max_read_batch_size)

    @property
    def name(self) -> str:
        return self.cursor.name

    @property
    def consumers(self) -> list[Consumer]:
        return self.dispatcher.consumers

    def add_consumer(self, consumer: Consumer, sub_type: str) -> None:
        if sub_type != self.sub_type:
            if self.consumers:
                raise ConsumerBusyError(f"subscription {self.name} is {self.sub_type}; cannot attach a "
                                        f"{sub_type} consumer")
            if sub_type not in SUBSCRIPTION_TYPES:
                raise InvalidCommand(f"subscription type {sub_type!r} is not supported")
            self.sub_type = self.dispatcher.sub_type = sub_type
        self.dispatcher.add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        self.dispatcher.remove_consumer(consumer)

    async def acknowledge(self, consumer: Consumer | None, positions: list[Position], cumulative: bool) -> None:
        if cumulative:
            if self.sub_type == "Shared":
                raise InvalidCommand("cumulative acknowledgement is not allowed on a Shared subscription")
            last = max(positions)
            self.dispatcher.acknowledged_up_to(consumer, last)
            await self.cursor.acknowledge_cumulative(last)
        else:
            self.dispatcher.acknowledged(consumer, positions)
            await self.cursor.acknowledge(positions)

    async def close(self) -> None:
        await self.dispatcher.close()
