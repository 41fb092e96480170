"""Producer: batch messages into entries, send them pipelined, and survive reconnections.

A message goes through four places, and is *complete* — its receipt, error or timeout
delivered to ``send``'s awaiter or ``send_async``'s callback — exactly once:

1. **waiting** (only with ``block_if_queue_full``): the producer holds ``max_pending_messages``
   messages, or the client's ``memory_limit_bytes`` are used up; waiting messages are taken in
   order as others complete. Without blocking, a full producer fails the send at once with
   ProducerQueueIsFull (MemoryBufferIsFull for the memory limit).
2. **batch container**: messages wait for their batch to be sealed — when it holds
   ``batching_max_messages``, or ``batching_max_allowed_size_in_bytes`` of data, or
   ``batching_max_publish_delay_ms`` after its first message, or on ``flush``/``close`` — or
   at once when taking a message makes the producer hold ``max_pending_messages``: nothing can
   join the batch until a receipt frees room, so waiting out the delay would only add latency
   (Pulsar's client waits; under full load that is a whole batch delay per round trip). Sealing
   gives each message its sequence id (the application's, else the next of this producer's) and
   turns the batch into one or more SEND ops (one per key with KeyBased batching; a new op
   where an application-given id does not increase). Without batching each message is an op.
3. **pending ops**: the SEND went out (or will, once connected); ``SEND.highest_sequence_id``
   covers the batch. Receipts are matched by the op's first sequence id.
4. complete.

Reconnection (:mod:`client.connection_handler`): when the connection drops, the broker closes
the producer (topic unloaded), or a send fails for a transient reason, the pending ops stay
where they are; the handler looks the topic up again and re-creates the producer *under the
same name*, and :meth:`attach` resends every pending op in order, byte for byte (same
batches, same sequence ids). With broker deduplication the broker answers what it had
already stored as a duplicate, so nothing is lost or stored twice.

Send timeouts (``send_timeout_millis``, 0: off) are per message, counted from the moment the
producer took it: one timer per producer fails exactly the messages whose time is up —
nothing else — and the producer goes on (an op whose messages all timed out is dropped and
not resent).

Sequence ids count from ``initial_sequence_id + 1``; without one, a producer that reuses a
``producer_name`` continues after the ``last_sequence_id`` the broker reports for that name
(brokers with deduplication remember it), as Pulsar's producer does.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from minipulsar.client.batch_container import (
    BatchContainer,
    Callback,
    Extra,
    Group,
    KeyBasedBatchContainer,
    OpSend,
    WaitingMessage,
    future_sink,
    resolve,
    size_of,
)
from minipulsar.client.connection_handler import ConnectionHandler
from minipulsar.client.enums import BatchingType
from minipulsar.client.exceptions import AlreadyClosed, MemoryBufferIsFull, ProducerQueueIsFull, Timeout
from minipulsar.client.memory_limit import MemoryLimitController
from minipulsar.client.message_id import MessageId, batch_message_ids
from minipulsar.client.producer_config import MAX_MESSAGE_SIZE_BYTES, ProducerConfig
from minipulsar.errors import (
    ErrorCode,
    MiniPulsarError,
    RequestTimeoutError,
    error_for_code,
)
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.batch import Row, encode_rows
from minipulsar.supervision import guarded, guarded_each

if TYPE_CHECKING:
    from minipulsar.client.connection import ClientConnection, ConnectionPool
    from minipulsar.client.lookup import LookupService

log = logging.getLogger(__name__)

_producer_ids = itertools.count(1)

BATCH_BYTES_MAX = 4 * 1024 * 1024
"""Cap on ``batching_max_allowed_size_in_bytes``: a sealed batch (data plus per-message
overhead) must stay inside the broker's 5 MiB + 64 KiB frames."""
FAILING_SEND_ERRORS = (ErrorCode.INVALID_COMMAND.value, ErrorCode.TOO_LARGE.value)
"""SEND_ERROR codes that fail the op's messages; any other makes the producer reconnect and
resend (Pulsar's ClientCnx: "for transient errors, let the reconnection logic take place")."""


