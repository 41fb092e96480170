"""The broker-wide publish buffer: bytes of publishes received but not yet persisted.

Pulsar's ``maxMessagePublishBufferSizeInMB`` (PR 6178, with PR 6550's immediate pause): every
SEND adds its payload size when it arrives and subtracts it when the managed ledger answered.
Reaching the limit stops reading on **every** producer connection at once; dropping below half
of it resumes them all. Nothing is rejected or dropped: the producers' sockets fill up and
their sends wait, so the broker's memory stays bounded while bookies are slow.

The bound is the limit plus what was already read off the sockets when the pause came (at
most one read buffer per connection), as in Pulsar, where Netty finishes the current read.

A connection may also be held by its own ``maxPendingPublishRequestsPerConnection`` limit;
:class:`Throttleable` connections count their reasons and read only when none holds them.

Invariants:

- ``size_bytes`` is what was added and not yet released, never negative;
- while ``paused`` every registered connection holds the buffer's throttle reason; none does
  otherwise.
"""

from __future__ import annotations

from typing import Protocol

GLOBAL_LIMIT = "publishBuffer"
"""The throttle reason this buffer gives its connections."""


class Throttleable(Protocol):
    def throttle(self, reason: str) -> None: ...

    def unthrottle(self, reason: str) -> None: ...


class PublishBuffer:
    """Invariant: while ``paused``, every registered connection holds the ``publishBuffer`` reason."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        """<= 0: no limit (the buffer still counts, for the metrics)."""
        self.resume_bytes = max_bytes // 2
        self.size_bytes = 0
        self.max_usage_bytes = 0
        """The highest ``size_bytes`` seen since start (PIP-410's max usage)."""
        self.paused = False
        self.pauses = 0
        """How many times the limit paused every producer connection."""
        self._connections: set[Throttleable] = set()

    @classmethod
    def from_megabytes(cls, max_mb: int) -> PublishBuffer:
        return cls(max_mb * 1024 * 1024 if max_mb > 0 else -1)

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    @property
    def throttled_connections(self) -> int:
        """Connections paused by this (broker-wide) limit right now."""
        return len(self._connections) if self.paused else 0

    def register(self, connection: Throttleable) -> None:
        """A connection that publishes; it is paused at once if the buffer is full."""
        if connection in self._connections:
            return
        self._connections.add(connection)
        if self.paused:
            connection.throttle(GLOBAL_LIMIT)

    def unregister(self, connection: Throttleable) -> None:
        if connection in self._connections:
            self._connections.discard(connection)
            if self.paused:
                connection.unthrottle(GLOBAL_LIMIT)

    def add(self, size_bytes: int) -> None:
        """A publish arrived; pause everyone when this one reaches the limit."""
        self.size_bytes += size_bytes
        if self.size_bytes > self.max_usage_bytes:
            self.max_usage_bytes = self.size_bytes
        if self.enabled and not self.paused and self.size_bytes >= self.max_bytes:
            self.paused = True
            self.pauses += 1
            for connection in list(self._connections):
                connection.throttle(GLOBAL_LIMIT)

    def release(self, size_bytes: int) -> None:
        """A publish was persisted (or failed); resume everyone at half the limit or below."""
        self.size_bytes -= size_bytes
        assert self.size_bytes >= 0, "publish buffer released more than was added"
        if self.paused and self.size_bytes <= self.resume_bytes:
            self.paused = False
            for connection in list(self._connections):
                connection.unthrottle(GLOBAL_LIMIT)
