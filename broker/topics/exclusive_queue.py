"""Producers waiting for exclusive access to a topic (Pulsar's ``WaitForExclusive`` mode).

A producer created in that mode while the topic has producers is queued instead of refused:
the broker answers PRODUCER_SUCCESS with ``producer_ready`` false at once (so the client's
operation timeout does not fire), and again, ready, once the producer is attached.

Invariants: turns are granted in arrival order, one at a time, and only while the topic has
no producer; a turn ends when its block exits (the producer attached, or given up), and
only then may the next be granted. While anyone is queued, the topic admits no Shared or
Exclusive producer (they would starve the queue).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Callable


class ExclusiveQueue:
    def __init__(self, topic_has_producers: Callable[[], bool]) -> None:
        self._topic_has_producers = topic_has_producers
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def __bool__(self) -> bool:
        """Anyone is queued (or holds the turn)."""
        return bool(self._waiters)

    def __len__(self) -> int:
        return len(self._waiters)

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[asyncio.Future[None]]:
        """Queue up; yields a future done when this producer's turn has come (at once when
        the topic is free and nobody is ahead). Attach the producer inside the block."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            self.grant_next()
            yield waiter
        finally:
            self._waiters.remove(waiter)
            if not waiter.done():
                waiter.cancel()
            self.grant_next()

    def grant_next(self) -> None:
        """Give the first in line its turn if the topic has no producer (call when one leaves)."""
        if self._waiters and not self._waiters[0].done() and not self._topic_has_producers():
            self._waiters[0].set_result(None)