class Producer:
    def __init__(
        self,
        topic: str,
        config: ProducerConfig,
        *,
        pool: ConnectionPool,
        lookup: LookupService,
        memory: MemoryLimitController,
        operation_timeout_s: float,
    ) -> None:
        self._topic = topic
        self._config = config
        self._producer_id = next(_producer_ids)
        self._name = config.producer_name or ""
        self._memory = memory
        self._operation_timeout_s = operation_timeout_s
        self._loop = asyncio.get_running_loop()
        self._handler = ConnectionHandler(
            self,
            topic,
            pool,
            lookup,
            operation_timeout_s=operation_timeout_s,
            description=f"producer {self._name or self._producer_id} on {topic}",
        )
        self._connection: ClientConnection | None = None
        """Set while attached: ops are sent as they are sealed. None: they wait for attach."""
        self._send_timeout_s = config.send_timeout_millis / 1000
        self._codec = config.codec
        self._container: BatchContainer | None = None
        if config.batching_enabled:
            kind = KeyBasedBatchContainer if config.batching_type is BatchingType.KeyBased else BatchContainer
            self._container = kind(
                config.batching_max_messages, min(config.batching_max_allowed_size_in_bytes, BATCH_BYTES_MAX)
            )
        self._batch_delay_s = config.batching_max_publish_delay_ms / 1000
        self._batch_timer: asyncio.Handle | None = None
        self._pending: OrderedDict[int, OpSend] = OrderedDict()
        self._waiting: deque[WaitingMessage] = deque()
        self._max_pending = config.max_pending_messages
        self._outstanding = 0
        """Messages taken (in the container or in ops) and not complete: bounded by max_pending_messages."""
        self._full_reason = ""
        start = config.initial_sequence_id + 1 if config.initial_sequence_id is not None else 0
        self._next_sequence_id = start
        self._last_sequence_id = start - 1
        self._flush_through: WaitingMessage | None = None
        """A waiting message a flush waits for: its batch is sealed as soon as it is taken."""
        self._timeout_timer: asyncio.TimerHandle | None = None
        self._created = False
        self._closing = False
        self._closed: MiniPulsarError | None = None
        self._taken: asyncio.Future[None] = self._loop.create_future()
        """What send_async returns for a message taken at once (awaiting it returns at once)."""
        self._taken.set_result(None)

    async def _start(self) -> None:
        """Create the producer on the broker (lookup, connect, PRODUCER), retried until the
        operation timeout; raises the error that ended it."""
        await self._handler.start()

    # -- the pulsar API -------------------------------------------------------------------------

    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._name

    def last_sequence_id(self) -> int:
        """The highest sequence id the broker acknowledged (or reported on creation); -1: none."""
        return self._last_sequence_id

    def is_connected(self) -> bool:
        return self._closed is None and self._handler.is_connected

    async def send(
        self,
        content: bytes | None,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool | None = None,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: Any = None,
    ) -> MessageId:
        """Publish one message; returns its id once the broker stored it durably.

        ``sequence_id`` (>= 0) replaces the next automatic one; a duplicate the broker
        recognises is acknowledged with the id ``(-1, -1)`` and not stored again.
        ``replication_clusters``/``disable_replication`` are accepted and ignored (one cluster).

        Raises:
            ProducerQueueIsFull: the producer is full and ``block_if_queue_full`` is off.
            Timeout: no receipt within ``send_timeout_millis``.
            AlreadyClosed: the producer is closed.
            TypeError / ValueError: bad content or arguments (e.g. a str, or a message over 5 MiB).
        """
        content, size = _checked_content(content)
        extra = None
        if (
            properties is not None
            or partition_key is not None
            or ordering_key is not None
            or sequence_id is not None
            or event_timestamp
            or deliver_at is not None
            or deliver_after is not None
        ):
            extra = _extra(
                properties, partition_key, ordering_key, sequence_id, event_timestamp, deliver_at, deliver_after
            )
        future: asyncio.Future[MessageId] = self._loop.create_future()
        error, waiting = self._submit(content, size, future_sink(future), extra)
        if error is not None:
            raise error
        if waiting is not None:
            waiting.future = future
        return await future

    def send_async(
        self,
        content: bytes | None,
        callback: Callback,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool | None = None,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: Any = None,
    ) -> asyncio.Future[None]:
        """Publish without waiting for the receipt: ``callback(error, message_id)`` runs once
        the message is complete — ``error`` None and ``message_id`` set on success (the
        official client passes ``pulsar.Result.Ok``); an exception and None otherwise,
        including ProducerQueueIsFull when the producer is full and does not block (called from
        the event loop, not from inside this call). Bad arguments raise here.

        With ``block_if_queue_full`` a full producer keeps the message waiting, in order. The
        returned future resolves once the producer has taken the message (at once when there
        was room): ``await producer.send_async(...)`` is the blocking send of the official
        client, which bounds the caller; ignoring it queues without bound.
        """
        if content.__class__ is bytes:  # the hot path: checks inline
            size = len(content)
            if size > MAX_MESSAGE_SIZE_BYTES:
                _checked_content(content)
        else:
            content, size = _checked_content(content)
        extra = None
        if (
            properties is not None
            or partition_key is not None
            or ordering_key is not None
            or sequence_id is not None
            or event_timestamp
            or deliver_at is not None
            or deliver_after is not None
        ):
            extra = _extra(
                properties, partition_key, ordering_key, sequence_id, event_timestamp, deliver_at, deliver_after
            )
        container = self._container
        limit = self._max_pending
        if (
            container is not None
            and not self._waiting
            and not self._closing
            and self._closed is None
            and (not limit or self._outstanding < limit)
            and self._memory.try_reserve(size)
        ):  # the hot path: _take inlined
            self._outstanding += 1
            datas = container.datas
            if datas and (len(datas) >= container.max_messages or container.size_bytes + size > container.max_bytes):
                self._seal()
                datas = container.datas
            datas.append(content)
            container.sinks.append(callback)
            container.extras.append(extra)
            if self._send_timeout_s:
                container.deadlines.append(time.monotonic() + self._send_timeout_s)
            container.size_bytes += size
            if (
                len(datas) >= container.max_messages
                or container.size_bytes >= container.max_bytes
                or self._outstanding == limit
            ):
                self._seal()
            elif self._batch_timer is None:
                self._arm_batch_timer()
            return self._taken
        error, waiting = self._submit(content, size, callback, extra)
        if error is not None:
            self._loop.call_soon(callback, error, None)
        elif waiting is not None:  # tell the caller when the message is taken
            waiting.taken = self._loop.create_future()
            return waiting.taken
        return self._taken

    async def flush(self) -> None:
        """Seal the current batch and wait until every message sent before this call is
        complete (stored, failed or timed out)."""
        waits = []
        if self._waiting:  # seal the last one's batch as soon as it is taken, not after the delay
            last = self._waiting[-1]
            self._flush_through = last
            waits.append(last.completion())
        self._seal()
        waits += [op.completion() for op in self._pending.values()]
        if waits:
            await asyncio.gather(*waits)

    async def close(self) -> None:
        """Flush (within the operation timeout), then close the producer on the broker; what
        is still pending then fails with AlreadyClosed."""
        if self._closing:
            return
        self._closing = True
        try:
            await asyncio.wait_for(self.flush(), self._operation_timeout_s)
        except (TimeoutError, MiniPulsarError):
            pass
        self._closed = AlreadyClosed(f"producer {self._name} on {self._topic} is closed")
        self._handler.close()
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.producers.pop(self._producer_id, None)
            if connection.is_open:
                try:
                    await connection.request(cmd.CloseProducer, producer_id=self._producer_id)
                except MiniPulsarError:
                    pass
        self._fail_everything(self._closed)

    # -- taking messages ------------------------------------------------------------------------

    def _submit(
        self, data: bytes | None, size: int, sink: Callback, extra: Extra | None
    ) -> tuple[MiniPulsarError | None, WaitingMessage | None]:
        """Take the message now, queue it (blocking mode: the WaitingMessage) or say why not."""
        if self._closing or self._closed is not None:
            return self._closed or AlreadyClosed(f"producer {self._name} on {self._topic} is closing"), None
        if not self._waiting:
            limit = self._max_pending
            if (not limit or self._outstanding < limit) and self._memory.try_reserve(size):
                self._outstanding += 1
                self._take(data, size, sink, extra)
                return None, None
            self._note_full(size)
        if not self._config.block_if_queue_full:
            if self._full_reason == "memory":
                return MemoryBufferIsFull(
                    f"the client's memory limit of {self._memory.limit_bytes} bytes of pending messages is used up"
                ), None
            return ProducerQueueIsFull(
                f"{self._config.max_pending_messages} messages are pending on producer {self._name} of {self._topic}"
            ), None
        waiting = WaitingMessage(data, size, sink, extra)
        self._waiting.append(waiting)
        return None, waiting

    def _note_full(self, size: int) -> None:
        """Why a message of ``size`` could not be taken; blocked on memory: ask to be told."""
        limit = self._max_pending
        if limit and self._outstanding >= limit:
            self._full_reason = "count"
            return
        self._full_reason = "memory"
        if self._waiting or self._config.block_if_queue_full:
            self._memory.wait(self, self._admit_waiting)

    def _admit_waiting(self) -> None:
        """Take waiting messages, oldest first, while there is room."""
        waiting = self._waiting
        limit = self._max_pending
        while waiting:
            message = waiting[0]
            if message.future is not None and message.future.cancelled():  # its sender gave up
                waiting.popleft()
                message.done = True
                resolve(message.waiters)
                continue
            if (limit and self._outstanding >= limit) or not self._memory.try_reserve(message.size_bytes):
                self._note_full(message.size_bytes)
                return
            self._outstanding += 1
            waiting.popleft()
            self._take(message.data, message.size_bytes, message.taken_sink(), message.extra)
            taken = message.taken
            if taken is not None and not taken.done():
                taken.set_result(None)
            if message is self._flush_through:
                self._flush_through = None
                self._seal()

    def _take(self, data: bytes | None, size: int, sink: Callback, extra: Extra | None) -> None:
        """Put a message admitted (counted and reserved) into the batch, or make it an op.
        send_async has a copy of the batched case inline."""
        container = self._container
        if container is None:  # unbatched: the message is an op of its own
            deadlines = [time.monotonic() + self._send_timeout_s] if self._send_timeout_s else []
            if extra is None or extra.explicit_sequence_id is None:
                first = self._next_sequence_id
                self._next_sequence_id = first + 1
                self._add_op([data], [sink], [extra], deadlines, range(first, first + 1), size)
            else:
                self._add_op([data], [sink], [extra], deadlines, [extra.explicit_sequence_id], size)
            return
        datas = container.datas
        if datas and (len(datas) >= container.max_messages or container.size_bytes + size > container.max_bytes):
            self._seal()
            datas = container.datas
        datas.append(data)
        container.sinks.append(sink)
        container.extras.append(extra)
        if self._send_timeout_s:
            container.deadlines.append(time.monotonic() + self._send_timeout_s)
        container.size_bytes += size
        if (
            len(datas) >= container.max_messages
            or container.size_bytes >= container.max_bytes
            or self._outstanding == self._max_pending
        ):
            self._seal()
        elif self._batch_timer is None:
            self._arm_batch_timer()

    def _arm_batch_timer(self) -> None:
        if self._batch_delay_s > 0:
            self._batch_timer = self._loop.call_later(self._batch_delay_s, self._batch_due)
        else:  # no delay: batch what arrives within this loop iteration
            self._batch_timer = self._loop.call_soon(self._batch_due)

    def _batch_due(self) -> None:
        self._batch_timer = None
        self._seal()

    # -- sealing batches into ops ---------------------------------------------------------------

    def _seal(self) -> None:
        container = self._container
        if container is not None and container.datas:
            for group in container.drain():
                self._seal_group(group)

    def _seal_group(self, group: Group) -> None:
        """Give ``group`` its sequence ids and turn it into ops (a new op wherever an
        application-given id does not increase)."""
        datas, sinks, extras, deadlines, size = group
        count = len(datas)
        first = self._next_sequence_id
        if extras.count(None) == count or all(e is None or e.explicit_sequence_id is None for e in extras):
            self._next_sequence_id = first + count
            self._add_op(datas, sinks, extras, deadlines, range(first, first + count), size)
            return
        ids: list[int] = []
        start = 0
        for index, extra in enumerate(extras):
            explicit = None if extra is None else extra.explicit_sequence_id
            if explicit is None:
                explicit, self._next_sequence_id = self._next_sequence_id, self._next_sequence_id + 1
            if ids and explicit <= ids[-1]:
                self._add_op(
                    datas[start:index], sinks[start:index], extras[start:index], deadlines[start:index], ids, -1
                )
                ids, start = [], index
            ids.append(explicit)
        self._add_op(datas[start:], sinks[start:], extras[start:], deadlines[start:], ids, -1)

    def _add_op(
        self,
        datas: list[bytes | None],
        sinks: list[Callback | None],
        extras: list[Extra | None],
        deadlines: list[float],
        sequence_ids: Sequence[int],
        size: int,
    ) -> None:
        """One SEND of these messages (``size``: their data, -1: not counted yet)."""
        if size < 0:
            size = size_of(datas)
        first = sequence_ids[0]
        if first in self._pending:
            self._outstanding -= len(sinks)
            self._memory.release(size)
            error = ValueError(f"sequence_id {first} is already pending on producer {self._name}")
            guarded_each(log, "a send_async callback", sinks, error, [None] * len(sinks))  # type: ignore[arg-type]
            return
        if len(datas) == 1 and extras[0] is None:
            rows = [(first, datas[0], None, None, 0)]
        elif extras.count(None) == len(extras):
            rows = [(s, d, None, None, 0) for s, d in zip(sequence_ids, datas, strict=True)]
        else:
            rows = [_row(s, d, e) for s, d, e in zip(sequence_ids, datas, extras, strict=True)]
        command = cmd.Send(
            producer_id=self._producer_id,
            sequence_id=first,
            payload=encode_rows(int(time.time() * 1000), self._name, rows, self._codec),
            num_messages=len(rows),
            highest_sequence_id=sequence_ids[-1],
        )
        self._pending[first] = OpSend(command, datas, sinks, sequence_ids, deadlines, size)
        if self._connection is not None:
            self._connection.send(command)
        if self._timeout_timer is None and self._send_timeout_s:
            self._arm_timeout()

    # -- from the connection --------------------------------------------------------------------

    def receipt_received(self, receipt: cmd.SendReceipt) -> None:
        op = self._pending.pop(receipt.sequence_id, None)
        if op is None:  # its messages timed out, or a second receipt after a resend
            return
        count = len(op.sinks)
        ledger_id, entry_id = receipt.ledger_id, receipt.entry_id
        ids = batch_message_ids(ledger_id, entry_id, count) if count > 1 else [MessageId(-1, ledger_id, entry_id, -1)]
        highest = op.sequence_ids[-1]
        if highest > self._last_sequence_id:
            self._last_sequence_id = highest
        self._complete_op(op, None, ids)
        if self._waiting:
            self._admit_waiting()

    def _complete_op(self, op: OpSend, error: BaseException | None, ids: list[MessageId] | None) -> None:
        """Complete the op's open messages (it is no longer pending), with ``ids`` or ``error``."""
        sinks = op.sinks
        if op.open != len(sinks):  # some completed early: only the others
            open_ = [i for i, sink in enumerate(sinks) if sink is not None]
            sinks = [sinks[i] for i in open_]
            if ids is not None:
                ids = [ids[i] for i in open_]
        count, size = op.open, op.size_bytes
        op.open, op.size_bytes = 0, 0
        self._outstanding -= count
        self._memory.release(size)
        guarded_each(log, "a send_async callback", sinks, error, ids if ids is not None else [None] * count)  # type: ignore[arg-type]
        if op.waiters:
            resolve(op.waiters)

    def send_failed(self, failure: cmd.SendError) -> None:
        error = error_for_code(failure.code, failure.message)
        if failure.code in FAILING_SEND_ERRORS:
            op = self._pending.pop(failure.sequence_id, None)
            if op is not None:
                self._complete_op(op, error, None)
            if self._waiting:
                self._admit_waiting()
            return
        log.info(
            "producer %s on %s: send %d failed (%s: %s); re-creating the producer to resend",
            self._name,
            self._topic,
            failure.sequence_id,
            failure.code,
            failure.message,
        )
        connection = self._connection
        if connection is not None:
            connection.producers.pop(self._producer_id, None)
            connection.send(cmd.CloseProducer(producer_id=self._producer_id))
        self._detach(None)

    def closed_by_broker(self, assigned_broker_url: str | None) -> None:
        log.info(
            "producer %s on %s: closed by the broker%s",
            self._name,
            self._topic,
            f"; new owner {assigned_broker_url}" if assigned_broker_url else "",
        )
        self._detach(assigned_broker_url)

    def connection_closed(self, reason: MiniPulsarError) -> None:
        log.info("producer %s on %s: %s", self._name, self._topic, reason)
        self._detach(None)

    def _detach(self, assigned_broker_url: str | None) -> None:
        self._connection = None
        if self._closed is None:
            self._handler.detached(assigned_broker_url)

    # -- (re)attaching ----------------------------------------------------------------------------

    async def attach(self, connection: ClientConnection, timeout_s: float) -> None:
        """PRODUCER under our name, then resend every pending op in order (ConnectionHandler hook)."""
        try:
            response = await connection.request(
                cmd.Producer,
                timeout_s=timeout_s,
                topic=self._topic,
                producer_id=self._producer_id,
                producer_name=self._name or None,
            )
        except RequestTimeoutError:  # the broker may still create it: don't leave it behind
            connection.send(cmd.CloseProducer(producer_id=self._producer_id))
            raise
        assert isinstance(response, cmd.ProducerSuccess)
        if self._closed is not None or (self._closing and not self._created):
            connection.send(cmd.CloseProducer(producer_id=self._producer_id))
            raise self._closed or AlreadyClosed(f"producer on {self._topic} is closed")
        if not self._created:
            self._created = True
            self._name = response.producer_name
            self._handler.description = f"producer {self._name} on {self._topic}"
            if self._config.initial_sequence_id is None and response.last_sequence_id >= 0:
                self._last_sequence_id = response.last_sequence_id
                self._next_sequence_id = response.last_sequence_id + 1
        connection.producers[self._producer_id] = self
        self._connection = connection
        for op in self._pending.values():
            connection.send(op.command)

    def attach_failed(self, error: MiniPulsarError) -> None:
        self._closed = error
        self._fail_everything(error)

    # -- completion -----------------------------------------------------------------------------

    def _complete_one(self, op: OpSend, index: int, error: BaseException) -> None:
        """Fail one open message of a pending op (its send timeout)."""
        sink = op.sinks[index]
        assert sink is not None
        op.sinks[index] = None
        op.open -= 1
        data = op.datas[index]
        size = len(data) if data is not None else 0
        op.size_bytes -= size
        self._outstanding -= 1
        self._memory.release(size)
        guarded(log, "a send_async callback", sink, error, None)

    def _fail_everything(self, error: MiniPulsarError) -> None:
        """Fail every message not yet complete, in the order they were sent."""
        for timer in (self._batch_timer, self._timeout_timer):
            if timer is not None:
                timer.cancel()
        self._batch_timer = self._timeout_timer = None
        self._memory.forget(self)
        ops, self._pending = self._pending, OrderedDict()
        for op in ops.values():
            self._complete_op(op, error, None)
        if self._container is not None:
            for group in self._container.drain():
                self._outstanding -= len(group.sinks)
                self._memory.release(group.size_bytes)
                guarded_each(log, "a send_async callback", group.sinks, error, [None] * len(group.sinks))  # type: ignore[arg-type]
        waiting, self._waiting = self._waiting, deque()
        for message in waiting:
            message.done = True
            guarded(log, "a send_async callback", message.sink, error, None)
            resolve(message.waiters)
            if message.taken is not None and not message.taken.done():
                message.taken.set_result(None)  # the callback has the error

    # -- send timeouts --------------------------------------------------------------------------

    def _arm_timeout(self) -> None:
        deadline = self._earliest_deadline()
        if deadline is not None:
            self._timeout_timer = self._loop.call_at(
                self._loop.time() + max(0.0, deadline - time.monotonic()), self._timeouts_due
            )

    def _earliest_deadline(self) -> float | None:
        for op in self._pending.values():  # ops and their messages are in arrival order
            for index, sink in enumerate(op.sinks):
                if sink is not None:
                    return op.deadlines[index]
        return None

    def _timeouts_due(self) -> None:
        """Fail exactly the messages whose send timeout has passed; drop ops left empty."""
        self._timeout_timer = None
        now = time.monotonic()
        emptied = []
        for first, op in self._pending.items():
            for index, deadline in enumerate(op.deadlines):
                if op.sinks[index] is None:
                    continue
                if deadline > now:
                    break
                self._complete_one(
                    op,
                    index,
                    Timeout(
                        f"message {op.sequence_ids[index]} of producer {self._name} on {self._topic}: no receipt "
                        f"within {self._config.send_timeout_millis} ms"
                    ),
                )
            if op.open == 0:
                emptied.append(first)
        for first in emptied:
            resolve(self._pending.pop(first).waiters)
        if self._pending:
            self._arm_timeout()
        if self._waiting:
            self._admit_waiting()


