"""Broker-wide bound on bookie read bytes in flight (Pulsar's ``InflightReadsLimiter``,
``managedLedgerMaxReadsInFlightSizeInMB``; 0 = off).

A read asks for its estimated size before going to the bookies and gives it back when the
read completes. A read that does not fit waits, in arrival order (FIFO: a large read is not
starved by a stream of small ones); it never fails. A read larger than the whole limit is
admitted alone, when nothing else is in flight, so it cannot wait forever.

Invariants:

- bytes in flight stay within the limit, except one read larger than it, admitted alone;
- waiters are served in arrival order; a cancelled waiter leaves the queue.
"""

from __future__ import annotations

import asyncio
from collections import deque


class ReadsInFlightLimiter:
    def __init__(self, max_bytes: int = 0) -> None:
        self.max_bytes = max_bytes
        self.in_flight_bytes = 0
        self.waited = 0
        """Reads that had to wait for room (counter)."""
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def acquire(self, size_bytes: int) -> int:
        """Wait for room for ``size_bytes``; returns what to :meth:`release` afterwards."""
        if not self.enabled:
            return 0
        size_bytes = max(1, min(size_bytes, self.max_bytes))
        if not self._waiters and self.in_flight_bytes + size_bytes <= self.max_bytes:
            self.in_flight_bytes += size_bytes
            return size_bytes
        self.waited += 1
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append((size_bytes, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # granted just as we were cancelled
                self.release(size_bytes)
            elif (size_bytes, waiter) in self._waiters:
                self._waiters.remove((size_bytes, waiter))
                self._grant()
            raise
        return size_bytes

    def release(self, granted_bytes: int) -> None:
        if granted_bytes <= 0:
            return
        self.in_flight_bytes -= granted_bytes
        assert self.in_flight_bytes >= 0
        self._grant()

    def _grant(self) -> None:
        waiters = self._waiters
        while waiters:
            size_bytes, waiter = waiters[0]
            if waiter.done():  # cancelled; its task removes nothing more
                waiters.popleft()
                continue
            if self.in_flight_bytes + size_bytes > self.max_bytes and self.in_flight_bytes > 0:
                return
            waiters.popleft()
            self.in_flight_bytes += size_bytes
            waiter.set_result(None)
