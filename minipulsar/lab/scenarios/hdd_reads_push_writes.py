"""hdd-reads-push-writes: on one HDD a catch-up reader's reads delay the journal's writes;
journal and ledgers on separate disks keep adds fast (BIGO part 1: deployment, "reads pushing
back writes").

Set-up: one broker, one bookie; a tailing producer at :data:`PRODUCE_RATE` the whole run. A
backlog of :data:`BACKLOG_MB` MB sits on another topic; after :data:`READER_START_S` s (caches
dropped first, and the broker's entry cache kept small) a Reader catches up on it from the
earliest message, so the bookie reads entry logs from its ledger disk while it journals.

- Baseline: the bookie's journal and ledgers share ONE disk.
- Tuned: journal and ledgers on TWO disks (BookKeeper's advice, and BIGO's deployment).

Figures: the tail producer's publish p99 per second (intended send time to receipt, so the
journal's fsync is in it) before and while the reader runs, and the reader's catch-up rate.
Reads only reach a disk on the EMULATED-HDD (or REAL) disks: the SIMULATED model does not
model reads. On EMULATED-HDD, blkio throttles reads and writes with separate budgets (an HDD has
one head for both), so the reader delays the journal only through the device's shared queue;
what one disk costs the journal here is mostly the entry-log flushes sharing its write IOPS
(:data:`WRITE_IOPS`), which shows before the reader starts as much as while it reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from minipulsar.client import Client, MessageId
from minipulsar.lab.disk_api import DiskSet
from minipulsar.lab.probes import Recorder
from minipulsar.lab.result import BASELINE, TUNED, Chart, Guard, Headline, Series, percentile
from minipulsar.lab.scenario import LabContext, Measured, Scenario
from minipulsar.lab.topology import bookies_on_disks
from minipulsar.lab.workload import RatedProducer, p99_ms

PRODUCE_RATE = 300
MESSAGE_BYTES = 1_024
BACKLOG_MB = 24
BACKLOG_MESSAGE_BYTES = 16 * 1024
READER_START_S = 8.0
TAIL_TOPIC, BACKLOG_TOPIC = "lab-hdd-tail", "lab-hdd-backlog"
WRITE_IOPS = 300
"""An HDD without a write-back cache, as a bookie syncing its journal sees one: every sync and
every entry-log flush is its own seek, so sharing the disk costs the journal its seeks."""
BROKER_SETTINGS: dict[str, object] = {"managedLedgerCacheSizeMB": 1, "dispatcherMaxReadBatchSize": 100}
BOOKIE_SETTINGS: dict[str, object] = {"dbStorage_writeCacheMaxSizeMb": 4, "flushInterval": 1000}
"""A small write cache flushed every second: the backlog is in entry logs on the ledger disk, not in memory."""


async def run(ctx: LabContext) -> Measured:
    duration_s = ctx.profile.pick(24.0, 90.0)
    p99: dict[str, Series] = {}
    catch_up: dict[str, Series] = {}
    read_window: dict[str, tuple[float, float]] = {}
    for variant in (BASELINE, TUNED):
        async with ctx.disk_set(variant, write_iops=WRITE_IOPS) as disks:
            ledger_disk = "disk-0" if variant == BASELINE else "disk-1"
            specs = bookies_on_disks(
                disks, 1, journal_disk_of=_on("disk-0"), ledger_disk_of=_on(ledger_disk), settings=BOOKIE_SETTINGS
            )
            layout = "journal and ledgers on one disk" if variant == BASELINE else "journal and ledgers on two disks"
            ctx.progress.phase(f"{variant}: one bookie, {layout}")
            async with ctx.cluster(variant, specs, [BROKER_SETTINGS], ensemble=(1, 1, 1)) as cluster:
                p99[variant], catch_up[variant], read_window[variant] = await _workload(
                    ctx, variant, cluster.service_url, cluster.bookies[0].http_url, disks, duration_s
                )

    def window(variant: str, reading: bool) -> list[float]:
        start, end = read_window[variant]
        return [v for t, v in p99[variant].points if (start < t <= end + 1) == reading and t >= 2]

    during = {v: percentile(window(v, True), 0.5) for v in p99}
    before = {v: percentile(window(v, False), 0.5) for v in p99}
    worst = {v: max(window(v, True), default=float("nan")) for v in p99}
    took = {v: end - start for v, (start, end) in read_window.items()}
    return Measured(
        headlines=[
            Headline(
                "publish p99 while the reader catches up (median second)",
                "ms",
                during[BASELINE],
                during[TUNED],
                "lower",
            ),
            Headline(
                "publish p99 while the reader catches up (worst second)", "ms", worst[BASELINE], worst[TUNED], "lower"
            ),
            Headline("publish p99 before the reader (median second)", "ms", before[BASELINE], before[TUNED], "lower"),
            Headline(f"catch-up read of {BACKLOG_MB} MB", "s", took[BASELINE], took[TUNED], "lower"),
        ],
        charts=[
            Chart(
                "add-p99",
                f"Publish p99 per second (catch-up reader from {READER_START_S:g} s)",
                "ms",
                [p99[BASELINE], p99[TUNED]],
            ),
            Chart("catch-up", "Catch-up reader's read rate", "MB/s", [catch_up[BASELINE], catch_up[TUNED]]),
        ],
        notes=[
            f"Disks: the profile's HDD with {WRITE_IOPS} write IOPS (no write-back cache). blkio budgets reads and"
            " writes apart, so the reader cannot take the journal's seeks as on a real HDD: compare the p99 before"
            " and while it reads; what two disks buy here is the entry-log flushes off the journal's disk.",
            f"Producer: {PRODUCE_RATE} msg/s of {MESSAGE_BYTES} B on {TAIL_TOPIC}; backlog: {BACKLOG_MB} MB in"
            f" {BACKLOG_MESSAGE_BYTES // 1024} KiB messages on {BACKLOG_TOPIC}, read by a Reader from the earliest"
            f" message from {READER_START_S:g} s, after the page cache was dropped.",
            f"Broker entry cache {BROKER_SETTINGS['managedLedgerCacheSizeMB']} MB, so the catch-up read goes to"
            f" the bookie; bookie write cache {BOOKIE_SETTINGS['dbStorage_writeCacheMaxSizeMb']} MB flushed every"
            f" {BOOKIE_SETTINGS['flushInterval']} ms, so it reads entry logs from the ledger disk.",
        ],
    )


def _on(disk: str) -> Callable[[int], str]:
    """Every bookie on ``disk``."""
    return lambda _index: disk


async def _workload(
    ctx: LabContext, variant: str, service_url: str, bookie_http: str, disks: DiskSet, duration_s: float
) -> tuple[Series, Series, tuple[float, float]]:
    """The publish p99 and catch-up read series, and when the catch-up read ran (its start, its end or the run's)."""
    p99, catch_up = Series(variant, variant), Series(variant, variant)
    backlog_messages = int(BACKLOG_MB * 1024 * 1024 / BACKLOG_MESSAGE_BYTES)
    window = [READER_START_S, duration_s]
    async with Client(service_url) as client:
        ctx.progress.phase(f"{variant}: writing a {BACKLOG_MB} MB backlog")
        backlog = await RatedProducer.create(
            client, BACKLOG_TOPIC, 4_000, BACKLOG_MESSAGE_BYTES, seed=ctx.seed, batching_max_publish_delay_ms=5
        )
        await backlog.run(messages=backlog_messages)
        await backlog.producer.close()
        tail = await RatedProducer.create(client, TAIL_TOPIC, PRODUCE_RATE, MESSAGE_BYTES, seed=ctx.seed + 1)
        read_bytes = 0
        last: dict[str, float] = {"at": 0.0, "read": 0.0}

        async def sample(at_s: float) -> None:
            p99.add(at_s, p99_ms(tail.take_window()))
            if at_s > last["at"]:
                catch_up.add(at_s, (read_bytes - last["read"]) / (at_s - last["at"]) / 1e6)
            last["at"], last["read"] = at_s, read_bytes
            ctx.progress.tick(f"{variant}: workload", at_s, duration_s)

        async def catch_up_reader(recorder: Recorder) -> None:
            nonlocal read_bytes
            await asyncio.sleep(READER_START_S)  # the workload's schedule: tail writes alone first
            await asyncio.to_thread(disks.drop_caches)
            window[0] = recorder.elapsed()
            reader = await client.create_reader(BACKLOG_TOPIC, MessageId.earliest, receiver_queue_size=1000)
            for _ in range(backlog.stats.acked):
                message = await reader.read_next()
                read_bytes += len(message.data())
            window[1] = recorder.elapsed()

        async with Recorder(1.0, sample) as recorder:
            reading = asyncio.create_task(catch_up_reader(recorder))
            try:
                await tail.run(duration_s)
            finally:
                reading.cancel()
                await asyncio.gather(reading, return_exceptions=True)
    return p99, catch_up, (window[0], window[1])


SCENARIO = Scenario(
    name="hdd-reads-push-writes",
    title="Reads push back writes: journal and ledgers on one HDD or two",
    source="BIGO, Apache Pulsar performance tuning, part 1: deployment (journal and ledger on separate disks)",
    finding="On HDD bookies, catch-up reads of entry logs delay journal writes and add p99 climbs; journal and"
    " ledger directories on separate disks keep the journal's sequential writes undisturbed.",
    baseline="journalDirectories and ledgerDirectories on one disk",
    tuned="journalDirectories and ledgerDirectories on two disks",
    guard=Guard("publish p99 while the reader catches up (median second)", 1.3),
    run=run,
    summary_chart="add-p99",
)
