"""Consumer: receive messages pushed by the broker within the permits we grant.

Flow control as in Pulsar: on subscribe we grant ``receiver_queue_size`` permits; each
message handed to the application frees one, and once half the queue's worth is free we
grant them back in one FLOW. So at most ``receiver_queue_size`` messages wait in memory.

``acknowledge`` waits for the broker's receipt, which comes once the subscription's
position is durable in the metadata store: an acknowledged message is never delivered
again, even after a broker crash. A batch entry is acknowledged on the wire once all its
messages are.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from typing import TYPE_CHECKING

from minipulsar.errors import MiniPulsarError
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.batch import decode_batch

from client.exceptions import AlreadyClosed, Timeout
from client.message import Message, MessageId

if TYPE_CHECKING:
    from client.connection import ClientConnection

_consumer_ids = itertools.count(1)


class Consumer:
    def __init__(self, connection: "ClientConnection", topic: str, subscription_name: str, *,
                 consumer_type: str, receiver_queue_size: int, consumer_name: str | None,
                 initial_position: str) -> None:
        self._connection = connection
        self._topic = topic
        self._subscription = subscription_name
        self._consumer_id = next(_consumer_ids)
        self._type = consumer_type
        self._queue_size = max(1, receiver_queue_size)
        self._name = consumer_name or ""
        self._initial_position = initial_position
        self._queue: deque[Message] = deque()
        self._waiters: deque[asyncio.Future[Message]] = deque()
        self._permits_to_return = 0
        self._batch_unacked: dict[tuple[int, int], set[int]] = {}
        self._closed: MiniPulsarError | None = None
        self._loop = asyncio.get_running_loop()

    async def _subscribe(self, timeout_s: float) -> None:
        self._connection.consumers[self._consumer_id] = self
        try:
            await self._connection.request(
                cmd.Subscribe, timeout_s=timeout_s, topic=self._topic, subscription=self._subscription,
                consumer_id=self._consumer_id, sub_type=self._type, consumer_name=self._name or None,
                initial_position=self._initial_position)
        except BaseException:
            self._connection.consumers.pop(self._consumer_id, None)
            raise
        self._connection.send(cmd.Flow(consumer_id=self._consumer_id, permits=self._queue_size))

    # -- the pulsar API -------------------------------------------------------------------------

    def topic(self) -> str:
        return self._topic

    def subscription_name(self) -> str:
        return self._subscription

    def consumer_name(self) -> str:
        return self._name

    def is_connected(self) -> bool:
        return self._closed is None and self._connection.is_open

    async def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; waits for one (up to ``timeout_millis``, then raises Timeout)."""
        if self._queue:
            return self._deliver(self._queue.popleft())
        if self._closed is not None:
            raise self._closed
        waiter = self._loop.create_future()
        self._waiters.append(waiter)
        try:
            if timeout_millis is None:
                message = await waiter
            else:
                message = await asyncio.wait_for(waiter, timeout_millis / 1000)
        except asyncio.TimeoutError:
            raise Timeout(f"no message within {timeout_millis} ms") from None
        finally:
            if not waiter.done():
                waiter.cancel()
        return self._deliver(message)

    async def acknowledge(self, message: Message | MessageId) -> None:
        """Acknowledge one message; returns once the acknowledgement is durable on the broker."""
        message_id = message.message_id() if isinstance(message, Message) else message
        if not self._batch_complete(message_id):
            return
        await self._send_ack([[message_id.ledger_id(), message_id.entry_id()]], "individual")

    async def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        """Acknowledge this message and every earlier one (not allowed on Shared subscriptions)."""
        message_id = message.message_id() if isinstance(message, Message) else message
        await self._send_ack([[message_id.ledger_id(), message_id.entry_id()]], "cumulative")

    async def redeliver_unacknowledged_messages(self) -> None:
        """Ask the broker to send every unacknowledged message again."""
        self._check_open()
        self._queue.clear()
        self._connection.send(cmd.RedeliverUnacked(consumer_id=self._consumer_id))

    async def get_last_message_id(self) -> MessageId:
        self._check_open()
        response: cmd.LastMessageId = await self._connection.request(cmd.GetLastMessageId,
                                                                     consumer_id=self._consumer_id)
        return MessageId(-1, response.ledger_id, response.entry_id, -1)

    async def unsubscribe(self) -> None:
        self._check_open()
        await self._connection.request(cmd.Unsubscribe, consumer_id=self._consumer_id)
        self._close_locally(AlreadyClosed(f"consumer {self._name} unsubscribed"))

    async def close(self) -> None:
        if self._closed is not None:
            return
        self._close_locally(AlreadyClosed(f"consumer of {self._subscription} is closed"))
        if self._connection.is_open:
            await self._connection.request(cmd.CloseConsumer, consumer_id=self._consumer_id)

    # -- from the connection --------------------------------------------------------------------

    def message_received(self, pushed: cmd.Message) -> None:
        batch = decode_batch(pushed.payload)
        batched = len(batch.messages) > 1
        if batched:
            self._batch_unacked[(pushed.ledger_id, pushed.entry_id)] = set(range(len(batch.messages)))
        for index, item in enumerate(batch.messages):
            message = Message(
                item.data, MessageId(-1, pushed.ledger_id, pushed.entry_id, index if batched else -1), self._topic,
                properties=item.properties, partition_key=item.key, publish_timestamp=batch.publish_time_ms,
                event_timestamp=item.event_time_ms, redelivery_count=pushed.redelivery_count,
                producer_name=batch.producer_name)
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_result(message)
                    break
            else:
                self._queue.append(message)

    def connection_closed(self, reason: MiniPulsarError) -> None:
        self._close_locally(AlreadyClosed(f"consumer of {self._subscription}: {reason}"))

    # -- internals ------------------------------------------------------------------------------

    def _deliver(self, message: Message) -> Message:
        self._permits_to_return += 1
        if self._permits_to_return >= self._queue_size // 2 or self._queue_size == 1:
            if self._closed is None and self._connection.is_open:
                self._connection.send(cmd.Flow(consumer_id=self._consumer_id, permits=self._permits_to_return))
            self._permits_to_return = 0
        return message

    def _batch_complete(self, message_id: MessageId) -> bool:
        key = (message_id.ledger_id(), message_id.entry_id())
        remaining = self._batch_unacked.get(key)
        if remaining is None:
            return True
        remaining.discard(message_id.batch_index())
        if remaining:
            return False
        del self._batch_unacked[key]
        return True

    async def _send_ack(self, message_ids: list[list[int]], ack_type: str) -> None:
        self._check_open()
        await self._connection.request(cmd.Ack, consumer_id=self._consumer_id, message_ids=message_ids,
                                       ack_type=ack_type)

    def _check_open(self) -> None:
        if self._closed is not None:
            raise self._closed

    def _close_locally(self, reason: MiniPulsarError) -> None:
        if self._closed is None:
            self._closed = reason
        self._connection.consumers.pop(self._consumer_id, None)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(self._closed)
        self._waiters.clear()
