"""The suite's own load generator, used while ``minipulsar perf`` (minipulsar/perf/) is absent.

Same measurement as pulsar-perf: per message, send → receipt in µs into an HdrHistogram (3
significant digits); throughput over the measured time. The hot path is one ``send_async``
(or ``LedgerHandle.add``), one closure and one ``array.append`` per message.

Invariants:
- nothing sent during the warm-up is counted, in throughput or latency;
- a run ends only after every message it sent is acknowledged or failed (or the wait for the
  stragglers times out, which is counted as failures): figures never include half a run;
- producers, consumers, ledgers and clients are closed whatever happens.
"""

from __future__ import annotations

import array
import asyncio
import collections
import contextlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hdrh.histogram import HdrHistogram

if TYPE_CHECKING:
    from bench.suite.perf_adapter import LedgerSpec, ProduceSpec

MB = 1_000_000
LATENCY_US_MAX = 60_000_000
PERCENTILES = {"p50_ms": 50, "p95_ms": 95, "p99_ms": 99, "p999_ms": 99.9, "p9999_ms": 99.99}
CREATE_CONCURRENCY = 64
"""Producers (or consumers) being created at once: thousands of topics start in seconds
without a lookup storm."""
DRAIN_TIMEOUT_S = 60.0


class Meter:
    """Counts and latencies of one phase; ``done(latency_us)`` / ``failed()`` are the hot path."""

    def __init__(self) -> None:
        self.latencies_us = array.array("q")
        self.done = self.latencies_us.append
        self.failures = 0
        self.first_error: BaseException | None = None
        self.last_done_s = 0.0

    @property
    def acked(self) -> int:
        return len(self.latencies_us)

    def failed(self, error: BaseException) -> None:
        self.failures += 1
        self.first_error = self.first_error or error

    def latency_ms(self) -> dict[str, float | None]:
        """mean / p50 / p95 / p99 / p99.9 / p99.99 / max in ms (HdrHistogram)."""
        if not self.latencies_us:
            return {"mean_ms": None, **dict.fromkeys(PERCENTILES), "max_ms": None}
        histogram = HdrHistogram(1, LATENCY_US_MAX, 3)
        total = 0
        for value, count in collections.Counter(self.latencies_us).items():
            value = min(max(value, 1), LATENCY_US_MAX)
            histogram.record_value(value, count)
            total += value * count
        values = histogram.get_percentile_to_value_dict(list(PERCENTILES.values()))
        return {
            "mean_ms": total / len(self.latencies_us) / 1000,
            **{key: values[pct] / 1000 for key, pct in PERCENTILES.items()},
            "max_ms": histogram.get_max_value() / 1000,
        }

    def recent_p99_ms(self, since: int) -> float | None:
        recent = sorted(self.latencies_us[since:])
        return recent[int(len(recent) * 0.99)] / 1000 if recent else None


class Reporter:
    """A progress line every ``interval_s`` while a phase runs: messages, rate, recent p99."""

    def __init__(self, label: str, meter: Meter, interval_s: float, emit: Callable[[str], None]) -> None:
        self.label, self.meter, self.interval_s, self.emit = label, meter, interval_s, emit
        self._task: asyncio.Task | None = None

    def __enter__(self) -> Reporter:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        started = last = time.monotonic()
        last_count = 0
        while True:
            await asyncio.sleep(self.interval_s)
            now, count = time.monotonic(), self.meter.acked
            p99 = self.meter.recent_p99_ms(last_count)
            self.emit(
                f"{self.label}: {now - started:5.0f} s, {count:,} acked, "
                f"{(count - last_count) / (now - last):,.0f} msg/s, p99 "
                f"{'n/a' if p99 is None else f'{p99:.2f}'} ms, {self.meter.failures} failed"
            )
            last, last_count = now, count


class Pacer:
    """How many messages to send now: all it can (rate 0) or what a fixed rate has due."""

    BURST = 256

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.started = time.monotonic()
        self.sent = 0

    async def allowance(self) -> int:
        """Messages to send now (after waiting, for a fixed rate, until one is due)."""
        if not self.rate:
            return self.BURST
        while True:
            elapsed = time.monotonic() - self.started
            due = int(elapsed * self.rate) + 1 - self.sent
            if due > 0:
                return min(due, 10 * self.BURST)
            await asyncio.sleep((self.sent + 1) / self.rate - elapsed)  # pacing, not synchronising


async def _gather_limited(factories: Sequence[Callable[[], Any]]) -> list[Any]:
    """Run the coroutine factories, at most :data:`CREATE_CONCURRENCY` at a time, in order."""
    results: list[Any] = [None] * len(factories)
    semaphore = asyncio.Semaphore(CREATE_CONCURRENCY)

    async def one(index: int) -> None:
        async with semaphore:
            results[index] = await factories[index]()

    await asyncio.gather(*(one(i) for i in range(len(factories))))
    return results


