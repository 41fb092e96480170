"""What a producer holds between ``send`` and the broker's receipt: batches and SEND ops.

A taken message is not an object: it is its place in a few parallel lists — its data, its
*sink* (the ``callback(error, message_id)`` that completes it), its *extra* (None for a plain
message, else :class:`Extra`: key, properties, event time, ordering key, explicit sequence
id) and, with send timeouts, its deadline. A batched message costs a handful of list appends;
completing an entry's messages is one loop.

- The batch containers collect messages until a batch is due (Pulsar's
  ``BatchMessageContainerImpl`` / ``BatchMessageKeyBasedContainer``): :meth:`BatchContainer.has_room`
  says whether the next message fits (``batching_max_messages``,
  ``batching_max_allowed_size_in_bytes`` of uncompressed data — a message larger than the
  byte limit travels alone); :meth:`BatchContainer.drain` hands the messages over as
  :class:`Group`\\ s, one per future entry. The default container keeps arrival order in one
  group; the key-based one keeps one group per key (ordering key, else partition key),
  ordered by each key's first arrival, so that every entry has one key.
- :class:`OpSend`: one SEND — one entry — with its encoded command, kept until every message
  of it completed, and resent unchanged (same sequence ids, same batch boundaries: broker
  deduplication judges a batch by its first id) after a reconnection. A message is complete
  when its sink is cleared (None): that is what makes completion happen exactly once.
- :class:`WaitingMessage`: a message the producer could not take yet (``block_if_queue_full``).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from minipulsar.client.message_id import MessageId
from minipulsar.protocol import commands as cmd

Callback = Callable[[Any, "MessageId | None"], None]
"""``callback(error, message_id)``: error None on success (see Producer.send_async)."""


class Extra(NamedTuple):
    """What a message has beyond its data (most have nothing: their extra is None)."""

    partition_key: str | None
    properties: dict[str, str] | None
    event_time_ms: int
    ordering_key: str | None
    explicit_sequence_id: int | None

    @property
    def batch_key(self) -> str:
        """The key-based batching key: the ordering key, else the partition key ('' if none)."""
        return self.ordering_key or self.partition_key or ""


class Group(NamedTuple):
    """Messages to become entries, as parallel lists (``deadlines`` empty without send timeouts)."""

    datas: list[bytes | None]
    sinks: list[Callback | None]
    extras: list[Extra | None]
    deadlines: list[float]
    size_bytes: int


def size_of(datas: Sequence[bytes | None]) -> int:
    return sum([len(d) for d in datas if d is not None])


def future_sink(future: asyncio.Future[MessageId]) -> Callback:
    """The sink of an awaited ``send``: resolves ``future`` (unless its awaiter gave up)."""

    def sink(error: Any, message_id: MessageId | None) -> None:
        if not future.done():
            if error is None:
                future.set_result(message_id)  # type: ignore[arg-type]
            else:
                future.set_exception(error)

    return sink


def resolve(waiters: list[asyncio.Future[None]] | None) -> None:
    for waiter in waiters or ():
        if not waiter.done():
            waiter.set_result(None)


class WaitingMessage:
    """A message waiting for room (``block_if_queue_full``), in order."""

    __slots__ = ("data", "done", "extra", "future", "sink", "size_bytes", "taken", "waiters")

    def __init__(self, data: bytes | None, size_bytes: int, sink: Callback, extra: Extra | None) -> None:
        self.data = data
        self.size_bytes = size_bytes
        self.sink = sink
        self.extra = extra
        self.future: asyncio.Future[MessageId] | None = None
        """``send``'s future: a cancelled one means its sender gave up (the message is dropped)."""
        self.taken: asyncio.Future[None] | None = None
        """send_async: resolved when the producer takes the message."""
        self.waiters: list[asyncio.Future[None]] | None = None
        """Futures resolved on completion, success or not (flush)."""
        self.done = False

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

    def taken_sink(self) -> Callback:
        """The sink the message carries once taken: its own, plus the flush waiters if any."""
        self.done = True  # as a waiting message; its sink completes it from now on
        sink, waiters = self.sink, self.waiters
        if not waiters:
            return sink

        def completing(error: Any, message_id: MessageId | None) -> None:
            try:
                sink(error, message_id)
            finally:
                resolve(waiters)

        return completing


