"""Read permits: BookKeeper's ``maxReadsInProgressLimit``, the bookie-wide bound on reads in
progress (a read holds its permit from its arrival until it is answered).

A read arriving with every permit taken is *blocked*, never refused: it waits, first come
first served, for a permit an answered read gives back — and its connection stops reading
meanwhile (BookKeeper turns the channel's auto-read off), so TCP pushes back on the peer
instead of requests piling up here. BookKeeper counts these reads as ``READ_ENTRY_BLOCKED``
and their wait as ``READ_ENTRY_BLOCKED_WAIT`` (:mod:`bookie.metrics`; the counting is the
connection's, :mod:`bookie.server_connection`).

Invariants (a limit of 0 means unlimited: no permit is ever counted or waited for):

- at most ``limit`` permits are held at once;
- a returned permit goes straight to the oldest waiter still waiting (a waiter that gave up
  — its future cancelled — is skipped), so the count never dips while someone waits;
- every permit taken is given back exactly once: by :meth:`ReadPermits.release`, which its
  holder calls once it was granted (at once, or through its future).
"""

from __future__ import annotations

import asyncio
import collections


class ReadPermits:
    def __init__(self, limit: int) -> None:
        """``limit``: maxReadsInProgressLimit; 0 (BookKeeper's default): unlimited."""
        if limit < 0:
            raise ValueError(f"maxReadsInProgressLimit must be >= 0, got {limit}")
        self.limit = limit
        self.held = 0
        """Permits held now (0 when unlimited)."""
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def waiting(self) -> int:
        """Reads waiting for a permit (the cancelled ones not yet skipped included)."""
        return len(self._waiters)

    def acquire(self) -> asyncio.Future[None] | None:
        """None: the permit is the caller's now. Else the read is blocked: the future is done
        once the permit is the caller's; cancel it to give up waiting."""
        if self.limit == 0:
            return None
        if self.held < self.limit and not self._waiters:
            self.held += 1
            return None
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        return waiter

    def release(self) -> None:
        """Give back a permit that was granted: to the oldest waiter, else to the pool."""
        if self.limit == 0:
            return
        assert self.held > 0, "a permit given back twice"
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # handed over: still held
                return
        self.held -= 1
