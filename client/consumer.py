"""Consumer: receive messages pushed by the broker within the permits we grant.

Flow control as in Pulsar: on subscribe we grant ``receiver_queue_size``
permits; each message handed to the application frees one, and once half the queue's worth is
free we grant them back in one FLOW. Permits count messages: a batch entry is unpacked here
and each of its messages is one permit. So at most ``receiver_queue_size`` messages wait in
memory (plus, unless the broker runs ``preciseDispatcherFlowControl``, whatever a batch entry
holds beyond that). Messages dropped from the queue by a redelivery give their permits back;
after a seek the broker zeroes this consumer's permits and it grants its whole queue again.

Acknowledgements are grouped (:mod:`client.ack_grouping`). By default
(``ack_receipt_enabled=True``) ``acknowledge`` returns once the broker's receipt came, which is
once the subscription's position is durable: an acknowledged message is never delivered again,
even after a broker crash — acknowledgements made while another ACK awaits its answer share
the next ACK. This differs from Pulsar, where acknowledgements are fire-and-forget: the
project's tests and README rely on an awaited ``acknowledge`` being stored (e.g. the backlog
seen in the topic stats right after it). ``ack_receipt_enabled=False`` gives Pulsar's
behaviour: ``acknowledge`` returns at once and the group goes out every
``acknowledgment_group_time_ms`` (100 ms); ``close`` (and so leaving an ``async with Client``)
still sends them and waits for their receipt. ``seek``, ``redeliver_unacknowledged_messages``
and ``unsubscribe`` send pending acknowledgements first. A batch entry is acknowledged on the
wire once all its messages are (each member can be acknowledged on its own); a cumulative ack
in the middle of a batch acknowledges up to the entry before.

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
- When an entry comes again, the members of its batch that were already acknowledged are not
  delivered again (their permits go back to the broker).

Reconnection (:mod:`client.connection_handler`): when the connection drops or the broker
closes the consumer (topic unloaded), the messages still in the receiver queue are dropped —
the broker redelivers everything unacknowledged to the new subscription — and the consumer
re-subscribes under the same name, sends the acknowledgements made meanwhile, and grants its
whole (empty) queue again. ``receive`` callers keep waiting across the reconnection. A
non-durable subscription (a Reader's) re-subscribes from the last message the application got
and skips what it already had.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import operator
import secrets
import time
from collections import OrderedDict, deque
from typing import TYPE_CHECKING

from minipulsar.client.ack_grouping import AckGroupingTracker
from minipulsar.client.connection_handler import ConnectionHandler
from minipulsar.client.consumer_config import ConsumerBatchReceivePolicy, ConsumerConfig
from minipulsar.client.exceptions import AlreadyClosed, CumulativeAcknowledgementNotAllowedError, NotConnected, Timeout
from minipulsar.client.message import EntryInfo, Message, MessageId
from minipulsar.errors import MiniPulsarError, RequestTimeoutError
from minipulsar.protocol import AckType, Command
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.batch import decode_batch_items

if TYPE_CHECKING:
    from minipulsar.client.connection import ClientConnection, ConnectionPool
    from minipulsar.client.lookup import LookupService

log = logging.getLogger(__name__)

_consumer_ids = itertools.count(1)

EntryKey = tuple[int, int]
"""(ledger_id, entry_id): what the broker redelivers and what the wire acknowledges."""

SELECTIVE_REDELIVERY_TYPES = ("Shared", "Key_Shared")
_DATA = operator.itemgetter(1)
"""A raw batch message's data (:func:`minipulsar.protocol.batch.decode_batch_items`)."""
ACK_TIMEOUT_TICK_MAX_S = 1.0  # Pulsar: tickDurationInMs = 1000
DEFAULT_BATCH_RECEIVE_POLICY = ConsumerBatchReceivePolicy()


