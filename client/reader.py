"""Reader: read a topic from a chosen message id, without a durable subscription.

On the wire a Reader is a consumer on a non-durable, Exclusive subscription (SUBSCRIBE with
``durable=False``) that the broker starts at ``start_message_id`` — always *at* that entry,
inclusive, and always at the entry, never inside a batch. The Reader makes the rest of
Pulsar's semantics client-side, by skipping:

- exclusive start (the default): the message at the start id is skipped; for an id without a
  batch index the whole entry is, for an id inside a batch the members up to and including it;
- inclusive start: the members of the start entry before the start's batch index are skipped;
- anything at or before the last message returned, so that a consumer that resubscribed from
  an earlier position (after a reconnection) delivers nothing twice.

``seek`` (a message id or a publish time in ms) applies the same rules from the new position.
Messages read are acknowledged cumulatively in the background (one ack in flight, the newest
wins), as Pulsar's ReaderImpl, so that the broker's cursor and caches follow the reader.

``has_message_available``: a message already received and not yet read, or the broker's last
entry beyond what was read (or beyond the start). When the only candidates are messages of the
start entry that the exclusive rule may skip, or the position is unknown (after a seek by
time), it waits (up to the operation timeout) for the broker's delivery to find out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from minipulsar.client.exceptions import Timeout
from minipulsar.client.message_id import MessageId, is_earliest, is_latest
from minipulsar.errors import MiniPulsarError

log = logging.getLogger(__name__)

POLL_MILLIS = 1
"""A receive that only takes what is queued already."""


class Reader:
    def __init__(self, consumer: Any, start: MessageId, *, inclusive: bool, operation_timeout_s: float) -> None:
        self._consumer = consumer
        self._inclusive = inclusive
        self._operation_timeout_s = operation_timeout_s
        self._skip_to: MessageId | None = None
        """Concrete start (or seek target): messages of its entry are filtered; None once passed."""
        self._last_read: MessageId | None = None
        self._reference: tuple[int, int] | None = None
        """(ledger, entry) after which unread entries begin, when nothing was read since the
        start or seek; None: unknown (a seek by time)."""
        self._peeked: Any = None
        self._ack_latest: MessageId | None = None
        self._ack_task: asyncio.Task | None = None
        self._reset(start)

    @classmethod
    async def create(cls, consumer: Any, start: MessageId, *, inclusive: bool, operation_timeout_s: float) -> Reader:
        reader = cls(consumer, start, inclusive=inclusive, operation_timeout_s=operation_timeout_s)
        if is_latest(start):  # the broker started after its last entry at subscribe time
            last = await consumer.get_last_message_id()
            reader._reference = (last.ledger_id(), last.entry_id())
        return reader

    # -- the pulsar API -------------------------------------------------------------------------

    def topic(self) -> str:
        return self._consumer.topic()

    def is_connected(self) -> bool:
        return self._consumer.is_connected()

    async def read_next(self, timeout_millis: int | None = None) -> Any:
        """The next message; waits for one (up to ``timeout_millis``, then raises Timeout)."""
        if self._peeked is not None:
            message, self._peeked = self._peeked, None
            return self._read(message)
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        while True:
            remaining_ms = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
            if remaining_ms == 0:
                raise Timeout(f"no message within {timeout_millis} ms")
            message = await self._consumer.receive(remaining_ms)
            if self._wanted(message.message_id()):
                return self._read(message)

    async def has_message_available(self) -> bool:
        """Whether :meth:`read_next` would return a message now or once it arrives."""
        if self._peeked is not None:
            return True
        last = await self._consumer.get_last_message_id()
        if last.entry_id() < 0:  # the topic holds no entry
            return await self._peek(POLL_MILLIS)
        last_entry = (last.ledger_id(), last.entry_id())
        skip = self._skip_to
        if skip is not None:  # nothing read since a start or seek at a message id
            start_entry = (skip.ledger_id(), skip.entry_id())
            if last_entry != start_entry:
                return last_entry > start_entry
            if self._inclusive or skip.batch_index() < 0:
                return self._inclusive
            return await self._peek(self._operation_timeout_ms())  # does the batch go on after the start?
        position = self._position()
        if position is None:  # after a seek by time: the broker's delivery decides
            return await self._peek(self._operation_timeout_ms())
        if last_entry > position:
            return True
        return await self._peek(POLL_MILLIS)  # e.g. the rest of a batch read halfway

    async def seek(self, target: MessageId | int) -> None:
        """Move to a message id (with the start rules) or to the first message published at or
        after ``target`` ms since the epoch."""
        if not isinstance(target, (MessageId, int)) or isinstance(target, bool):
            raise TypeError(f"seek takes a MessageId or a timestamp in ms, not {type(target).__name__}")
        await self._consumer.seek(target)
        self._reset(target)

    async def close(self) -> None:
        if self._ack_task is not None:
            self._ack_task.cancel()
        await self._consumer.close()

    # -- filtering ------------------------------------------------------------------------------

    def _reset(self, start: MessageId | int) -> None:
        self._peeked = None
        self._last_read = None
        self._skip_to = None
        self._ack_latest = None
        if isinstance(start, int):
            self._reference = None
        elif is_earliest(start):
            self._reference = (-1, -1)
        elif is_latest(start):
            self._reference = (2**63 - 1, 2**63 - 1)  # nothing beyond, until create() asks the broker
        else:
            self._skip_to = start
            self._reference = (start.ledger_id(), start.entry_id() - 1)

    def _wanted(self, message_id: MessageId) -> bool:
        if self._last_read is not None and _triple(message_id) <= _triple(self._last_read):
            return False  # delivered again after a resubscription
        skip = self._skip_to
        if skip is None:
            return True
        entry, start_entry = (message_id.ledger_id(), message_id.entry_id()), (skip.ledger_id(), skip.entry_id())
        if entry != start_entry:
            return entry > start_entry
        if skip.batch_index() < 0:
            return self._inclusive
        index = message_id.batch_index()
        return index > skip.batch_index() or (index == skip.batch_index() and self._inclusive)

    def _position(self) -> tuple[int, int] | None:
        """(ledger, entry) of the last entry read from, or the reference before any read."""
        if self._last_read is not None:
            return (self._last_read.ledger_id(), self._last_read.entry_id())
        return self._reference

    async def _peek(self, first_timeout_millis: int) -> bool:
        """Wait up to ``first_timeout_millis`` for a first message, then take what is queued,
        until one is to be read: keep it for read_next. An entry comes whole, so once one
        message of it is here the rest are queued too."""
        timeout_millis = first_timeout_millis
        while self._peeked is None:
            try:
                message = await self._consumer.receive(timeout_millis)
            except Timeout:
                return False
            if self._wanted(message.message_id()):
                self._peeked = message
            timeout_millis = POLL_MILLIS
        return True

    def _operation_timeout_ms(self) -> int:
        return int(self._operation_timeout_s * 1000)

    # -- acknowledging --------------------------------------------------------------------------

    def _read(self, message: Any) -> Any:
        self._last_read = message.message_id()
        self._skip_to = None
        self._ack_latest = self._last_read
        if self._ack_task is None or self._ack_task.done():
            self._ack_task = asyncio.get_running_loop().create_task(self._acknowledge())
        return message

    async def _acknowledge(self) -> None:
        """Cumulative acks of the newest message read, one at a time, until caught up."""
        while self._ack_latest is not None:
            message_id, self._ack_latest = self._ack_latest, None
            try:
                await self._consumer.acknowledge_cumulative(message_id)
            except MiniPulsarError as error:  # the reader goes on; the next ack covers this one
                log.debug("reader of %s: cumulative ack of %s failed: %s", self.topic(), message_id, error)


def _triple(message_id: MessageId) -> tuple[int, int, int]:
    return (message_id.ledger_id(), message_id.entry_id(), message_id.batch_index())