def _checked_content(content: Any) -> tuple[bytes | None, int]:
    """``content`` as bytes (or None) and its size.

    Raises:
        TypeError: not bytes, bytearray, memoryview or None.
        ValueError: larger than the 5 MiB maximum.
    """
    if content is not None and not isinstance(content, bytes):
        if not isinstance(content, (bytearray, memoryview)):
            raise TypeError(f"content must be bytes or None, not {type(content).__name__}")
        content = bytes(content)
    size = len(content) if content is not None else 0
    if size > MAX_MESSAGE_SIZE_BYTES:
        raise ValueError(f"message of {size} bytes is larger than the {MAX_MESSAGE_SIZE_BYTES}-byte maximum")
    return content, size


def _extra(
    properties: Any,
    partition_key: str | None,
    ordering_key: str | None,
    sequence_id: Any,
    event_timestamp: int | None,
    deliver_at: int | None,
    deliver_after: Any,
) -> Extra:
    """A message's extra, checked.

    Raises:
        TypeError / ValueError: bad properties, sequence id, or delayed delivery (unsupported).
    """
    if properties is not None and not (
        isinstance(properties, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items())
    ):
        raise TypeError("properties must be a dict of str to str")
    if sequence_id is not None and (not isinstance(sequence_id, int) or sequence_id < 0):
        raise ValueError(f"sequence_id must be an int >= 0, got {sequence_id!r}")
    if deliver_at is not None or deliver_after is not None:
        raise ValueError("delayed delivery (deliver_at, deliver_after) is not supported by minipulsar")
    return Extra(partition_key, properties or None, event_timestamp or 0, ordering_key, sequence_id)


def _row(sequence_id: int, data: bytes | None, extra: Extra | None) -> Row:
    """The batch row of a message (:mod:`protocol.batch`)."""
    if extra is None:
        return (sequence_id, data, None, None, 0)
    if extra.ordering_key is None:
        return (sequence_id, data, extra.partition_key, extra.properties, extra.event_time_ms)
    return (sequence_id, data, extra.partition_key, extra.properties, extra.event_time_ms, extra.ordering_key)
