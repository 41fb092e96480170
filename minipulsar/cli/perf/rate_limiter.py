"""RateLimiter: permits at a fixed rate on an absolute schedule, so the rate does not drift.

Permit ``n`` is due at ``start + n / rate``: a late wake-up (the event loop's timers have
millisecond resolution, so at 10k msg/s every sleep overshoots) is made up by the permits
that are already due when it returns, and sleep errors never accumulate. A caller that fell
behind — blocked on a full producer, say — catches up by at most ``burst_s`` worth of permits,
as Guava's ``SmoothBursty`` (pulsar-perf's RateLimiter) stores at most one second of them;
older debt is forgotten rather than sent as one burst.

Sans-IO: :meth:`RateLimiter.reserve` takes a permit and says how long to wait for it;
:meth:`RateLimiter.take_due` takes every permit already due (a sender's burst, one clock
read for many messages); the caller sleeps (tests drive it with a manual clock).
"""

from __future__ import annotations

from minipulsar.clock import MONOTONIC, Clock

DEFAULT_BURST_S = 1.0


class RateLimiter:
    def __init__(self, rate_per_s: float, *, burst_s: float = DEFAULT_BURST_S, clock: Clock = MONOTONIC) -> None:
        """``rate_per_s`` > 0 permits per second; the first is due at once."""
        if rate_per_s <= 0:
            raise ValueError(f"rate must be > 0, got {rate_per_s}")
        if burst_s < 0:
            raise ValueError(f"burst_s must be >= 0, got {burst_s}")
        self.rate_per_s = rate_per_s
        self._interval_s = 1.0 / rate_per_s
        self._burst_s = burst_s
        self._clock = clock
        self._anchor_s = clock()
        self._issued = 0
        self.last_due_s = self._anchor_s
        """When the first permit of the last :meth:`take_due` was due: a message's *intended*
        send time (coordinated-omission correction measures latency from it)."""
        """Permit ``n`` after the anchor is due at ``anchor + n / rate`` (a product, not a running
        sum, so float error does not build up either). Invariant: the next permit is never due
        earlier than ``now - burst_s``."""

    def reserve(self, permits: int = 1) -> float:
        """Take ``permits``; returns the seconds to wait before using them (0: use them now)."""
        now = self._clock()
        due_s = self._anchor_s + self._issued * self._interval_s
        if now - due_s > self._burst_s:  # too far behind: forget the older debt
            self._anchor_s, self._issued = now - self._burst_s, 0
            due_s = self._anchor_s
        self._issued += permits
        wait_s = due_s - now
        return wait_s if wait_s > 0 else 0.0

    def take_due(self, max_permits: int) -> tuple[int, float]:
        """Take the permits due by now, at most ``max_permits`` (>= 1): ``(permits, 0.0)``; when
        none is due, ``(0, seconds until the next one)`` and nothing is taken."""
        now = self._clock()
        due_s = self._anchor_s + self._issued * self._interval_s
        if now - due_s > self._burst_s:  # too far behind: forget the older debt
            self._anchor_s, self._issued = now - self._burst_s, 0
            due_s = self._anchor_s
        if due_s > now:
            return 0, due_s - now
        permits = min(max_permits, int((now - due_s) * self.rate_per_s + 1e-6) + 1)  # + float slack
        self._issued += permits
        self.last_due_s = due_s
        return permits, 0.0

    @property
    def interval_s(self) -> float:
        """Seconds between two permits' due times."""
        return self._interval_s
