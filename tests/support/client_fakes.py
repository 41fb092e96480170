"""Fakes of the client core's Producer and Consumer, for the surface's pure-logic tests."""

from __future__ import annotations

import asyncio
import itertools
from collections import deque

from minipulsar.client.exceptions import AlreadyClosed, Timeout
from minipulsar.client.message import Message
from minipulsar.client.message_id import MessageId


def make_message(
    topic: str,
    ledger_id: int,
    entry_id: int,
    batch_index: int = -1,
    data: bytes = b"",
    *,
    key: str | None = None,
    properties: dict[str, str] | None = None,
) -> Message:
    return Message(
        data or f"{ledger_id}:{entry_id}:{batch_index}".encode(),
        MessageId(-1, ledger_id, entry_id, batch_index),
        topic,
        properties=properties,
        partition_key=key,
        publish_timestamp=0,
        event_timestamp=0,
        redelivery_count=0,
        producer_name="p",
    )


class FakeProducer:
    def __init__(self, topic: str, name: str | None) -> None:
        self._topic, self._name = topic, name or f"generated-{topic[-1]}"
        self.sent: list[tuple[bytes, dict]] = []
        self._entries = itertools.count()
        self.closed = False

    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._name

    def last_sequence_id(self) -> int:
        return len(self.sent) - 1

    def is_connected(self) -> bool:
        return not self.closed

    async def send(self, content: bytes, **kwargs) -> MessageId:
        self.sent.append((content, kwargs))
        return MessageId(-1, 7, next(self._entries), -1)

    def send_async(self, content: bytes, callback, **kwargs) -> None:
        self.sent.append((content, kwargs))
        asyncio.get_running_loop().call_soon(callback, None, MessageId(-1, 7, next(self._entries), -1))

    async def flush(self) -> None:
        pass

    async def close(self) -> None:
        self.closed = True


class FakeConsumer:
    """Messages are pushed with :meth:`push`; receive/ack/seek are recorded."""

    def __init__(self, topic: str, receiver_queue_size: int = 1000) -> None:
        self._topic = topic
        self.receiver_queue_size = receiver_queue_size
        self.queue: deque[Message] = deque()
        self._arrived = asyncio.Event()
        self.acked: list[MessageId] = []
        self.cumulative: list[MessageId] = []
        self.nacked: list[MessageId] = []
        self.seeks: list[MessageId | int] = []
        self.redelivered = 0
        self.last_message_id = MessageId(-1, 0, -1, -1)
        self.closed = False
        self.unsubscribed = False
        self.received = 0

    def push(self, *messages: Message) -> None:
        self.queue.extend(messages)
        self._arrived.set()

    def topic(self) -> str:
        return self._topic

    def is_connected(self) -> bool:
        return not self.closed

    async def receive(self, timeout_millis: int | None = None) -> Message:
        while not self.queue:
            if self.closed:
                raise AlreadyClosed("closed")
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), None if timeout_millis is None else timeout_millis / 1000)
            except TimeoutError:
                raise Timeout("no message") from None
        self.received += 1
        return self.queue.popleft()

    async def acknowledge(self, message_id: MessageId) -> None:
        self.acked.append(message_id)

    async def acknowledge_cumulative(self, message_id: MessageId) -> None:
        self.cumulative.append(message_id)

    def negative_acknowledge(self, message_id: MessageId) -> None:
        self.nacked.append(message_id)

    async def redeliver_unacknowledged_messages(self) -> None:
        self.redelivered += 1

    async def seek(self, target: MessageId | int) -> None:
        self.seeks.append(target)
        self.queue.clear()

    async def get_last_message_id(self) -> MessageId:
        return self.last_message_id

    async def unsubscribe(self) -> None:
        self.unsubscribed = True
        await self.close()

    async def close(self) -> None:
        self.closed = True
        self._arrived.set()
