"""The suite's one door to the load generator, ``minipulsar perf``: every run that loads
minipulsar is a call of its library (``minipulsar.cli.perf``), in the bench process — the same
code as ``minipulsar perf produce | consume | managed-ledger``.

Scenarios describe a run as a :class:`ProduceSpec` / :class:`LedgerSpec` (the suite's words:
a measured duration after a warm-up) and get back a figures dict with pulsar-perf's names
(``msg_per_s``, ``mb_per_s``, ``latency`` with ``mean_ms`` … ``max_ms``):

- produce: ``run_produce`` for ``warmup_s + duration_s``, pulsar-perf's warm-up (the first
  ``warmup_s`` seconds are sent and counted in the throughput, only their latencies are left
  out);
- produce with ``consume``: ``run_consume`` beside it on the same topics (one consumer each,
  subscription ``bench-sub`` from Earliest, so it misses nothing whichever starts first) for
  the same test duration, as one would run ``perf consume`` next to ``perf produce``; its
  receive rate and end-to-end latency join the figures (``received``, ``receive_msg_per_s``,
  ``end_to_end_latency``);
- managed-ledger: ``run_managed_ledger`` (straight to the bookies, no broker).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from minipulsar import diagnostics
from minipulsar.cli.perf import (
    ConsumeOptions,
    ManagedLedgerOptions,
    PerfResult,
    ProduceOptions,
    run_consume,
    run_managed_ledger,
    run_produce,
)

Figures = dict[str, Any]
Emit = Callable[[str], None]
LOAD_GENERATOR = (
    "`minipulsar perf` (minipulsar.cli.perf: run_produce, run_consume, run_managed_ledger; "
    "the peers' own clients measured by its publish_session)"
)
"""What the reports name as the load generator (the summary adds where it runs)."""
OPERATION_TIMEOUT_S = 60.0
"""Lookups and producer creation of thousands of topics on a busy 2-core machine."""
SUBSCRIPTION = "bench-sub"
LATENCY_KEYS = ("mean_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms", "p9999_ms", "max_ms", "count")


@dataclass(frozen=True, slots=True)
class ProduceSpec:
    """One produce run: pulsar-perf ``produce`` flags, in the suite's words."""

    topic: str
    """The topic; with ``num_topics`` > 1, ``<topic>-0`` … ``<topic>-(N-1)`` (as ``-t N``)."""
    num_topics: int = 1
    size_bytes: int = 1024
    rate: float = 0.0
    """Messages/s over all topics (``-r``); 0: as fast as the producers take them."""
    duration_s: float = 5.0
    """Measured seconds, after the warm-up."""
    warmup_s: float = 1.0
    batching: bool = True
    batch_delay_ms: float = 1.0
    """pulsar-perf's ``-b`` default (1 ms)."""
    batch_max_messages: int = 1000
    batch_max_bytes: int = 128 * 1024
    max_outstanding: int = 1000
    """Per producer (``-o``): messages sent and not yet acknowledged."""
    consume: bool = False
    """``perf consume`` beside the producer, on every topic, for the same test duration."""
    interval_s: float = 5.0
    """Seconds between periodic lines (``-i``)."""
    timeline_s: float = 0.0
    """> 0: a latency timeline in buckets of this many seconds, with the bench process's own
    stall events (GC, event-loop lag; role ``perf``) in ``figures["timeline_raw"]``."""

    def produce_options(self, service_url: str) -> ProduceOptions:
        return ProduceOptions(
            topics=[self.topic],
            num_topics=self._num_topics(),
            service_url=service_url,
            rate_per_s=self.rate,
            size_bytes=self.size_bytes,
            duration_s=self.warmup_s + self.duration_s,
            warmup_s=self.warmup_s,
            batching=self.batching,
            batch_time_window_ms=self.batch_delay_ms,
            batch_max_messages=self.batch_max_messages,
            batch_max_bytes=max(self.batch_max_bytes, self.size_bytes),
            max_outstanding=self.max_outstanding,
            stats_interval_s=self.interval_s,
            operation_timeout_s=OPERATION_TIMEOUT_S,
            timeline_s=self.timeline_s,
        )

    def consume_options(self, service_url: str) -> ConsumeOptions:
        return ConsumeOptions(
            topics=[self.topic],
            num_topics=self._num_topics(),
            service_url=service_url,
            subscriptions=[SUBSCRIPTION],
            subscription_position="Earliest",
            duration_s=self.warmup_s + self.duration_s,
            stats_interval_s=self.interval_s,
            operation_timeout_s=OPERATION_TIMEOUT_S,
        )

    def _num_topics(self) -> int | None:
        return self.num_topics if self.num_topics > 1 else None


