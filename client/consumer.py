"""Consumer: receive messages pushed by the broker within the permits we grant.

Flow control as in Pulsar: on subscribe we grant ``receiver_queue_size`` permits; each
message handed to the application frees one, and once half the queue's worth is free we
grant them back in one FLOW. So at most ``receiver_queue_size`` messages wait in memory
(plus, unless the broker runs ``preciseDispatcherFlowControl``, whatever a batch entry holds
beyond that). Messages dropped from the queue by a redelivery give their permits back; after a
seek the broker zeroes this consumer's permits and it grants its whole queue again.

``acknowledge`` waits for the broker's receipt, which comes once the subscription's
position is durable in the metadata store: an acknowledged message is never delivered
again, even after a broker crash. A batch entry is acknowledged on the wire once all its
messages are; a cumulative ack in the middle of a batch acknowledges up to the entry before.

Redelivery, as Pulsar's client:

- ``negative_acknowledge`` remembers the entry; a timer that ticks every third of
  ``negative_ack_redelivery_delay_ms`` sends, in one REDELIVER_UNACKED, the ids whose delay
  has passed (so the redelivery comes between 1 and 1⅓ delays after the nack).
- ``unacked_messages_timeout_ms`` (0 or None: off): a message handed to the application and
  not acknowledged within it is redelivered the same way; the check ticks every
  ``min(1 s, timeout)``. Pulsar refuses timeouts under 1 s (the Python client under 10 s);
  minipulsar takes any positive value so that tests can run fast.
- On Shared/Key_Shared only the named entries are sent again. On Exclusive/Failover the broker
  can only rewind, so (as Pulsar) a nack or a timeout redelivers every unacknowledged
  message: the receiver queue is cleared first.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from collections import OrderedDict, deque
from typing import TYPE_CHECKING

from minipulsar.errors import MiniPulsarError
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.batch import decode_batch

from client.exceptions import AlreadyClosed, CumulativeAcknowledgementNotAllowedError, Timeout
from client.message import Message, MessageId

if TYPE_CHECKING:
    from client.connection import ClientConnection

_consumer_ids = itertools.count(1)

EntryKey = tuple[int, int]
"""(ledger_id, entry_id): what the broker redelivers and what the wire acknowledges."""

SELECTIVE_REDELIVERY_TYPES = ("Shared", "Key_Shared")
ACK_TIMEOUT_TICK_MAX_S = 1.0  # Pulsar: tickDurationInMs = 1000


class Consumer:
    def __init__(self, connection: "ClientConnection", topic: str, subscription_name: str, *,
                 consumer_type: str, receiver_queue_size: int, consumer_name: str | None,
                 initial_position: str, priority_level: int = 0,
                 negative_ack_redelivery_delay_ms: int = 60_000,
                 unacked_messages_timeout_ms: int | None = None) -> None:
        if negative_ack_redelivery_delay_ms < 0:
            raise ValueError("negative_ack_redelivery_delay_ms must be >= 0")
        if unacked_messages_timeout_ms is not None and unacked_messages_timeout_ms < 0:
            raise ValueError("unacked_messages_timeout_ms must be >= 0")
        self._connection = connection
        self._topic = topic
        self._subscription = subscription_name
        self._consumer_id = next(_consumer_ids)
        self._type = consumer_type
        self._queue_size = max(1, receiver_queue_size)
        self._name = consumer_name or secrets.token_hex(3)[:5]  # Pulsar: 5 random characters
        self._initial_position = initial_position
        self._priority_level = priority_level
        self._queue: deque[Message] = deque()
        self._waiters: deque[asyncio.Future[Message]] = deque()
        self._permits_to_return = 0
        self._batch_unacked: dict[EntryKey, set[int]] = {}
        self._seeking = False
        self._is_active: bool | None = None
        """Failover: whether the broker made this consumer the active one (None: not told)."""
        self._nack_delay_s = negative_ack_redelivery_delay_ms / 1000
        self._nacks: dict[EntryKey, float] = {}
        self._nack_timer: asyncio.TimerHandle | None = None
        self._ack_timeout_s = (unacked_messages_timeout_ms or 0) / 1000
        self._unacked: OrderedDict[EntryKey, float] = OrderedDict()
        self._ack_timer: asyncio.TimerHandle | None = None
        self._closed: MiniPulsarError | None = None
        self._loop = asyncio.get_running_loop()

    async def _subscribe(self, timeout_s: float) -> None:
        self._connection.consumers[self._consumer_id] = self
        try:
            await self._connection.request(
                cmd.Subscribe, timeout_s=timeout_s, topic=self._topic, subscription=self._subscription,
                consumer_id=self._consumer_id, sub_type=self._type, consumer_name=self._name,
                initial_position=self._initial_position, priority_level=self._priority_level)
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
        message_id = _id_of(message)
        key = _key(message_id)
        if not self._batch_complete(message_id):
            return
        self._forget(key)
        await self._send_ack([list(key)], "individual")

    async def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        """Acknowledge this message and every earlier one (not allowed on Shared/Key_Shared)."""
        if self._type in SELECTIVE_REDELIVERY_TYPES:
            raise CumulativeAcknowledgementNotAllowedError(
                f"cumulative acknowledgement is not allowed on a {self._type} subscription")
        message_id = _id_of(message)
        ledger_id, entry_id = key = _key(message_id)
        for older in [k for k in self._batch_unacked if k < key]:
            del self._batch_unacked[older]
        remaining = self._batch_unacked.get(key)
        if remaining is not None:  # a batch: covered only if no later message of it is left
            remaining.difference_update(range(message_id.batch_index() + 1))
            if remaining:
                key = (ledger_id, entry_id - 1)
            else:
                del self._batch_unacked[key]
        for done in [k for k in self._unacked if k <= key]:
            del self._unacked[done]
        for done in [k for k in self._nacks if k <= key]:
            del self._nacks[done]
        if key[1] < 0:  # the first entry of a ledger, still partly unacknowledged: nothing to send
            return
        await self._send_ack([list(key)], "cumulative")

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Have this message delivered again after ``negative_ack_redelivery_delay_ms``."""
        self._check_open()
        key = _key(_id_of(message))
        self._unacked.pop(key, None)
        self._nacks.setdefault(key, time.monotonic() + self._nack_delay_s)
        if self._nack_timer is None:
            self._nack_timer = self._loop.call_later(self._nack_tick_s(), self._nack_tick)

    async def redeliver_unacknowledged_messages(self) -> None:
        """Ask the broker to send every unacknowledged message again."""
        self._check_open()
        self._redeliver_all()

    async def seek(self, target: MessageId | int) -> None:
        """Move the subscription to a message id (that message comes next) or to the first
        message published at or after ``target`` ms since the epoch; messages already in the
        receiver queue are dropped."""
        self._check_open()
        if isinstance(target, MessageId):
            fields = {"ledger_id": target.ledger_id(), "entry_id": target.entry_id()}
        elif isinstance(target, int) and not isinstance(target, bool):
            fields = {"publish_time_ms": target}
        else:
            raise TypeError(f"seek takes a MessageId or a timestamp in ms, not {type(target).__name__}")
        # The broker answers with this consumer's permits at zero, so whatever is queued when
        # the answer comes predates the seek; a fresh FLOW (as after a resubscribe) restarts
        # delivery. No FLOW may leave meanwhile: it would let newer messages in early.
        self._seeking = True
        try:
            await self._connection.request(cmd.Seek, consumer_id=self._consumer_id, **fields)
        except BaseException:
            self._seeking = False
            self._return_permits(0)
            raise
        self._seeking = False
        self._unacked.clear()
        self._nacks.clear()
        self._queue.clear()
        self._permits_to_return = 0
        if self._closed is None and self._connection.is_open:
            self._connection.send(cmd.Flow(consumer_id=self._consumer_id, permits=self._queue_size))

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

    def active_consumer_changed(self, is_active: bool) -> None:
        self._is_active = is_active

    def connection_closed(self, reason: MiniPulsarError) -> None:
        self._close_locally(AlreadyClosed(f"consumer of {self._subscription}: {reason}"))

    # -- permits --------------------------------------------------------------------------------

    def _deliver(self, message: Message) -> Message:
        if self._ack_timeout_s:
            self._track_unacked(_key(message.message_id()))
        self._return_permits(1)
        return message

    def _return_permits(self, count: int) -> None:
        self._permits_to_return += count
        if self._seeking:
            return
        if self._permits_to_return >= max(1, self._queue_size // 2):
            if self._closed is None and self._connection.is_open:
                self._connection.send(cmd.Flow(consumer_id=self._consumer_id, permits=self._permits_to_return))
            self._permits_to_return = 0

    # -- redelivery -----------------------------------------------------------------------------

    def _redeliver_all(self) -> None:
        """Everything unacknowledged comes again, so what waits in the queue goes: REDELIVER
        first, then the permits of the dropped messages (they must not pull new messages
        ahead of the broker's rewind)."""
        self._unacked.clear()
        dropped = len(self._queue)
        self._queue.clear()
        if self._closed is None and self._connection.is_open:
            self._connection.send(cmd.RedeliverUnacked(consumer_id=self._consumer_id))
        if dropped:
            self._return_permits(dropped)

    def _redeliver(self, keys: list[EntryKey]) -> None:
        """Send ``keys`` again: only them on Shared/Key_Shared, everything elsewhere."""
        if not keys or self._closed is not None or not self._connection.is_open:
            return
        if self._type not in SELECTIVE_REDELIVERY_TYPES:
            self._redeliver_all()
            return
        self._connection.send(cmd.RedeliverUnacked(consumer_id=self._consumer_id,
                                                   message_ids=[list(key) for key in keys]))

    def _nack_tick_s(self) -> float:
        return max(self._nack_delay_s / 3, 0.001)

    def _nack_tick(self) -> None:
        self._nack_timer = None
        now = time.monotonic()
        due = [key for key, deadline in self._nacks.items() if deadline <= now]
        for key in due:
            del self._nacks[key]
        self._redeliver(sorted(due))
        if self._nacks and self._closed is None:
            self._nack_timer = self._loop.call_later(self._nack_tick_s(), self._nack_tick)

    def _track_unacked(self, key: EntryKey) -> None:
        if key not in self._unacked:
            self._unacked[key] = time.monotonic() + self._ack_timeout_s
        if self._ack_timer is None:
            self._ack_timer = self._loop.call_later(min(ACK_TIMEOUT_TICK_MAX_S, self._ack_timeout_s),
                                                    self._ack_timeout_tick)

    def _ack_timeout_tick(self) -> None:
        self._ack_timer = None
        now = time.monotonic()
        due = []
        for key, deadline in self._unacked.items():  # oldest first
            if deadline > now:
                break
            due.append(key)
        for key in due:
            del self._unacked[key]
        self._redeliver(sorted(due))
        if self._unacked and self._closed is None:
            self._ack_timer = self._loop.call_later(min(ACK_TIMEOUT_TICK_MAX_S, self._ack_timeout_s),
                                                    self._ack_timeout_tick)

    def _forget(self, key: EntryKey) -> None:
        """An entry is acknowledged: no timer may send it again."""
        self._unacked.pop(key, None)
        self._nacks.pop(key, None)

    # -- internals ------------------------------------------------------------------------------

    def _batch_complete(self, message_id: MessageId) -> bool:
        key = _key(message_id)
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
        for timer in (self._nack_timer, self._ack_timer):
            if timer is not None:
                timer.cancel()
        self._nack_timer = self._ack_timer = None
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(self._closed)
        self._waiters.clear()


def _id_of(message: Message | MessageId) -> MessageId:
    return message.message_id() if isinstance(message, Message) else message


def _key(message_id: MessageId) -> EntryKey:
    return (message_id.ledger_id(), message_id.entry_id())
