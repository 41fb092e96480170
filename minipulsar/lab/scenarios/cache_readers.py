"""cache-readers: tailing Readers miss the broker's entry cache unless their non-durable cursors
count as active (BIGO part 1, Pulsar PR 6769, 2.5.2).

Set-up: one broker, one bookie, a topic with no subscription. A producer publishes
:data:`PRODUCE_RATE` messages a second of :data:`MESSAGE_BYTES` (no batching: one message, one
entry); :data:`READERS` Readers (``Client.create_reader`` from ``MessageId.latest``: non-durable
cursors) read it as it is written, as the Flink connector does. The broker caches a written
entry only while an *active* cursor reads near the tail (``managedLedgerCursorBackloggedThreshold``).
Before PR 6769 a non-durable cursor was never active, so a topic read only by Readers cached
nothing and every read went to the bookies. The baseline shows that with minipulsar's own
``minipulsarNonDurableCursorsInactive=true`` (a lab-only switch: the behaviour Pulsar fixed);
the tuned run is today's behaviour (``false``). Both run with ``managedLedgerCacheSizeMB=1``
(:mod:`minipulsar.lab.cache_support`) and Pulsar's eviction defaults.

Figures (:class:`~minipulsar.lab.cache_support.CacheProbe`, one scrape a second): the broker's
cache hit rate per second from ``pulsar_ml_cache_hits``/``pulsar_ml_cache_misses``, and the
bookie's read requests per second (``bookkeeper_server_READ_ENTRY_REQUEST`` count) and read
bytes (``bookie_READ_BYTES``); headlines are over the whole measurement.
"""

from __future__ import annotations

import asyncio

from minipulsar.client import Client, MessageId, Reader
from minipulsar.client.exceptions import Timeout
from minipulsar.lab.cache_support import CACHE_SIZE_MB, CacheProbe, cache_charts, run_variant
from minipulsar.lab.probes import Recorder
from minipulsar.lab.result import BASELINE, TUNED, Guard, Headline
from minipulsar.lab.scenario import LabContext, Measured, Scenario
from minipulsar.lab.workload import RatedProducer

READERS = 4
PRODUCE_RATE = 150
MESSAGE_BYTES = 1_024
TOPIC = "lab-cache-readers"
SETTING = "minipulsarNonDurableCursorsInactive"
READ_TIMEOUT_MS = 200
"""A Reader's wait for the next message before it checks whether the run is over."""


async def run(ctx: LabContext) -> Measured:
    duration_s = ctx.profile.pick(15.0, 60.0)
    probes = {variant: CacheProbe(variant) for variant in (BASELINE, TUNED)}
    for variant, inactive in ((BASELINE, True), (TUNED, False)):

        async def workload(client: Client, recorder: Recorder) -> None:
            await _workload(ctx, client, recorder, duration_s)

        await run_variant(ctx, variant, {SETTING: inactive}, probes[variant], duration_s, workload)
    base, tuned = probes[BASELINE], probes[TUNED]
    return Measured(
        headlines=[
            Headline(
                "cache hit rate",
                "%",
                base.hit_rate(),
                tuned.hit_rate(),
                "higher",
                report_figure="Readers always missed the cache before PR 6769",
            ),
            Headline("bookie reads", "req/s", base.bookie_reads_per_s(), tuned.bookie_reads_per_s(), "lower"),
            Headline(
                "bookie read bytes", "KiB/s", base.bookie_read_kib_per_s(), tuned.bookie_read_kib_per_s(), "lower"
            ),
        ],
        charts=cache_charts(probes, f"Entry cache hit rate, {READERS} tailing Readers"),
        notes=[
            f"Producer: {PRODUCE_RATE} msg/s of {MESSAGE_BYTES} B, no batching; {READERS} Readers from"
            " MessageId.latest, each reading every message as it arrives; no durable subscription.",
            f"Both variants: managedLedgerCacheSizeMB={CACHE_SIZE_MB}; managedLedgerCacheEvictionIntervalMs,"
            " managedLedgerCacheEvictionTimeThresholdMillis and managedLedgerCursorBackloggedThreshold at"
            " Pulsar's defaults (10 ms, 1000 ms, 1000 entries): already on the lab's time scale.",
            f"{SETTING} is minipulsar's own switch, only to show Pulsar before 2.5.2 (PR 6769), where a"
            " non-durable cursor was never active; today's Pulsar (and minipulsar's default) is the tuned run.",
            "Hit rate from the broker's pulsar_ml_cache_hits/misses counters; bookie reads from the bookie's"
            " bookkeeper_server_READ_ENTRY_REQUEST count (requests; one request may carry several entries).",
        ],
    )


async def _workload(ctx: LabContext, client: Client, recorder: Recorder, duration_s: float) -> None:
    producer = await RatedProducer.create(
        client, TOPIC, PRODUCE_RATE, MESSAGE_BYTES, seed=ctx.seed, batching_enabled=False
    )
    readers = [await client.create_reader(TOPIC, MessageId.latest) for _ in range(READERS)]
    done = asyncio.Event()
    tasks = [asyncio.create_task(_tail(reader, done)) for reader in readers]
    try:
        async with recorder:
            await producer.run(duration_s)
    finally:
        done.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for reader in readers:
            await reader.close()


async def _tail(reader: Reader, done: asyncio.Event) -> None:
    while not done.is_set():
        try:
            await reader.read_next(READ_TIMEOUT_MS)
        except Timeout:
            continue


SCENARIO = Scenario(
    name="cache-readers",
    title="Entry cache for Readers: non-durable cursors count as active",
    source="BIGO, Apache Pulsar performance tuning, part 1: cache hit rate (Pulsar PR 6769, 2.5.2)",
    finding="Only active cursors get new entries cached; Readers' non-durable cursors did not count, so"
    " tailing Readers (e.g. the Flink connector) always missed the cache and read from the bookies.",
    baseline=f"{SETTING}=true (Pulsar before 2.5.2: Readers never active)",
    tuned=f"{SETTING}=false (Pulsar since PR 6769)",
    guard=Guard("cache hit rate", 5.0),
    run=run,
    summary_chart="cache-hit-rate",
)
