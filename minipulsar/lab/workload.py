"""The lab's load: producers at a fixed rate, with their publish latency per window.

A :class:`RatedProducer` publishes ``rate`` messages a second on an absolute schedule
(:class:`~minipulsar.cli.perf.rate_limiter.RateLimiter`, as ``minipulsar perf`` does), and
measures each message from its *intended* send time to its receipt, so a stalled broker shows
as latency rather than as a producer that quietly sent less (coordinated omission). Latencies go
into an HdrHistogram per window; :meth:`RatedProducer.take_window` hands the window over and
starts the next one, which is what a scenario's per-second p99 chart is made of.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

from minipulsar.cli.perf.payload import make_payload
from minipulsar.cli.perf.rate_limiter import RateLimiter
from minipulsar.client import Client, PartitionedProducer, Producer

LATENCY_MAX_MS = 120_000
MAX_BURST = 100
"""Messages handed to the producer per wake-up at most (a late timer catches up in bursts)."""


def new_histogram() -> HdrHistogram:
    return HdrHistogram(1, LATENCY_MAX_MS * 1000, 3)  # microseconds, 3 significant digits


@dataclass
class PublishStats:
    sent: int = 0
    acked: int = 0
    failed: int = 0
    window: HdrHistogram = field(default_factory=new_histogram)
    total: HdrHistogram = field(default_factory=new_histogram)


class RatedProducer:
    def __init__(
        self,
        producer: Producer | PartitionedProducer,
        rate_per_s: float,
        size_bytes: int,
        seed: int = 0,
        key: str | None = None,
    ) -> None:
        self.producer = producer
        self.rate_per_s = rate_per_s
        self.payload = make_payload(size_bytes, seed)
        self.key = key
        self.stats = PublishStats()

    @classmethod
    async def create(
        cls, client: Client, topic: str, rate_per_s: float, size_bytes: int, seed: int = 0, **settings: Any
    ) -> RatedProducer:
        """A producer on ``topic``; ``settings`` are :meth:`Client.create_producer`'s (batching and so on)."""
        defaults: dict[str, Any] = {"block_if_queue_full": True, "send_timeout_millis": 0}
        producer = await client.create_producer(topic, **(defaults | settings))
        return cls(producer, rate_per_s, size_bytes, seed)

    async def run(self, duration_s: float = math.inf, messages: int | None = None) -> None:
        """Publish for ``duration_s`` seconds or ``messages`` messages, whichever ends first, then
        wait for the outstanding receipts."""
        limiter = RateLimiter(self.rate_per_s)
        deadline = time.monotonic() + duration_s
        last = math.inf if messages is None else self.stats.sent + messages
        while time.monotonic() < deadline and self.stats.sent < last:
            permits, wait_s = limiter.take_due(int(min(MAX_BURST, last - self.stats.sent)))
            if not permits:
                await asyncio.sleep(wait_s)
                continue
            intended_s = limiter.last_due_s
            for _ in range(permits):
                self.stats.sent += 1
                taken = self.producer.send_async(self.payload, self._receipt(intended_s), partition_key=self.key)
                if taken is not None:  # a single-topic producer: wait until it has room (block_if_queue_full)
                    await taken
        await self.producer.flush()

    def _receipt(self, intended_s: float) -> Callable[[object, object], None]:
        def done(error: object, _message_id: object) -> None:
            if error is not None:
                self.stats.failed += 1
                return
            self.stats.acked += 1
            micros = max(1, int((time.monotonic() - intended_s) * 1_000_000))
            self.stats.window.record_value(min(micros, LATENCY_MAX_MS * 1000))
            self.stats.total.record_value(min(micros, LATENCY_MAX_MS * 1000))

        return done

    def take_window(self) -> HdrHistogram:
        """The latencies recorded since the last call (a new window starts)."""
        window, self.stats.window = self.stats.window, new_histogram()
        return window


def p99_ms(*histograms: HdrHistogram) -> float | None:
    """The p99 over ``histograms`` together, in ms (None when they are empty)."""
    merged = new_histogram()
    for histogram in histograms:
        merged.add(histogram)
    if merged.get_total_count() == 0:
        return None
    return merged.get_value_at_percentile(99.0) / 1000.0


def quantile_ms(histogram: HdrHistogram, percentile: float) -> float:
    return histogram.get_value_at_percentile(percentile) / 1000.0 if histogram.get_total_count() else float("nan")
