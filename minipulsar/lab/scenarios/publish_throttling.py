"""publish-throttling: with slow bookies, publishes pile up in broker memory unless the broker
stops reading its producers' sockets (BIGO part 1, ``maxMessagePublishBufferSizeInMB``, Pulsar PR 6178).

Set-up: one broker, one bookie (E=Qw=Qa=1) whose journal and entry-log writes are slowed by
``minipulsarSimulatedDiskModel`` (:data:`DISK_MODEL`: a SIMULATED HDD of a few MB/s, each
journal and ledger directory its own device), so adds complete at a few MB/s.
:data:`PRODUCERS` producers on one topic each publish :data:`RATE` messages of
:data:`MESSAGE_BYTES` a second (about twice what the bookie takes), unbatched, with queues the
client does not bound first (``maxPendingMessages`` far above the run, the client's memory
limit off), so whatever the broker reads off their sockets it holds until the bookie answers.
A consumer subscribed before the run receives every message.

Baseline: ``maxMessagePublishBufferSizeInMB=-1`` (minipulsar's spelling of "no limit"; Pulsar's
-1 is half the direct memory, which a slow bookie fills just as well). Tuned: :data:`TUNED_MB` MB.

Figures, sampled every second from the broker's ``/metrics``: pending publish bytes
(``pulsar_broker_publish_buffer_usage``: SEND payloads received, not yet persisted) and the
broker's RSS (``process_resident_memory_bytes``); the producers' publish latency p99 per second
(from each message's intended send time, so a paused socket shows as latency). At the end, the
messages the producers had acknowledged are compared with those the consumer received.
"""

from __future__ import annotations

import asyncio
import contextlib

from minipulsar.client import Client
from minipulsar.lab.cluster import LabCluster, Server
from minipulsar.lab.probes import Http, Recorder
from minipulsar.lab.result import BASELINE, TUNED, Chart, Guard, Headline, Series
from minipulsar.lab.scenario import LabContext, Measured, Scenario
from minipulsar.lab.topology import bookies_on_disks
from minipulsar.lab.workload import RatedProducer, p99_ms

SETTING = "maxMessagePublishBufferSizeInMB"
TUNED_MB = 4
DISK_MODEL = "hdd:fsync_ms=8,mb_s=4"
PRODUCERS = 4
RATE = 30.0
"""Messages a second per producer: 4 × 30 × 64 KiB ≈ 7.9 MB/s against a bookie of ~4 MB/s."""
MESSAGE_BYTES = 64 * 1024
TOPIC = "lab-publish-throttling"
MB = 1024 * 1024
DRAIN_TIMEOUT_S = 60.0


async def run(ctx: LabContext) -> Measured:
    duration_s = ctx.profile.pick(8.0, 20.0)
    pending = {v: Series(v, v) for v in (BASELINE, TUNED)}
    rss = {v: Series(v, v) for v in (BASELINE, TUNED)}
    latency = {v: Series(v, v) for v in (BASELINE, TUNED)}
    p99_total: dict[str, float] = {}
    lost: dict[str, int] = {}
    counts: dict[str, tuple[int, int, int]] = {}
    for variant, limit_mb in ((BASELINE, -1), (TUNED, TUNED_MB)):
        async with ctx.disk_set(variant) as disks:
            ctx.progress.phase(f"{variant}: starting a slow bookie and a broker ({SETTING}={limit_mb})")
            bookies = bookies_on_disks(disks, 1, settings={"minipulsarSimulatedDiskModel": DISK_MODEL})
            async with ctx.cluster(variant, bookies, [{SETTING: limit_mb}], ensemble=(1, 1, 1)) as cl:
                acked, failed, received, p99 = await _workload(
                    ctx, cl, pending[variant], rss[variant], latency[variant], duration_s
                )
        p99_total[variant] = p99
        lost[variant] = max(0, acked - received)
        counts[variant] = (acked, failed, received)
    peak = {v: max(s.values(), default=0.0) for v, s in pending.items()}
    growth = {v: max(s.values(), default=0.0) - (s.points[0][1] if s.points else 0.0) for v, s in rss.items()}
    notes = [
        f"Bookie disks: SIMULATED ({DISK_MODEL}) via minipulsarSimulatedDiskModel on plain directories.",
        f"Producers: {PRODUCERS} × {RATE:g} msg/s × {MESSAGE_BYTES // 1024} KiB, unbatched, maxPendingMessages"
        " far above the run, the client's memory limit off (memoryLimitBytes=0); the producers then wait for"
        " every receipt.",
        "Pending bytes = pulsar_broker_publish_buffer_usage; RSS = the broker's process_resident_memory_bytes;"
        " both sampled every second; RSS growth = peak less the first sample.",
        "Publish latency is not what throttling improves: the bookie is the bottleneck either way. Tuned, the"
        " paused sockets make the messages wait in the producers (their queues are unbounded here) instead of in"
        " the broker, so their latency is about the same or higher; with bounded producer queues the senders"
        " would block instead. The price of bounded broker memory is paid by the producers.",
    ]
    notes += [
        f"{v}: {a} messages acknowledged, {f} send errors, {r} received by the consumer"
        for v, (a, f, r) in counts.items()
    ]
    return Measured(
        headlines=[
            Headline("peak broker pending publish bytes", "MB", peak[BASELINE] / MB, peak[TUNED] / MB, "lower"),
            Headline("broker RSS growth", "MB", growth[BASELINE] / MB, growth[TUNED] / MB, "lower"),
            Headline("publish latency p99 (whole run)", "ms", p99_total[BASELINE], p99_total[TUNED], "lower"),
            Headline(
                "acknowledged messages the consumer did not receive", "msgs", lost[BASELINE], lost[TUNED], "lower"
            ),
        ],
        charts=[
            Chart(
                "pending-publish-bytes",
                f"Broker publish buffer usage (slow bookie, {SETTING} off vs {TUNED_MB} MB)",
                "MB",
                [Series(s.label, s.variant, [(t, b / MB) for t, b in s.points]) for s in pending.values()],
            ),
            Chart(
                "broker-rss",
                "Broker resident memory",
                "MB",
                [Series(s.label, s.variant, [(t, b / MB) for t, b in s.points]) for s in rss.values()],
            ),
            Chart("publish-latency-p99", "Producers' publish latency p99 per second", "ms", list(latency.values())),
        ],
        notes=notes,
    )