class BatchContainer:
    """Default batching: one batch in arrival order."""

    __slots__ = ("datas", "deadlines", "extras", "max_bytes", "max_messages", "sinks", "size_bytes")

    def __init__(self, max_messages: int, max_bytes: int) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.datas: list[bytes | None] = []
        self.sinks: list[Callback | None] = []
        self.extras: list[Extra | None] = []
        self.deadlines: list[float] = []
        self.size_bytes = 0

    def __len__(self) -> int:
        return len(self.datas)

    def has_room(self, size_bytes: int) -> bool:
        """Whether a message of ``size_bytes`` may join the current batch (an empty batch takes anything)."""
        return not self.datas or (
            len(self.datas) < self.max_messages and self.size_bytes + size_bytes <= self.max_bytes
        )

    def add(self, data: bytes | None, size_bytes: int, sink: Callback, extra: Extra | None) -> bool:
        """Take a message (call :meth:`has_room` first; the producer inlines this on its hot
        path); True when the batch is now full."""
        self.datas.append(data)
        self.sinks.append(sink)
        self.extras.append(extra)
        self.size_bytes += size_bytes
        return len(self.datas) >= self.max_messages or self.size_bytes >= self.max_bytes

    def _take_all(self) -> Group:
        group = Group(self.datas, self.sinks, self.extras, self.deadlines, self.size_bytes)
        self.datas, self.sinks, self.extras, self.deadlines, self.size_bytes = [], [], [], [], 0
        return group

    def drain(self) -> list[Group]:
        """The messages as groups, each to become entries in order; the container is empty after."""
        return [self._take_all()] if self.datas else []


class KeyBasedBatchContainer(BatchContainer):
    """Key-based batching: one group per key, ordered by the key's first message."""

    __slots__ = ()

    def drain(self) -> list[Group]:
        if not self.datas:
            return []
        whole = self._take_all()
        if whole.extras.count(None) == len(whole.extras):  # no keys at all: one group
            return [whole]
        by_key: dict[str, list[int]] = {}
        for index, extra in enumerate(whole.extras):
            by_key.setdefault("" if extra is None else extra.batch_key, []).append(index)
        groups = []
        for indexes in by_key.values():
            datas = [whole.datas[i] for i in indexes]
            groups.append(
                Group(
                    datas,
                    [whole.sinks[i] for i in indexes],
                    [whole.extras[i] for i in indexes],
                    [whole.deadlines[i] for i in indexes] if whole.deadlines else [],
                    size_of(datas),
                )
            )
        return groups


class OpSend:
    """One SEND in flight (or waiting for a connection): messages with increasing sequence ids.

    Invariant: ``open`` is the number of sinks not yet cleared; an op whose messages all
    completed is no longer pending; ``size_bytes`` is the data of its open messages."""

    __slots__ = ("command", "datas", "deadlines", "open", "sequence_ids", "sinks", "size_bytes", "waiters")

    def __init__(
        self,
        command: cmd.Send,
        datas: list[bytes | None],
        sinks: list[Callback | None],
        sequence_ids: Sequence[int],
        deadlines: list[float],
        size_bytes: int,
    ) -> None:
        assert sinks and (isinstance(sequence_ids, range) or all(a < b for a, b in itertools.pairwise(sequence_ids)))
        self.command = command
        self.datas = datas
        self.sinks = sinks
        """In sequence order; some may complete early (send timeout) while the op stays pending."""
        self.sequence_ids = sequence_ids
        self.deadlines = deadlines
        self.open = len(sinks)
        self.size_bytes = size_bytes
        self.waiters: list[asyncio.Future[None]] | None = None

    @property
    def highest_sequence_id(self) -> int:
        return self.sequence_ids[-1]

    def completion(self) -> asyncio.Future[None]:
        """A future resolved once every message of the op completed."""
        waiter = asyncio.get_running_loop().create_future()
        if self.open == 0:
            waiter.set_result(None)
        else:
            if self.waiters is None:
                self.waiters = []
            self.waiters.append(waiter)
        return waiter
