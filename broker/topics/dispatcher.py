"""Dispatchers: move entries from a subscription's cursor to its consumers within their permits.

One read loop per subscription (never a task per message). It runs while some consumer has
permits: it reads up to ``min(permits, dispatcherMaxReadBatchSize)`` entries from the cursor
(re-deliveries first), hands them out, and when the cursor is caught up it waits for the
managed ledger's next add.

- Single active consumer (Exclusive, Failover): every entry goes to the active consumer
  (the first attached); a read whose consumer went away rewinds the cursor.
- Shared: round-robin over consumers with permits; entries nobody can take now, and the
  unacknowledged entries of a consumer that left, go to a replay set that is read first.
"""

from __future__ import annotations

import asyncio
import logging

from minipulsar.errors import ConsumerBusyError, MiniPulsarError

from broker.managed_ledger.cursor import ManagedCursor
from broker.managed_ledger.position import Entry, Position
from broker.topics.consumer import Consumer

log = logging.getLogger(__name__)

READ_FAILURE_BACKOFF_S = 1.0


class Dispatcher:
    def __init__(self, cursor: ManagedCursor, sub_type: str, max_read_batch_size: int) -> None:
        self.cursor = cursor
        self.sub_type = sub_type
        self.max_read_batch_size = max_read_batch_size
        self.consumers: list[Consumer] = []
        self.replay: set[Position] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._idle: asyncio.Future[None] | None = None
        self._closed = False
        self._round_robin = 0

    @property
    def single_active(self) -> bool:
        return self.sub_type in ("Exclusive", "Failover")

    # -- consumers ------------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        if self.sub_type == "Exclusive" and self.consumers:
            raise ConsumerBusyError(f"subscription {self.cursor.name} already has an exclusive consumer")
        self.consumers.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer not in self.consumers:
            return
        was_active = self.consumers[0] is consumer
        self.consumers.remove(consumer)
        unacked = consumer.pending_acks
        consumer.pending_acks = {}
        if self.single_active:
            if was_active:
                self.cursor.rewind()
        else:
            self._add_replay(unacked)
        self.read_more()

    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.permits += permits
        self.read_more()

    def redeliver_unacknowledged(self, consumer: Consumer) -> None:
        unacked = consumer.pending_acks
        consumer.pending_acks = {}
        if self.single_active:
            self.cursor.rewind()
        else:
            self._add_replay(unacked)
        self.read_more()

    def acknowledged(self, consumer: Consumer | None, positions: list[Position]) -> None:
        for position in positions:
            self.replay.discard(position)
            if consumer is not None:
                consumer.pending_acks.pop(position, None)

    def acknowledged_up_to(self, consumer: Consumer | None, position: Position) -> None:
        if consumer is not None:
            for acked in [p for p in consumer.pending_acks if p <= position]:
                del consumer.pending_acks[acked]
        self.replay = {p for p in self.replay if p > position}

    def _add_replay(self, unacked: dict[Position, int]) -> None:
        for position in unacked:
            if not self.cursor.is_acked(position):
                self.replay.add(position)

    # -- the read loop --------------------------------------------------------------------------

    def read_more(self) -> None:
        """Start the read loop, or wake it if it idles waiting for new entries (a rewind, a
        redelivery or new permits may have given it work that is not a new entry)."""
        if self._closed:
            return
        if self._loop_task is not None and not self._loop_task.done():
            if self._idle is not None and not self._idle.done():
                self._idle.set_result(None)
            return
        if self._available_permits() > 0:
            self._loop_task = asyncio.get_running_loop().create_task(self._read_loop())

    def _available_permits(self) -> int:
        """Permits of consumers whose socket accepts writes: a consumer whose kernel buffer is
        full gets nothing more until it drains (its connection calls ``read_more`` then)."""
        if not self.consumers:
            return 0
        if self.single_active:
            active = self.consumers[0]
            return max(0, active.permits) if active.connection.writable else 0
        return sum(max(0, c.permits) for c in self.consumers if c.connection.writable)

    async def _read_loop(self) -> None:
        while not self._closed and (permits := self._available_permits()) > 0:
            try:
                entries = await self._read(min(permits, self.max_read_batch_size))
            except MiniPulsarError as error:
                log.warning("subscription %s: read failed, retrying in %.1fs: %s",
                            self.cursor.name, READ_FAILURE_BACKOFF_S, error)
                await asyncio.sleep(READ_FAILURE_BACKOFF_S)
                continue
            if entries is None:
                self._idle = self.cursor.ledger.wait_for_entries()
                await self._idle
                self._idle = None
                continue
            if entries:
                self._dispatch(entries)

    async def _read(self, max_entries: int) -> list[Entry] | None:
        """Entries to dispatch; None when there is nothing to read until the next add."""
        if self.replay:
            return await self._read_replay(max_entries)
        if not self.cursor.has_more_entries():
            return None
        return await self.cursor.read_entries(max_entries)

    async def _read_replay(self, max_entries: int) -> list[Entry]:
        entries = []
        for position in sorted(self.replay)[:max_entries]:
            self.replay.discard(position)
            if self.cursor.is_acked(position):
                continue
            entries.extend(await self.cursor.ledger.read_entries(position, 1))
        return entries

    def _dispatch(self, entries: list[Entry]) -> None:
        if not self.consumers:
            self._give_back(entries)
        elif self.single_active:
            self.consumers[0].send_entries(entries)
        else:
            self._dispatch_round_robin(entries)

    def _dispatch_round_robin(self, entries: list[Entry]) -> None:
        count = len(self.consumers)
        for index, entry in enumerate(entries):
            for _ in range(count):
                consumer = self.consumers[self._round_robin % count]
                self._round_robin += 1
                if consumer.permits > 0 and consumer.connection.writable:
                    consumer.send_entries([entry])
                    break
            else:
                self._give_back(entries[index:])
                return

    def _give_back(self, entries: list[Entry]) -> None:
        if self.single_active:
            self.cursor.seek(min(self.cursor.read_position, entries[0].position))
        else:
            self.replay.update(entry.position for entry in entries)

    async def close(self) -> None:
        self._closed = True
        if self._loop_task is not None:
            self._loop_task.cancel()
            try:
                await self._loop_task
            except asyncio.CancelledError:
                pass