@dataclass(frozen=True, slots=True)
class LedgerSpec:
    """One managed-ledger run: ``num_ledgers`` ledgers written round robin, no broker."""

    num_ledgers: int = 1
    size_bytes: int = 1024
    rate: float = 0.0
    duration_s: float = 5.0
    warmup_s: float = 1.0
    ensemble: int = 2
    write_quorum: int = 2
    ack_quorum: int = 2
    max_outstanding: int = 1000
    interval_s: float = 5.0

    def options(self, metadata_url: str) -> ManagedLedgerOptions:
        return ManagedLedgerOptions(
            metadata_url=metadata_url,
            rate_per_s=self.rate,
            size_bytes=self.size_bytes,
            num_ledgers=self.num_ledgers,
            ensemble_size=self.ensemble,
            write_quorum=self.write_quorum,
            ack_quorum=self.ack_quorum,
            max_outstanding=self.max_outstanding,
            duration_s=self.warmup_s + self.duration_s,
            warmup_s=self.warmup_s,
            stats_interval_s=self.interval_s,
        )


async def produce(service_url: str, spec: ProduceSpec, emit: Emit) -> Figures:
    """Run ``spec`` against the broker at ``service_url``; perf's lines go to ``emit``."""
    started = time.monotonic()
    loop = asyncio.get_running_loop()
    consuming = loop.create_task(run_consume(spec.consume_options(service_url), emit=emit)) if spec.consume else None
    lag = None
    if spec.timeline_s > 0:
        diagnostics.install()
        lag = loop.create_task(diagnostics.watch_loop_lag())
    try:
        produced = await run_produce(spec.produce_options(service_url), emit=emit)
        figures = figures_of(produced)
        if produced.timeline:
            figures["timeline_raw"] = _timeline_raw(produced)
        # what run_produce spent before its clock started: creating the producers
        figures["setup_s"] = max(0.0, time.monotonic() - started - produced.duration_s)
        if consuming is not None:
            figures |= _consumer_figures(await consuming)
    finally:
        if lag is not None:
            lag.cancel()
        if consuming is not None and not consuming.done():  # the producer failed: no consumer figures
            consuming.cancel()
            await asyncio.gather(consuming, return_exceptions=True)
    figures["topics"] = spec.num_topics
    return figures | {"wall_s": time.monotonic() - started, "options": asdict(spec)}


def _timeline_raw(produced: PerfResult) -> dict[str, Any]:
    """perf's buckets, the run's start and end (monotonic s), the bench process's events."""
    buckets = produced.timeline
    bucket_s = produced.options.get("timeline_s") or 0.1
    start_s = buckets[0].t - bucket_s
    end_s = start_s + produced.duration_s
    events = diagnostics.ring()
    own = [] if events is None else events.between(start_s - 1.0, end_s)
    context = {"role": "perf", "pid": os.getpid()}
    return {
        "buckets": buckets,
        "start_s": start_s,
        "end_s": end_s,
        "events": [diagnostics.event_json(event, **context) for event in own],
    }


def _consumer_figures(consumed: PerfResult) -> Figures:
    return {
        "received": consumed.messages,
        "receive_msg_per_s": consumed.msg_per_s,
        "receive_mb_per_s": consumed.mb_per_s,
        "end_to_end_latency": figures_of(consumed)["latency"],
    }


async def managed_ledger(metadata_url: str, spec: LedgerSpec, emit: Emit) -> Figures:
    """Run ``spec`` straight against the bookies registered in ``metadata_url``."""
    started = time.monotonic()
    figures = figures_of(await run_managed_ledger(spec.options(metadata_url), emit=emit))
    figures["quorum"] = f"{spec.ensemble}/{spec.write_quorum}/{spec.ack_quorum}"
    return figures | {"wall_s": time.monotonic() - started, "options": asdict(spec)}


def figures_of(result: PerfResult) -> Figures:
    """A PerfResult as the suite's figures: its JSON, the latency keys the reports read,
    ``intervals`` kept, ``options`` left to the caller (the suite records its own spec)."""
    data = result.to_json()
    latency = data.pop("latency")
    data.pop("options", None)
    data.pop("timeline", None)  # the scenario keeps it, with the events, as ``timeline``
    data["latency"] = {key: latency.get(key) for key in LATENCY_KEYS}
    intended = data.pop("intended_latency", None)
    if intended is not None:  # a paced run: latency from each message's intended send time
        data["intended_latency"] = {key: intended.get(key) for key in LATENCY_KEYS}
    return data


async def publish_backlog(service_url: str, spec: ProduceSpec, num_messages: int, emit: Emit) -> Figures:
    """``spec``'s producer sends ``num_messages`` as fast as acknowledged (``perf produce -m``;
    no warm-up, ``spec.duration_s`` only bounds the run)."""
    options = replace(spec.produce_options(service_url), num_messages=num_messages, warmup_s=0.0)
    return figures_of(await run_produce(options, emit=emit))


async def consume(
    service_url: str, topic: str, subscription: str, num_messages: int, timeout_s: float, interval_s: float, emit: Emit
) -> Figures:
    """``perf consume -m num_messages`` from the Earliest position of a new ``subscription``:
    a catch-up read of what the topic holds (``timeout_s`` bounds it)."""
    options = ConsumeOptions(
        topics=[topic],
        service_url=service_url,
        subscriptions=[subscription],
        subscription_position="Earliest",
        num_messages=num_messages,
        duration_s=timeout_s,
        stats_interval_s=interval_s,
        operation_timeout_s=OPERATION_TIMEOUT_S,
    )
    return figures_of(await run_consume(options, emit=emit))