def _figures(meter: Meter, started_s: float, size_bytes: int) -> dict[str, Any]:
    end_s = meter.last_done_s if meter.acked else time.monotonic()
    duration_s = max(end_s - started_s, 1e-9)
    figures = {
        "messages": meter.acked,
        "failures": meter.failures,
        "duration_s": duration_s,
        "msg_per_s": meter.acked / duration_s,
        "mb_per_s": meter.acked * size_bytes / duration_s / MB,
        "mbit_per_s": meter.acked * size_bytes / duration_s / 1024 / 1024 * 8,
        "latency": meter.latency_ms(),
    }
    if meter.first_error is not None:
        figures["error"] = f"{type(meter.first_error).__name__}: {meter.first_error}"
    return figures


# -- produce through the broker ----------------------------------------------------------------


async def produce(service_url: str, spec: ProduceSpec, emit: Callable[[str], None]) -> dict[str, Any]:
    from minipulsar import Client

    topics = spec.topics()
    payload = b"x" * spec.size_bytes
    options = {
        "batching_enabled": spec.batching,
        "batching_max_publish_delay_ms": spec.batch_delay_ms,
        "batching_max_messages": spec.batch_max_messages,
        "batching_max_allowed_size_in_bytes": max(spec.batch_max_bytes, spec.size_bytes),
        "max_pending_messages": spec.max_outstanding,
        "block_if_queue_full": True,
        "send_timeout_millis": 0,
    }
    memory_bytes = max(256 * 1024 * 1024, 2 * spec.max_outstanding * spec.size_bytes)
    async with Client(service_url, memory_limit_bytes=memory_bytes, operation_timeout_seconds=60) as client:
        set_up = time.monotonic()
        consumers = []
        if spec.consume:
            consumers = await _gather_limited(
                [(lambda t=t: client.subscribe(t, "bench-sub", receiver_queue_size=1000)) for t in topics]
            )
        producers = await _gather_limited([(lambda t=t: client.create_producer(t, **options)) for t in topics])
        set_up_s = time.monotonic() - set_up
        emit(f"{len(producers)} producer(s){' and consumers' if consumers else ''} ready in {set_up_s:.1f} s")
        receivers = Receivers(consumers)
        try:
            if spec.warmup_s > 0:
                await _send_phase(producers, payload, spec.rate, spec.warmup_s, Meter())
            receivers.start_measuring()
            meter = Meter()
            started = time.monotonic()
            with Reporter(f"produce {spec.size_bytes} B x {len(topics)} topic(s)", meter, spec.interval_s, emit):
                await _send_phase(producers, payload, spec.rate, spec.duration_s, meter)
            figures = _figures(meter, started, spec.size_bytes)
            if consumers:
                figures |= await receivers.stop(meter.acked, spec.size_bytes)
        finally:
            await receivers.close()
            await asyncio.gather(*(p.close() for p in producers), return_exceptions=True)
    return figures | {"mode": "produce", "topics": len(topics), "setup_s": set_up_s}


async def _send_phase(producers: list[Any], payload: bytes, rate: float, duration_s: float, meter: Meter) -> None:
    """Send round robin over ``producers`` for ``duration_s``, then wait for every receipt."""
    now_ns, monotonic, done, failed = time.perf_counter_ns, time.monotonic, meter.done, meter.failed
    pacer = Pacer(rate)
    deadline = monotonic() + duration_s
    count, index = len(producers), 0
    outstanding = 0
    all_done = asyncio.get_running_loop().create_future()
    sending = True

    def callback(error: BaseException | None, _message_id: Any, sent_ns: int) -> None:
        nonlocal outstanding
        if error is None:
            done((now_ns() - sent_ns) // 1000)
        else:
            failed(error)
        outstanding -= 1
        meter.last_done_s = monotonic()
        if not sending and outstanding == 0 and not all_done.done():
            all_done.set_result(None)

    while monotonic() < deadline:
        allowance = await pacer.allowance()
        for _ in range(allowance):
            producer = producers[index]
            index = index + 1 if index + 1 < count else 0
            sent_ns = now_ns()
            outstanding += 1
            taken = producer.send_async(payload, lambda e, m, s=sent_ns: callback(e, m, s))
            if not taken.done():
                await taken
        pacer.sent += allowance
        if not pacer.rate:
            await asyncio.sleep(0)  # let receipts in: a producer with room never blocks the loop
    sending = False
    await asyncio.gather(*(p.flush() for p in producers), return_exceptions=True)
    if outstanding > 0:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(all_done, DRAIN_TIMEOUT_S)
    meter.failures += max(0, outstanding)


class Receivers:
    """One receive loop per consumer; counts what arrives while measuring."""

    def __init__(self, consumers: list[Any]) -> None:
        self.consumers = consumers
        self.received = 0
        self.measuring_from = 0
        self.started_s = 0.0
        self.last_s = 0.0
        self._tasks = [asyncio.get_running_loop().create_task(self._receive(c)) for c in consumers]

    def start_measuring(self) -> None:
        self.measuring_from, self.started_s = self.received, time.monotonic()

    async def _receive(self, consumer: Any) -> None:
        unacked = 0
        while True:
            message = await consumer.receive()
            self.received += 1
            self.last_s = time.monotonic()
            unacked += 1
            if unacked >= 500:
                unacked = 0
                await consumer.acknowledge_cumulative(message)

    async def stop(self, expected: int, size_bytes: int) -> dict[str, Any]:
        """Wait (bounded) until what the measured phase sent has arrived; the receive figures."""
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while self.received - self.measuring_from < expected and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # polling a counter with a deadline, not synchronising on time
        received = self.received - self.measuring_from
        duration_s = max(self.last_s - self.started_s, 1e-9)
        return {
            "received": received,
            "receive_msg_per_s": received / duration_s,
            "receive_mb_per_s": received * size_bytes / duration_s / MB,
        }

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(c.close() for c in self.consumers), return_exceptions=True)


