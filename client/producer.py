"""Producer: send messages to one topic and await their durable receipts.

Sends are pipelined on the connection; the broker answers in order, so pending sends live in
a FIFO keyed by sequence id. ``max_pending_messages`` bounds them: a full queue makes
``send`` wait (``block_if_queue_full=True``) or fail with ProducerQueueIsFull (the default,
as in Pulsar). One timer per producer enforces ``send_timeout_millis`` on the oldest send.
Batching (several messages per entry) comes with the client issue; each send is one entry
whose payload uses the batch format of :mod:`minipulsar.protocol.batch`.

Sequence ids count from ``initial_sequence_id + 1``; without one, a producer that reuses a
``producer_name`` continues after the ``last_sequence_id`` the broker reports for that name
(brokers with deduplication remember it), as Pulsar's producer does. ``send(...,
sequence_id=n)`` sets the id explicitly, e.g. to resend a message after a failure: with
``brokerDeduplicationEnabled`` the broker stores it once.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from minipulsar.errors import MiniPulsarError, error_for_code
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.batch import BatchMessage, encode_batch

from client.exceptions import AlreadyClosed, ProducerQueueIsFull, Timeout
from client.message import MessageId

if TYPE_CHECKING:
    from client.connection import ClientConnection

_producer_ids = itertools.count(1)


class _PendingSend:
    __slots__ = ("future", "deadline")

    def __init__(self, future: asyncio.Future[MessageId], deadline: float) -> None:
        self.future, self.deadline = future, deadline


class Producer:
    def __init__(self, connection: "ClientConnection", topic: str, *, producer_name: str | None,
                 send_timeout_millis: int, max_pending_messages: int, block_if_queue_full: bool,
                 initial_sequence_id: int | None = None) -> None:
        self._connection = connection
        self._topic = topic
        self._producer_id = next(_producer_ids)
        self._name = producer_name or ""
        self._send_timeout_s = send_timeout_millis / 1000
        self._max_pending = max_pending_messages
        self._block_if_queue_full = block_if_queue_full
        self._pending: OrderedDict[int, _PendingSend] = OrderedDict()
        self._space_waiters: list[asyncio.Future[None]] = []
        self._initial_sequence_id = initial_sequence_id
        start = initial_sequence_id + 1 if initial_sequence_id is not None else 0
        self._sequence_ids = itertools.count(start)
        self._last_sequence_id = start - 1
        self._timer: asyncio.TimerHandle | None = None
        self._closed: MiniPulsarError | None = None
        self._loop = asyncio.get_running_loop()

    async def _register(self, timeout_s: float) -> None:
        response: cmd.ProducerSuccess = await self._connection.request(
            cmd.Producer, timeout_s=timeout_s, topic=self._topic, producer_id=self._producer_id,
            producer_name=self._name or None)
        self._name = response.producer_name
        if self._initial_sequence_id is None and response.last_sequence_id >= 0:
            self._last_sequence_id = response.last_sequence_id
            self._sequence_ids = itertools.count(response.last_sequence_id + 1)
        self._connection.producers[self._producer_id] = self

    # -- the pulsar API -------------------------------------------------------------------------

    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._name

    def last_sequence_id(self) -> int:
        """The highest sequence id the broker acknowledged (or reported on creation); -1: none."""
        return self._last_sequence_id

    def is_connected(self) -> bool:
        return self._closed is None and self._connection.is_open

    async def send(self, content: bytes | None, properties: dict[str, str] | None = None,
                   partition_key: str | None = None, event_timestamp: int | None = None,
                   sequence_id: int | None = None) -> MessageId:
        """Publish one message; returns its id once the broker stored it durably.

        ``sequence_id`` (>= 0) replaces the next automatic one; a duplicate the broker
        recognises is acknowledged with the id ``(-1, -1)`` and not stored again.

        Raises:
            ValueError: ``sequence_id`` is negative or a send with it is still pending.
            ProducerQueueIsFull: ``max_pending_messages`` reached and not blocking.
            Timeout: no receipt within ``send_timeout_millis``.
            AlreadyClosed: the producer or its connection is closed.
        """
        if sequence_id is not None and (sequence_id < 0 or sequence_id in self._pending):
            raise ValueError(f"sequence_id {sequence_id} is negative or already pending")
        await self._reserve_slot()
        return await self._send_now(content, properties, partition_key, event_timestamp, sequence_id)

    def send_async(self, content: bytes | None, callback: Callable[[MiniPulsarError | None, MessageId | None], None],
                   **kwargs) -> None:
        """Publish without awaiting; ``callback(error, message_id)`` runs on completion."""
        task = self._loop.create_task(self.send(content, **kwargs))

        def done(t: asyncio.Task[MessageId]) -> None:
            error = t.exception()
            callback(error, None) if error else callback(None, t.result())

        task.add_done_callback(done)

    async def flush(self) -> None:
        """Wait until every send issued so far has its receipt (or failed)."""
        if self._pending:
            await asyncio.gather(*(p.future for p in self._pending.values()), return_exceptions=True)

    async def close(self) -> None:
        if self._closed is not None:
            return
        await self.flush()
        self._closed = AlreadyClosed(f"producer {self._name} is closed")
        self._connection.producers.pop(self._producer_id, None)
        if self._connection.is_open:
            await self._connection.request(cmd.CloseProducer, producer_id=self._producer_id)
        self._fail_pending(self._closed)

    # -- sending --------------------------------------------------------------------------------

    async def _reserve_slot(self) -> None:
        while len(self._pending) >= self._max_pending:
            if not self._block_if_queue_full:
                raise ProducerQueueIsFull(f"{self._max_pending} messages are pending on producer {self._name}")
            waiter = self._loop.create_future()
            self._space_waiters.append(waiter)
            await waiter

    def _send_now(self, content, properties, partition_key, event_timestamp,
                  sequence_id: int | None = None) -> asyncio.Future[MessageId]:
        future: asyncio.Future[MessageId] = self._loop.create_future()
        if self._closed is not None or not self._connection.is_open:
            future.set_exception(self._closed or AlreadyClosed("the connection to the broker is closed"))
            return future
        if sequence_id is None:
            sequence_id = next(self._sequence_ids)
        elif sequence_id in self._pending:  # taken while we waited for a slot
            future.set_exception(ValueError(f"sequence_id {sequence_id} is already pending"))
            return future
        now = time.time()
        payload = encode_batch(int(now * 1000), self._name, [
            BatchMessage(sequence_id, content, partition_key, properties, event_timestamp or 0)])
        self._pending[sequence_id] = _PendingSend(future, time.monotonic() + self._send_timeout_s)
        self._connection.send(cmd.Send(producer_id=self._producer_id, sequence_id=sequence_id,
                                       payload=payload, num_messages=1))
        if self._timer is None:
            self._timer = self._loop.call_later(self._send_timeout_s, self._check_timeouts)
        return future

    def receipt_received(self, receipt: cmd.SendReceipt) -> None:
        pending = self._pending.pop(receipt.sequence_id, None)
        if pending is None:
            return
        self._last_sequence_id = max(self._last_sequence_id, receipt.sequence_id)
        if not pending.future.done():
            pending.future.set_result(MessageId(-1, receipt.ledger_id, receipt.entry_id, -1))
        self._release_slot()

    def send_failed(self, error: cmd.SendError) -> None:
        pending = self._pending.pop(error.sequence_id, None)
        if pending is not None and not pending.future.done():
            pending.future.set_exception(error_for_code(error.code, error.message))
        self._release_slot()

    def connection_closed(self, reason: MiniPulsarError) -> None:
        self._closed = AlreadyClosed(f"producer {self._name}: {reason}")
        self._fail_pending(self._closed)

    def _release_slot(self) -> None:
        while self._space_waiters and len(self._pending) < self._max_pending:
            waiter = self._space_waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)

    def _fail_pending(self, error: MiniPulsarError) -> None:
        pending, self._pending = self._pending, OrderedDict()
        for item in pending.values():
            if not item.future.done():
                item.future.set_exception(error)
        for waiter in self._space_waiters:
            if not waiter.done():
                waiter.set_exception(error)
        self._space_waiters.clear()

    def _check_timeouts(self) -> None:
        self._timer = None
        now = time.monotonic()
        while self._pending:
            sequence_id, oldest = next(iter(self._pending.items()))
            if oldest.deadline > now:
                self._timer = self._loop.call_later(oldest.deadline - now, self._check_timeouts)
                return
            del self._pending[sequence_id]
            if not oldest.future.done():
                oldest.future.set_exception(Timeout(f"no receipt for message {sequence_id} within "
                                                    f"{self._send_timeout_s:.1f}s"))
            self._release_slot()
