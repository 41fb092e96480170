"""MultiTopicsConsumer: one subscription over several topics — the partitions of a partitioned
topic, a list of topics, or the topics a regex matches (:mod:`client.pattern_consumer`).

As Pulsar's ``MultiTopicsConsumerImpl``: one ordinary :class:`client.consumer.Consumer` per
concrete topic (each with its own permits, acks and reconnection), and one pump task per child
that moves its messages into a shared queue of ``receiver_queue_size``. A pump takes a message
only while the shared queue has room, so a slow application stops the pumps, then the
children's queues fill, then their permits run out and the broker stops: memory stays bounded
by the shared queue plus each child's ``receiver_queue_size`` (Pulsar caps the latter at
``max_total_receiver_queue_size_across_partitions / topics``).

Every message handed out carries its topic (and partition index) in its MessageId, and
acknowledgements, negative acknowledgements and seeks go back to the child that owns the id.
Ordering holds per child topic only.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import secrets
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from minipulsar.client.consumer_config import ConsumerBatchReceivePolicy
from minipulsar.client.exceptions import AlreadyClosed, PulsarException, Timeout
from minipulsar.client.message_id import MessageId, is_earliest, is_latest
from minipulsar.errors import MiniPulsarError

log = logging.getLogger(__name__)

_PARTITION = re.compile(r"-partition-(\d+)$")

ChildFactory = Callable[[str, int], Awaitable[Any]]
"""``(topic, receiver_queue_size) -> Consumer``: how the client subscribes one concrete topic."""


def partition_of(topic: str) -> int:
    """``i`` for ``…-partition-i``, else -1."""
    match = _PARTITION.search(topic)
    return int(match.group(1)) if match else -1


def partitioned_topic_of(topic: str) -> str:
    """The partitioned topic a partition belongs to; a topic that is no partition is itself."""
    return _PARTITION.sub("", topic)


class _Child:
    __slots__ = ("consumer", "epoch", "partition", "pump", "topic")

    def __init__(self, topic: str, consumer: Any) -> None:
        self.topic = topic
        self.partition = partition_of(topic)
        self.consumer = consumer
        self.epoch = 0
        """Bumped by seek/redeliver: a message received under an older epoch is dropped."""
        self.pump: asyncio.Task | None = None


class MultiTopicsConsumer:
    CLOSES_WHEN_EVERY_CHILD_ENDS = True
    """False for a pattern consumer: rediscovery may bring new topics."""

    def __init__(
        self,
        name: str,
        subscription_name: str,
        factory: ChildFactory,
        *,
        receiver_queue_size: int = 1000,
        max_total_receiver_queue_size_across_partitions: int = 50_000,
        consumer_name: str | None = None,
        batch_receive_policy: ConsumerBatchReceivePolicy | None = None,
    ) -> None:
        self._name = name
        self._subscription = subscription_name
        self._factory = factory
        self._queue_size = max(1, receiver_queue_size)
        self._total_queue_size = max(1, max_total_receiver_queue_size_across_partitions)
        self._consumer_name = consumer_name or secrets.token_hex(3)[:5]
        self._batch_policy = batch_receive_policy or ConsumerBatchReceivePolicy()
        self._children: dict[str, _Child] = {}
        self._queue: deque[tuple[_Child, Any]] = deque()
        self._waiters: deque[asyncio.Future] = deque()
        self._space: asyncio.Event = asyncio.Event()
        self._space.set()
        self._closed: MiniPulsarError | None = None

    async def add_topics(self, topics: Iterable[str]) -> None:
        """Subscribe the concrete ``topics`` not subscribed yet; all or none: on a failure the
        ones just added are closed again and the error raised."""
        new = [t for t in dict.fromkeys(topics) if t not in self._children]
        if not new:
            return
        per_child = max(1, min(self._queue_size, self._total_queue_size // (len(self._children) + len(new))))
        results = await asyncio.gather(*(self._factory(t, per_child) for t in new), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        error = failures[0] if failures else self._closed
        if error is not None:
            await asyncio.gather(
                *(r.close() for r in results if not isinstance(r, BaseException)), return_exceptions=True
            )
            raise error
        for topic, consumer in zip(new, results):
            child = _Child(topic, consumer)
            self._children[topic] = child
            child.pump = asyncio.get_running_loop().create_task(self._pump(child), name=f"pump {topic}")

    async def remove_topics(self, topics: Iterable[str]) -> None:
        """Stop consuming ``topics`` (they were deleted or no longer match): close their children."""
        children = [self._children.pop(t) for t in topics if t in self._children]
        self._drop_queued({id(c) for c in children})
        for child in children:
            if child.pump is not None:
                child.pump.cancel()
        await asyncio.gather(*(c.consumer.close() for c in children), return_exceptions=True)

    # -- the pulsar API -------------------------------------------------------------------------

    def topic(self) -> str:
        return self._name

    def topics(self) -> list[str]:
        """The concrete topics consumed now."""
        return list(self._children)

    def subscription_name(self) -> str:
        return self._subscription

    def consumer_name(self) -> str:
        return self._consumer_name

    def is_connected(self) -> bool:
        return self._closed is None and all(c.consumer.is_connected() for c in self._children.values())

    async def receive(self, timeout_millis: int | None = None) -> Any:
        """The next message of any topic; waits up to ``timeout_millis`` (then raises Timeout)."""
        if self._queue:
            return self._take()
        self._check_open()
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            if timeout_millis is None:
                return await waiter
            return await asyncio.wait_for(waiter, timeout_millis / 1000)
        except TimeoutError:
            raise Timeout(f"no message within {timeout_millis} ms") from None
        finally:
            if not waiter.done():
                waiter.cancel()

    async def batch_receive(self) -> list[Any]:
        """Messages of any topic as the batch receive policy says (as the single-topic
        consumer's): what is queued, up to its message and byte limits; when nothing is, the
        first message to come within its ``timeout_ms`` (an empty list after that)."""
        policy = self._batch_policy
        if not self._queue:
            try:
                messages = [await self.receive(policy.timeout_ms)]
            except Timeout:
                return []
        else:
            messages = []
        count_max = policy.max_num_message if policy.max_num_message > 0 else self._queue_size
        bytes_max = policy.max_num_bytes if policy.max_num_bytes > 0 else None
        size = sum(len(m.data()) for m in messages)
        while self._queue and len(messages) < count_max:
            next_size = len(self._queue[0][1].data())
            if bytes_max is not None and messages and size + next_size > bytes_max:
                break
            messages.append(self._take())
            size += next_size
        return messages

    async def acknowledge(self, message: Any) -> None:
        child, message_id = self._owner(message)
        await child.consumer.acknowledge(message_id)

    async def acknowledge_cumulative(self, message: Any) -> None:
        """Acknowledge this message and the earlier ones *of its topic* (as Pulsar)."""
        child, message_id = self._owner(message)
        await child.consumer.acknowledge_cumulative(message_id)

    def negative_acknowledge(self, message: Any) -> Awaitable[None] | None:
        """As the child consumers' (awaitable if theirs is)."""
        child, message_id = self._owner(message)
        return child.consumer.negative_acknowledge(message_id)

    def redeliver_unacknowledged_messages(self) -> Awaitable[object] | None:
        """Every child sends its unacknowledged messages again; what waits in the shared queue
        is dropped (it comes again). Awaitable if the children's method is."""
        self._check_open()
        children = list(self._children.values())
        for child in children:
            child.epoch += 1
        self._drop_queued({id(c) for c in children})
        return _all([c.consumer.redeliver_unacknowledged_messages() for c in children])

    async def seek(self, target: MessageId | int) -> None:
        """Reset to a publish time (ms; every topic), to ``MessageId.earliest``/``latest`` (every
        topic), or to a message id of one topic (that topic only: the id must be one this
        consumer handed out, or carry its topic)."""
        self._check_open()
        if isinstance(target, MessageId) and not (is_earliest(target) or is_latest(target)):
            children = [self._owner(target)[0]]
            target = MessageId(-1, target.ledger_id(), target.entry_id(), target.batch_index())
        else:
            children = list(self._children.values())
        for child in children:
            child.epoch += 1
        self._drop_queued({id(c) for c in children})
        await asyncio.gather(*(c.consumer.seek(target) for c in children))
        self._drop_queued({id(c) for c in children})

    async def get_last_message_id(self) -> MessageId:
        raise PulsarException(
            "get_last_message_id is not supported on a multi-topic consumer; ask the consumer of one partition"
        )

    async def unsubscribe(self) -> None:
        self._check_open()
        await asyncio.gather(*(c.consumer.unsubscribe() for c in self._children.values()))
        await self._shutdown(AlreadyClosed(f"consumer {self._consumer_name} unsubscribed"))

    async def close(self) -> None:
        if self._children or self._closed is None:
            await self._shutdown(self._closed or AlreadyClosed(f"consumer of {self._subscription} is closed"))

    # -- pumps ----------------------------------------------------------------------------------

    async def _pump(self, child: _Child) -> None:
        """Move ``child``'s messages into the shared queue while it has room."""
        while self._closed is None:
            while len(self._queue) >= self._queue_size:
                self._space.clear()
                await self._space.wait()
            epoch = child.epoch
            try:
                message = await child.consumer.receive()
            except asyncio.CancelledError:
                raise
            except MiniPulsarError as error:
                if self._closed is None:
                    log.info("%s: consumer of %s stopped: %s", self._subscription, child.topic, error)
                    self._child_ended(child, error)
                return
            if epoch != child.epoch or self._children.get(child.topic) is not child:
                continue  # a seek or redelivery came meanwhile: it will come again
            message._id = message.message_id().with_topic(child.topic, child.partition)
            self._hand_over(child, message)

    def _child_ended(self, child: _Child, error: MiniPulsarError) -> None:
        """A child consumer gave up for good. Once every one has (and nothing is queued any
        more), receivers get its error instead of waiting forever."""
        if not self.CLOSES_WHEN_EVERY_CHILD_ENDS:
            return
        others = [c for c in self._children.values() if c is not child]
        if all(c.pump is not None and c.pump.done() for c in others):
            self._closed = error
            if not self._queue:
                self._fail_waiters(error)

    def _hand_over(self, child: _Child, message: Any) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(message)
                return
        self._queue.append((child, message))

    def _take(self) -> Any:
        _, message = self._queue.popleft()
        if len(self._queue) < self._queue_size:
            self._space.set()
        return message

    def _drop_queued(self, child_ids: set[int]) -> None:
        kept = [item for item in self._queue if id(item[0]) not in child_ids]
        self._queue = deque(kept)
        if len(self._queue) < self._queue_size:
            self._space.set()

    # -- internals ------------------------------------------------------------------------------

    def _owner(self, message: Any) -> tuple[_Child, MessageId]:
        message_id = message if isinstance(message, MessageId) else message.message_id()
        topic = message_id.topic_name()
        child = self._children.get(topic) if topic else None
        if child is None and topic is None and message_id.partition() >= 0:
            matches = [c for c in self._children.values() if c.partition == message_id.partition()]
            child = matches[0] if len(matches) == 1 else None
        if child is None and topic is None and len(self._children) == 1:
            child = next(iter(self._children.values()))
        if child is None:
            raise ValueError(
                f"message id {message_id} names no topic of this consumer (deserialize it with topic=… to use it here)"
            )
        return child, message_id

    def _check_open(self) -> None:
        if self._closed is not None:
            raise self._closed

    async def _shutdown(self, reason: MiniPulsarError) -> None:
        self._closed = reason
        children = list(self._children.values())
        self._children.clear()
        for child in children:
            if child.pump is not None:
                child.pump.cancel()
        self._space.set()
        self._fail_waiters(reason)
        await asyncio.gather(*(c.consumer.close() for c in children), return_exceptions=True)

    def _fail_waiters(self, error: MiniPulsarError) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(error)
        self._waiters.clear()


def _all(results: list[Any]) -> Awaitable[object] | None:
    """One future over the awaitables among ``results`` (None if there are none): awaiting it
    is optional, as with the children's own futures."""
    pending = [r for r in results if inspect.isawaitable(r)]
    return asyncio.gather(*pending) if pending else None