async def _workload(
    ctx: LabContext,
    cluster: LabCluster,
    pending: Series,
    rss: Series,
    latency: Series,
    duration_s: float,
) -> tuple[int, int, int, float]:
    """Run the producers; returns (acknowledged, failed, received by the consumer, p99 ms)."""
    broker = cluster.running_brokers()[0]
    async with Client(cluster.service_url, memory_limit_bytes=0) as client, Http() as http:
        consumer = await client.subscribe(TOPIC, "check", receiver_queue_size=1000)
        producers = [
            await RatedProducer.create(
                client,
                TOPIC,
                RATE,
                MESSAGE_BYTES,
                seed=ctx.seed * 100 + i,
                batching_enabled=False,
                max_pending_messages=1_000_000,
            )
            for i in range(PRODUCERS)
        ]
        received, target = 0, -1
        caught_up = asyncio.Event()  # the consumer holds every acknowledged message (target: known at the end)

        async def consume() -> None:
            nonlocal received
            while True:
                message = await consumer.receive()
                await consumer.acknowledge(message)
                received += 1
                if received == target:
                    caught_up.set()

        async def sample(at_s: float) -> None:
            await _sample_broker(http, broker, at_s, pending, rss)
            latency.add(at_s, p99_ms(*(p.take_window() for p in producers)))
            ctx.progress.tick(f"{pending.variant}: workload", at_s, duration_s)

        consuming = asyncio.create_task(consume())
        try:
            async with Recorder(1.0, sample):
                await asyncio.gather(*(p.run(duration_s) for p in producers))
            target = acked = sum(p.stats.acked for p in producers)
            if received >= target:
                caught_up.set()
            with contextlib.suppress(TimeoutError):  # the caller compares acked and received
                await asyncio.wait_for(caught_up.wait(), DRAIN_TIMEOUT_S)
        finally:
            consuming.cancel()
            await asyncio.gather(consuming, return_exceptions=True)
        failed = sum(p.stats.failed for p in producers)
        whole_run = p99_ms(*(p.stats.total for p in producers)) or 0.0
        return acked, failed, received, whole_run


async def _sample_broker(http: Http, broker: Server, at_s: float, pending: Series, rss: Series) -> None:
    samples = await http.metrics(broker.http_url)
    if samples is not None:
        pending.add(at_s, samples.get("pulsar_broker_publish_buffer_usage"))
        rss.add(at_s, samples.get("process_resident_memory_bytes"))


SCENARIO = Scenario(
    name="publish-throttling",
    title="Publish throttling: slow bookies must not fill the broker's memory",
    source="BIGO, Apache Pulsar performance tuning, part 1: publish throttling (Pulsar PR 6178)",
    finding="With slow bookie writes, messages read from producers pile up in broker memory until it runs out;"
    " maxMessagePublishBufferSizeInMB bounds the pending bytes by pausing the producers' connections.",
    baseline=f"{SETTING}=-1 (no limit)",
    tuned=f"{SETTING}={TUNED_MB}",
    guard=Guard("peak broker pending publish bytes", 3.0),
    run=run,
    summary_chart="pending-publish-bytes",
)