# -- managed-ledger: straight to the bookies ---------------------------------------------------


async def managed_ledger(metadata_url: str, spec: LedgerSpec, emit: Callable[[str], None]) -> dict[str, Any]:
    from minipulsar.broker.bookkeeper import BookKeeper
    from minipulsar.metadata import open_metadata_store

    store = await open_metadata_store(metadata_url, session_timeout_ms=10_000)
    bookkeeper = BookKeeper(store)
    handles: list[Any] = []
    try:
        await bookkeeper.start()
        handles = await _gather_limited(
            [
                (lambda: bookkeeper.create_ledger(spec.ensemble, spec.write_quorum, spec.ack_quorum))
                for _ in range(spec.num_ledgers)
            ]
        )
        emit(f"{len(handles)} ledger(s) E/Qw/Qa {spec.ensemble}/{spec.write_quorum}/{spec.ack_quorum} ready")
        payload = b"x" * spec.size_bytes
        if spec.warmup_s > 0:
            await _add_phase(handles, payload, spec, spec.warmup_s, Meter())
        meter = Meter()
        started = time.monotonic()
        with Reporter(f"managed-ledger {spec.size_bytes} B", meter, spec.interval_s, emit):
            await _add_phase(handles, payload, spec, spec.duration_s, meter)
        figures = _figures(meter, started, spec.size_bytes)
    finally:
        await asyncio.gather(*(h.close() for h in handles), return_exceptions=True)
        for ledger in handles:
            with contextlib.suppress(Exception):
                await bookkeeper.delete_ledger(ledger.ledger_id)
        await bookkeeper.close()
        await store.close()
    return figures | {
        "mode": "managed-ledger",
        "ledgers": len(handles),
        "quorum": f"{spec.ensemble}/{spec.write_quorum}/{spec.ack_quorum}",
    }


async def _add_phase(handles: list[Any], payload: bytes, spec: LedgerSpec, duration_s: float, meter: Meter) -> None:
    """Add round robin over ``handles``, at most ``max_outstanding`` in flight, then drain."""
    loop = asyncio.get_running_loop()
    now_ns, monotonic, done, failed = time.perf_counter_ns, time.monotonic, meter.done, meter.failed
    pacer = Pacer(spec.rate)
    deadline = monotonic() + duration_s
    outstanding = 0
    room: asyncio.Future | None = None
    count, index = len(handles), 0

    def finished(future: asyncio.Future, sent_ns: int) -> None:
        nonlocal outstanding
        error = future.exception()
        if error is None:
            done((now_ns() - sent_ns) // 1000)
        else:
            failed(error)
        outstanding -= 1
        meter.last_done_s = monotonic()
        if room is not None and not room.done() and outstanding < spec.max_outstanding:
            room.set_result(None)

    while monotonic() < deadline:
        allowance = await pacer.allowance()
        pacer.sent += allowance
        for _ in range(allowance):
            while outstanding >= spec.max_outstanding:
                room = loop.create_future()
                await room
            handle = handles[index]
            index = index + 1 if index + 1 < count else 0
            sent_ns = now_ns()
            outstanding += 1
            handle.add(payload).add_done_callback(lambda f, s=sent_ns: finished(f, s))
        if not pacer.rate:
            await asyncio.sleep(0)
    drain_deadline = monotonic() + DRAIN_TIMEOUT_S
    while outstanding > 0 and monotonic() < drain_deadline:
        room = loop.create_future()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(room, drain_deadline - monotonic())
    meter.failures += max(0, outstanding)
