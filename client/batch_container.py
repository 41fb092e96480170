"""What a producer holds between ``send`` and the broker's receipt: messages, batches, SEND ops.

- :class:`PendingMessage`: one message taken by the producer, until it completes (receipt,
  error or send timeout) — exactly once, through :meth:`PendingMessage.complete`.
- The batch containers collect messages until a batch is due (Pulsar's
  ``BatchMessageContainerImpl`` / ``BatchMessageKeyBasedContainer``): ``has_room`` says
  whether the next message fits (``batching_max_messages``, ``batching_max_allowed_size_in_bytes``
  of uncompressed data — a message larger than the byte limit travels alone); ``drain``
  hands the messages over as groups, one group per future entry. The default container keeps
  arrival order in one group; the key-based one keeps one group per key (ordering key, else
  partition key), ordered by each key's first arrival, so that every entry has one key.
- :class:`OpSend`: one SEND — one entry — with its encoded payload, kept until every message
  of it completed, and resent unchanged (same sequence ids, same batch boundaries: broker
  deduplication judges a batch by its first id) after a reconnection.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Any

from minipulsar.client.message_id import MessageId
from minipulsar.protocol import commands as cmd
from minipulsar.supervision import guarded

log = logging.getLogger(__name__)

Callback = Callable[[Any, "MessageId | None"], None]
"""``callback(error, message_id)``: error None on success (see Producer.send_async)."""


class PendingMessage:
    """One message from ``send`` to its completion. ``sequence_id`` is set when its batch is
    sealed (or given by the application: ``explicit_sequence_id``)."""

    __slots__ = (
        "callback",
        "data",
        "deadline",
        "done",
        "event_time_ms",
        "explicit_sequence_id",
        "future",
        "ordering_key",
        "partition_key",
        "properties",
        "sequence_id",
        "size_bytes",
        "taken",
        "waiters",
    )

    def __init__(
        self,
        data: bytes | None,
        properties: dict | None,
        partition_key: str | None,
        ordering_key: str | None,
        event_time_ms: int,
        explicit_sequence_id: int | None,
        size_bytes: int,
    ) -> None:
        self.data = data
        self.properties = properties
        self.partition_key = partition_key
        self.ordering_key = ordering_key
        self.event_time_ms = event_time_ms
        self.explicit_sequence_id = explicit_sequence_id
        self.sequence_id = -1
        self.size_bytes = size_bytes
        self.deadline = 0.0
        """Monotonic time after which the message fails with Timeout (0: never); set when taken."""
        self.future: asyncio.Future[MessageId] | None = None
        self.callback: Callback | None = None
        self.done = False
        self.waiters: list[asyncio.Future[None]] | None = None
        """Futures resolved on completion, success or not (flush)."""
        self.taken: asyncio.Future[None] | None = None
        """send_async of a waiting message: resolved when the producer takes it."""

    @property
    def batch_key(self) -> str:
        """The key-based batching key: the ordering key, else the partition key ('' if none)."""
        return self.ordering_key or self.partition_key or ""

    def complete(self, error: BaseException | None, message_id: MessageId | None) -> bool:
        """Resolve the message once; False if it was already complete."""
        if self.done:
            return False
        self.done = True
        future = self.future
        if future is not None and not future.done():
            if error is None:
                assert message_id is not None, "a message completes with its id or with an error"
                future.set_result(message_id)
            else:
                future.set_exception(error)
        if self.callback is not None:  # the application's code: its bug must not stop our bookkeeping
            guarded(log, "a send_async callback", self.callback, error, message_id)
        if self.waiters:
            for waiter in self.waiters:
                if not waiter.done():
                    waiter.set_result(None)
        return True

    def completion(self) -> asyncio.Future[None]:
        """A future resolved when the message completes, however it does."""
        waiter = asyncio.get_running_loop().create_future()
        if self.done:
            waiter.set_result(None)
        else:
            if self.waiters is None:
                self.waiters = []
            self.waiters.append(waiter)
        return waiter


class BatchContainer:
    """Default batching: one batch in arrival order."""

    __slots__ = ("max_bytes", "max_messages", "messages", "size_bytes")

    def __init__(self, max_messages: int, max_bytes: int) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.messages: list[PendingMessage] = []
        self.size_bytes = 0

    def __len__(self) -> int:
        return len(self.messages)

    def has_room(self, message: PendingMessage) -> bool:
        """Whether ``message`` may join the current batch (an empty batch takes anything)."""
        return not self.messages or (
            len(self.messages) < self.max_messages and self.size_bytes + message.size_bytes <= self.max_bytes
        )

    def add(self, message: PendingMessage) -> bool:
        """Take ``message`` (call :meth:`has_room` first); True when the batch is now full."""
        self.messages.append(message)
        self.size_bytes += message.size_bytes
        return len(self.messages) >= self.max_messages or self.size_bytes >= self.max_bytes

    def drain(self) -> list[list[PendingMessage]]:
        """The messages as groups, each to become entries in order; the container is empty after."""
        messages, self.messages, self.size_bytes = self.messages, [], 0
        return [messages] if messages else []


class KeyBasedBatchContainer(BatchContainer):
    """Key-based batching: one group per key, ordered by the key's first message."""

    __slots__ = ()

    def drain(self) -> list[list[PendingMessage]]:
        groups: dict[str, list[PendingMessage]] = {}
        for message in self.messages:
            groups.setdefault(message.batch_key, []).append(message)
        self.messages, self.size_bytes = [], 0
        return list(groups.values())


class OpSend:
    """One SEND in flight (or waiting for a connection): messages with increasing sequence ids."""

    __slots__ = ("command", "messages")

    def __init__(self, messages: list[PendingMessage], command: cmd.Send) -> None:
        assert messages and all(a.sequence_id < b.sequence_id for a, b in itertools.pairwise(messages))
        self.messages = messages
        """In sequence order; some may complete early (send timeout) while the op stays pending."""
        self.command = command

    @property
    def sequence_id(self) -> int:
        return self.messages[0].sequence_id

    @property
    def highest_sequence_id(self) -> int:
        return self.messages[-1].sequence_id