class Consumer:
    def __init__(
        self,
        topic: str,
        subscription_name: str,
        config: ConsumerConfig,
        *,
        pool: ConnectionPool,
        lookup: LookupService,
        operation_timeout_s: float,
    ) -> None:
        self._config = config
        self._topic = topic
        self._subscription = subscription_name
        self._consumer_id = next(_consumer_ids)
        self._type = config.consumer_type.value
        self._queue_size = config.queue_size
        self._name = config.consumer_name or secrets.token_hex(3)[:5]  # Pulsar: 5 random characters
        self._operation_timeout_s = operation_timeout_s
        self._loop = asyncio.get_running_loop()
        self._handler = ConnectionHandler(
            self,
            topic,
            pool,
            lookup,
            operation_timeout_s=operation_timeout_s,
            description=f"consumer {self._name} of {subscription_name} on {topic}",
        )
        self._connection: ClientConnection | None = None
        """Set while subscribed on a live connection."""
        self._queue: deque[Message] = deque()
        self._waiters: deque[asyncio.Future[Message]] = deque()
        self._batch_waiter: asyncio.Future[None] | None = None
        self._batch_policy = config.batch_receive_policy or DEFAULT_BATCH_RECEIVE_POLICY
        self._queued_bytes = 0
        self._permits_to_return = 0
        self._flow_threshold = max(1, self._queue_size // 2)
        """Permits given back in one FLOW once this many are free (half the receiver queue)."""
        self._batch_unacked: dict[EntryKey, set[int]] = {}
        """Batch entries with members not yet acknowledged: the indexes still unacknowledged."""
        self._last_dequeued: Message | None = None
        """The last message handed to the application (its id is made only when needed)."""
        self._skip_through: MessageId | None = None
        """Non-durable resubscription: messages at or before this id were delivered already."""
        self._seeked_to: MessageId | int | None = None
        """Non-durable: the last seek's target, where a resubscription starts until a message is read."""
        self._seeking = False
        self._is_active: bool | None = None
        """Failover: whether the broker made this consumer the active one (None: not told)."""
        self._nack_delay_s = config.negative_ack_redelivery_delay_ms / 1000
        self._nacks: dict[EntryKey, float] = {}
        self._nack_timer: asyncio.TimerHandle | None = None
        self._ack_timeout_s = (config.unacked_messages_timeout_ms or 0) / 1000
        self._unacked: OrderedDict[EntryKey, float] = OrderedDict()
        self._ack_timer: asyncio.TimerHandle | None = None
        self._acks = AckGroupingTracker(
            self._send_ack, config.acknowledgment_group_time_ms, receipts=config.ack_receipt_enabled
        )
        self._subscribed_once = False
        self._closed: MiniPulsarError | None = None

    async def _start(self) -> None:
        """Subscribe (lookup, connect, SUBSCRIBE, FLOW), retried until the operation timeout."""
        await self._handler.start()

    # -- the pulsar API -------------------------------------------------------------------------

    def topic(self) -> str:
        return self._topic

    def subscription_name(self) -> str:
        return self._subscription

    def consumer_name(self) -> str:
        return self._name

    def is_connected(self) -> bool:
        return self._closed is None and self._handler.is_connected

    async def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; waits for one (up to ``timeout_millis``, then raises Timeout)."""
        if self._queue:  # the hot path, inlined: _dequeue, then _deliver
            message = self._queue.popleft()
            self._queued_bytes -= len(message._item[1] or b"")
            self._last_dequeued = message
            if self._ack_timeout_s:
                self._track_unacked(message.entry_key())
            self._permits_to_return += 1
            if self._permits_to_return >= self._flow_threshold and not self._seeking:
                self._return_permits(0)
            return message
        if self._closed is not None:
            raise self._closed
        waiter = self._loop.create_future()
        self._waiters.append(waiter)
        try:
            if timeout_millis is None:
                message = await waiter
            else:
                message = await asyncio.wait_for(waiter, timeout_millis / 1000)
        except TimeoutError:
            raise Timeout(f"no message within {timeout_millis} ms") from None
        finally:
            if not waiter.done():
                waiter.cancel()
        return self._deliver(message)

    async def batch_receive(self) -> list[Message]:
        """Messages as the batch receive policy says: once it has enough (count or bytes), or
        its timeout after this call with whatever came (possibly none)."""
        self._check_open()
        policy = self._batch_policy
        deadline = self._loop.time() + policy.timeout_ms / 1000
        while not self._batch_ready(policy):
            remaining_s = deadline - self._loop.time()
            if remaining_s <= 0:
                break
            self._batch_waiter = self._loop.create_future()
            try:
                await asyncio.wait_for(asyncio.shield(self._batch_waiter), remaining_s)
            except TimeoutError:
                break
            finally:
                self._batch_waiter = None
            self._check_open()
        return self._take_batch(policy)

    async def acknowledge(self, message: Message | MessageId) -> None:
        """Acknowledge one message; with ``ack_receipt_enabled`` (the default) returns once the
        broker stored it, else once it is queued (see the module docstring)."""
        if self._closed is not None:
            raise self._closed
        if isinstance(message, Message):  # the usual case: no MessageId made
            key, index = message._entry.key, message._index
        else:
            key, index = _key(message), message.batch_index()
        remaining = self._batch_unacked.get(key)
        if remaining is not None:  # a batch: its entry is acknowledged with its last member
            remaining.discard(index)
            if remaining:
                return
            del self._batch_unacked[key]
        self._forget(key)
        receipt = self._acks.add_individual(key)
        if receipt is not None:
            await receipt

    async def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        """Acknowledge this message and every earlier one (not allowed on Shared/Key_Shared)."""
        self._check_open()
        if self._type in SELECTIVE_REDELIVERY_TYPES:
            raise CumulativeAcknowledgementNotAllowedError(
                f"cumulative acknowledgement is not allowed on a {self._type} subscription"
            )
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
        receipt = self._acks.add_cumulative(key)
        if receipt is not None:
            await receipt

    def negative_acknowledge(self, message: Message | MessageId) -> asyncio.Future[None]:
        """Have this message delivered again after ``negative_ack_redelivery_delay_ms``.

        Returns a completed future, so that both ``consumer.negative_acknowledge(m)`` (the
        official sync API) and ``await consumer.negative_acknowledge(m)`` (pulsar.asyncio) work."""
        self._check_open()
        key = _key(_id_of(message))
        self._unacked.pop(key, None)
        self._nacks.setdefault(key, time.monotonic() + self._nack_delay_s)
        if self._nack_timer is None:
            self._nack_timer = self._loop.call_later(self._nack_tick_s(), self._nack_tick)
        return _done()

    def redeliver_unacknowledged_messages(self) -> asyncio.Future[None]:
        """Ask the broker to send every unacknowledged message again (pending acknowledgements
        go out first). Returns a completed future: call it with or without ``await``."""
        self._check_open()
        self._acks.flush()
        self._redeliver_all()
        return _done()

    async def seek(self, target: MessageId | int) -> None:
        """Move the subscription to a message id (that message comes next) or to the first
        message published at or after ``target`` ms since the epoch; messages already in the
        receiver queue are dropped."""
        self._check_open()
        fields = _seek_fields(target)
        connection = self._require_connection()
        self._acks.flush()
        # The broker answers with this consumer's permits at zero, so whatever is queued when
        # the answer comes predates the seek; a fresh FLOW (as after a resubscribe) restarts
        # delivery. No FLOW may leave meanwhile: it would let newer messages in early.
        self._seeking = True
        try:
            await connection.request(cmd.Seek, consumer_id=self._consumer_id, **fields)
        except BaseException:
            self._seeking = False
            self._return_permits(0)
            raise
        self._seeking = False
        self._unacked.clear()
        self._nacks.clear()
        self._clear_queue()
        self._batch_unacked.clear()
        self._last_dequeued = self._skip_through = None
        if not self._config.durable:  # a non-durable resubscription starts here, not at the start id
            self._seeked_to = target
        self._permits_to_return = 0
        if self._connection is connection and connection.is_open:
            connection.send(cmd.Flow(consumer_id=self._consumer_id, permits=self._queue_size))

    async def get_last_message_id(self) -> MessageId:
        connection = self._require_connection()
        response = await connection.request(cmd.GetLastMessageId, consumer_id=self._consumer_id)
        assert isinstance(response, cmd.LastMessageId)
        return MessageId(-1, response.ledger_id, response.entry_id, -1)

    async def unsubscribe(self) -> None:
        connection = self._require_connection()
        self._acks.flush()
        await connection.request(cmd.Unsubscribe, consumer_id=self._consumer_id)
        self._close_locally(AlreadyClosed(f"consumer {self._name} unsubscribed"))

    async def close(self) -> None:
        """Send the pending acknowledgements and wait for their receipt (within the operation
        timeout), then leave the subscription."""
        if self._closed is not None:
            return
        connection = self._connection
        receipts = self._acks.flush(receipt=True) if connection is not None else None
        self._close_locally(AlreadyClosed(f"consumer of {self._subscription} is closed"))
        if connection is None or not connection.is_open:
            return
        try:
            if receipts is not None:
                await asyncio.wait_for(receipts, self._operation_timeout_s)
            await connection.request(cmd.CloseConsumer, consumer_id=self._consumer_id)
        except (TimeoutError, MiniPulsarError) as error:
            log.info("consumer %s of %s: close: %s", self._name, self._subscription, error)

    # -- (re)subscribing ------------------------------------------------------------------------

    async def attach(self, connection: ClientConnection, timeout_s: float) -> None:
        """SUBSCRIBE under our name, then the acknowledgements made meanwhile, then FLOW for
        the whole (empty) queue (ConnectionHandler hook)."""
        config = self._config
        start = config.start_message_id
        seek_again = None
        if self._subscribed_once and not config.durable:
            if self._last_dequeued is not None:
                last = self._last_dequeued.message_id()  # a Reader resumes after what the application got
                start, self._skip_through = [last.ledger_id(), last.entry_id()], last
            elif self._seeked_to is not None:  # nothing read since a seek: the new subscription
                seek_again = _seek_fields(self._seeked_to)  # (the broker forgot it) seeks there too
        connection.consumers[self._consumer_id] = self
        try:
            await connection.request(
                cmd.Subscribe,
                timeout_s=timeout_s,
                topic=self._topic,
                subscription=self._subscription,
                consumer_id=self._consumer_id,
                sub_type=self._type,
                consumer_name=self._name,
                initial_position=config.initial_position.value,
                priority_level=config.priority_level,
                durable=config.durable,
                start_message_id=start,
            )
        except BaseException as error:
            connection.consumers.pop(self._consumer_id, None)
            if isinstance(error, RequestTimeoutError):  # the broker may still add it: don't leave it there
                connection.send(cmd.CloseConsumer(consumer_id=self._consumer_id))
            raise
        if self._closed is not None:
            connection.consumers.pop(self._consumer_id, None)
            connection.send(cmd.CloseConsumer(consumer_id=self._consumer_id))
            raise self._closed
        self._subscribed_once = True
        self._connection = connection
        if seek_again is not None:
            await connection.request(cmd.Seek, timeout_s=timeout_s, consumer_id=self._consumer_id, **seek_again)
        self._permits_to_return = 0
        self._acks.flush()
        connection.send(cmd.Flow(consumer_id=self._consumer_id, permits=self._queue_size))

    def attach_failed(self, error: MiniPulsarError) -> None:
        self._close_locally(error)

    # -- from the connection --------------------------------------------------------------------

    def message_received(self, pushed: cmd.Message) -> None:
        """One pushed entry: its messages (raw fields, one small object each) into the queue."""
        publish_ms, producer_name, items = decode_batch_items(pushed.payload)
        count = len(items)
        batched = count > 1
        entry = EntryInfo(
            self._topic, pushed.ledger_id, pushed.entry_id, batched, publish_ms, producer_name, pushed.redelivery_count
        )
        remaining = None
        if batched:
            remaining = self._batch_unacked.get(entry.key)
            if remaining is None:
                remaining = self._batch_unacked[entry.key] = set(range(count))
        skip = self._skip_through
        skipped = 0
        of_item, enqueue = Message.of_item, self._enqueue
        if (remaining is not None and len(remaining) < count) or skip is not None:
            for index, item in enumerate(items):
                message = of_item(item, index, entry)
                if (remaining is not None and index not in remaining) or (
                    skip is not None and message.message_id() <= skip
                ):
                    skipped += 1  # acknowledged already, or (non-durable) delivered before the reconnection
                    continue
                enqueue(message)
        else:  # the usual entry: to the receives waiting, if any, the rest straight into the queue
            messages = [of_item(item, index, entry) for index, item in enumerate(items)]
            taken = self._hand_to_waiters(messages) if self._waiters else 0
            self._queue.extend(messages[taken:] if taken else messages)
            self._queued_bytes += sum(map(len, filter(None, map(_DATA, items[taken:] if taken else items))))
        if skipped:
            self._return_permits(skipped)
        if self._batch_waiter is not None and not self._batch_waiter.done():
            self._batch_waiter.set_result(None)

    def active_consumer_changed(self, is_active: bool) -> None:
        self._is_active = is_active

    def closed_by_broker(self, assigned_broker_url: str | None) -> None:
        log.info(
            "consumer %s of %s: closed by the broker%s",
            self._name,
            self._subscription,
            f"; new owner {assigned_broker_url}" if assigned_broker_url else "",
        )
        self._detach(assigned_broker_url)

    def connection_closed(self, reason: MiniPulsarError) -> None:
        log.info("consumer %s of %s: %s", self._name, self._subscription, reason)
        self._detach(None)

    def _detach(self, assigned_broker_url: str | None) -> None:
        """The broker will redeliver everything unacknowledged to the new subscription: drop
        what waits in the queue (Pulsar's clearReceiverQueue) and the timers' ids."""
        self._connection = None
        if self._closed is not None:
            return
        self._clear_queue()
        self._unacked.clear()
        self._nacks.clear()
        self._handler.detached(assigned_broker_url)

    # -- the receiver queue and permits ---------------------------------------------------------

    def _enqueue(self, message: Message) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(message)
                return
        self._queue.append(message)
        self._queued_bytes += len(message._item[1] or b"")

    def _hand_to_waiters(self, messages: list[Message]) -> int:
        """Give the first of ``messages`` to the receives waiting, in order; how many went."""
        waiters, taken = self._waiters, 0
        while waiters and taken < len(messages):
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(messages[taken])
                taken += 1
        return taken

    def _dequeue(self) -> Message:
        message = self._queue.popleft()
        self._queued_bytes -= len(message._item[1] or b"")
        return message

    def _clear_queue(self) -> None:
        self._queue.clear()
        self._queued_bytes = 0

    def _deliver(self, message: Message) -> Message:
        self._last_dequeued = message
        if self._ack_timeout_s:
            self._track_unacked(message.entry_key())
        self._return_permits(1)
        return message

    def _return_permits(self, count: int) -> None:
        self._permits_to_return += count
        if self._seeking:
            return
        if self._permits_to_return >= self._flow_threshold:
            connection = self._connection
            if connection is not None and connection.is_open:
                connection.send(cmd.Flow(consumer_id=self._consumer_id, permits=self._permits_to_return))
            self._permits_to_return = 0

    def _batch_ready(self, policy: ConsumerBatchReceivePolicy) -> bool:
        if not self._queue:
            return False
        count_limit = min(policy.max_num_message, self._queue_size) if policy.max_num_message > 0 else 0
        if count_limit and len(self._queue) >= count_limit:
            return True
        return policy.max_num_bytes > 0 and self._queued_bytes >= policy.max_num_bytes

    def _take_batch(self, policy: ConsumerBatchReceivePolicy) -> list[Message]:
        count_limit = min(policy.max_num_message, self._queue_size) if policy.max_num_message > 0 else len(self._queue)
        taken: list[Message] = []
        size = 0
        while self._queue and len(taken) < count_limit:
            next_size = len(self._queue[0].data())
            if taken and policy.max_num_bytes > 0 and size + next_size > policy.max_num_bytes:
                break
            taken.append(self._deliver(self._dequeue()))
            size += next_size
        return taken

    # -- acknowledgements on the wire -----------------------------------------------------------

    def _send_ack(
        self, message_ids: list[list[int]], ack_type: AckType, receipt: bool
    ) -> asyncio.Future[Command] | bool:
        connection = self._connection
        if connection is None or not connection.is_open:
            return False
        if receipt:
            return connection.request(
                cmd.Ack, consumer_id=self._consumer_id, message_ids=message_ids, ack_type=ack_type
            )
        connection.send(cmd.Ack(consumer_id=self._consumer_id, message_ids=message_ids, ack_type=ack_type))
        return True

    # -- redelivery -----------------------------------------------------------------------------

    def _redeliver_all(self) -> None:
        """Everything unacknowledged comes again, so what waits in the queue goes: REDELIVER
        first, then the permits of the dropped messages (they must not pull new messages
        ahead of the broker's rewind)."""
        self._unacked.clear()
        dropped = len(self._queue)
        self._clear_queue()
        connection = self._connection
        if connection is not None and connection.is_open:
            connection.send(cmd.RedeliverUnacked(consumer_id=self._consumer_id))
        if dropped:
            self._return_permits(dropped)

    def _redeliver(self, keys: list[EntryKey]) -> None:
        """Send ``keys`` again: only them on Shared/Key_Shared, everything elsewhere."""
        connection = self._connection
        if not keys or self._closed is not None or connection is None or not connection.is_open:
            return
        if self._type not in SELECTIVE_REDELIVERY_TYPES:
            self._redeliver_all()
            return
        connection.send(cmd.RedeliverUnacked(consumer_id=self._consumer_id, message_ids=[list(key) for key in keys]))

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
            self._ack_timer = self._loop.call_later(
                min(ACK_TIMEOUT_TICK_MAX_S, self._ack_timeout_s), self._ack_timeout_tick
            )

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
            self._ack_timer = self._loop.call_later(
                min(ACK_TIMEOUT_TICK_MAX_S, self._ack_timeout_s), self._ack_timeout_tick
            )

    def _forget(self, key: EntryKey) -> None:
        """An entry is acknowledged: no timer may send it again."""
        self._unacked.pop(key, None)
        self._nacks.pop(key, None)

    # -- internals ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed is not None:
            raise self._closed

    def _require_connection(self) -> ClientConnection:
        self._check_open()
        connection = self._connection
        if connection is None or not connection.is_open:
            raise NotConnected(f"consumer {self._name} of {self._subscription} is reconnecting")
        return connection

    def _close_locally(self, reason: MiniPulsarError) -> None:
        if self._closed is None:
            self._closed = reason
        self._handler.close()
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.consumers.pop(self._consumer_id, None)
        for timer in (self._nack_timer, self._ack_timer):
            if timer is not None:
                timer.cancel()
        self._nack_timer = self._ack_timer = None
        self._acks.clear()
        self._acks.fail_waiters(self._closed)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(self._closed)
        self._waiters.clear()
        if self._batch_waiter is not None and not self._batch_waiter.done():
            self._batch_waiter.set_result(None)


def _id_of(message: Message | MessageId) -> MessageId:
    return message.message_id() if isinstance(message, Message) else message


def _key(message_id: MessageId) -> EntryKey:
    return (message_id.ledger_id(), message_id.entry_id())


def _done() -> asyncio.Future[None]:
    future = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future


def _seek_fields(target: MessageId | int) -> dict[str, int]:
    """SEEK's fields for a message id or a publish time in ms."""
    if isinstance(target, MessageId):
        return {"ledger_id": target.ledger_id(), "entry_id": target.entry_id()}
    if isinstance(target, int) and not isinstance(target, bool):
        return {"publish_time_ms": target}
    raise TypeError(f"seek takes a MessageId or a timestamp in ms, not {type(target).__name__}")
