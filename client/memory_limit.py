"""The client-wide bound on bytes of messages waiting for a receipt (Pulsar's ``memoryLimitBytes``).

Every producer of a client reserves a message's payload size before taking it and releases
it when the message completes (receipt, error or timeout). A reservation that would pass the
limit fails — except when nothing at all is reserved, so that one message larger than the
limit can still go (Pulsar's ``MemoryLimitController.tryReserveMemory``). Producers that
could not reserve register here and are told when memory is released, oldest first, so a
producer blocked on memory resumes without polling.
"""

from __future__ import annotations

from collections.abc import Callable

DEFAULT_MEMORY_LIMIT_BYTES = 64 * 1024 * 1024  # Pulsar: memoryLimitBytes = 64 MiB


class MemoryLimitController:
    """Invariant: ``0 <= used_bytes``; ``used_bytes <= limit_bytes`` unless a single
    reservation larger than the limit was taken while nothing else was reserved.
    ``limit_bytes == 0`` disables the limit."""

    __slots__ = ("_waiting", "limit_bytes", "used_bytes")

    def __init__(self, limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES) -> None:
        if limit_bytes < 0:
            raise ValueError(f"memory_limit_bytes must be >= 0, got {limit_bytes}")
        self.limit_bytes = limit_bytes
        self.used_bytes = 0
        self._waiting: dict[int, Callable[[], None]] = {}
        """Who to call on release (insertion order = waiting order), keyed by id(owner)."""

    def try_reserve(self, size_bytes: int) -> bool:
        used = self.used_bytes
        if self.limit_bytes and used and used + size_bytes > self.limit_bytes:
            return False
        self.used_bytes = used + size_bytes
        return True

    def release(self, size_bytes: int) -> None:
        self.used_bytes -= size_bytes
        assert self.used_bytes >= 0, f"released more than reserved ({self.used_bytes})"
        if self._waiting:
            self._wake()

    def wait(self, owner: object, resume: Callable[[], None]) -> None:
        """Call ``resume()`` after the next release (once; register again if still blocked)."""
        self._waiting.setdefault(id(owner), resume)

    def forget(self, owner: object) -> None:
        self._waiting.pop(id(owner), None)

    def _wake(self) -> None:
        waiting, self._waiting = self._waiting, {}
        for resume in waiting.values():
            resume()

    @property
    def is_full(self) -> bool:
        return bool(self.limit_bytes) and self.used_bytes >= self.limit_bytes
