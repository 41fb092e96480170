"""``minipulsar perf``: pulsar-perf's produce, consume and managed-ledger benchmarks, as a library.

Each mode is one coroutine taking its options and returning a :class:`PerfResult`::

    from minipulsar.cli.perf import ProduceOptions, run_produce

    result = await run_produce(ProduceOptions(topics=["my-topic"], rate_per_s=10_000, duration_s=20,
                                              service_url="pulsar://127.0.0.1:6650"))
    print(result.msg_per_s, result.latency.p99_ms)

``emit`` receives the lines pulsar-perf prints (each interval's, then the two aggregate
lines; default: stdout; None: silent); setting the ``stop`` event ends a run early, with
its figures so far. The command line (:mod:`minipulsar.cli.perf.command`) is a thin layer over these.
A load loop of one's own (the bench's Redis and NATS workload) measures as ``perf produce``
does through :func:`publish_session` and :func:`publish_recorder` (:mod:`minipulsar.cli.perf.publish`).
The runners are imported on first use: the client package takes ~0.1 s to import, and every
``minipulsar`` command (servers included) imports this package's options for its parser.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from minipulsar.cli.perf.options import ConsumeOptions, ManagedLedgerOptions, ProduceOptions
from minipulsar.cli.perf.publish import publish_recorder, publish_session
from minipulsar.cli.perf.report import PerfResult
from minipulsar.cli.perf.session import DRAIN_TIMEOUT_S, YIELD_EVERY, Emit, PerfInterrupted, PerfSession, print_line
from minipulsar.cli.perf.stats import IntervalStats, LatencySummary

if TYPE_CHECKING:
    from minipulsar.cli.perf.managed_ledger import BookKeeperFactory


async def run_produce(
    options: ProduceOptions, *, stop: asyncio.Event | None = None, emit: Emit | None = print_line
) -> PerfResult:
    """See :func:`minipulsar.cli.perf.producer.run_produce`."""
    from minipulsar.cli.perf.producer import run_produce as run

    return await run(options, stop=stop, emit=emit)


async def run_consume(
    options: ConsumeOptions, *, stop: asyncio.Event | None = None, emit: Emit | None = print_line
) -> PerfResult:
    """See :func:`minipulsar.cli.perf.consumer.run_consume`."""
    from minipulsar.cli.perf.consumer import run_consume as run

    return await run(options, stop=stop, emit=emit)


async def run_managed_ledger(
    options: ManagedLedgerOptions,
    *,
    stop: asyncio.Event | None = None,
    emit: Emit | None = print_line,
    bookkeeper: BookKeeperFactory | None = None,
) -> PerfResult:
    """See :func:`minipulsar.cli.perf.managed_ledger.run_managed_ledger`."""
    from minipulsar.cli.perf.managed_ledger import run_managed_ledger as run

    return await run(options, stop=stop, emit=emit, bookkeeper=bookkeeper)


__all__ = [
    "DRAIN_TIMEOUT_S",
    "YIELD_EVERY",
    "ConsumeOptions",
    "IntervalStats",
    "LatencySummary",
    "ManagedLedgerOptions",
    "PerfInterrupted",
    "PerfResult",
    "PerfSession",
    "ProduceOptions",
    "publish_recorder",
    "publish_session",
    "run_consume",
    "run_managed_ledger",
    "run_produce",
]
