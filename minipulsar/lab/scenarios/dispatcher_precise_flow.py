"""dispatcher-precise-flow: a slow consumer of batches holds permits × batch size messages unless
the broker converts permits to entries (BIGO part 1, ``preciseDispatcherFlowControl``).

Set-up: one broker, one bookie. A producer leaves a backlog of :data:`BACKLOG` messages in
batches of :data:`BATCH`, then keeps publishing at :data:`PRODUCE_RATE`; a Shared consumer with a
receiver queue of :data:`RECEIVER_QUEUE` subscribes from the earliest message and processes
:data:`CONSUME_RATE` messages a second, acknowledging each. Pulsar counts permits in messages
but, without precise flow control, reads one *entry* per permit: the consumer's first flow
of ``RECEIVER_QUEUE`` permits brings ``RECEIVER_QUEUE`` batches, ``RECEIVER_QUEUE × BATCH``
messages, and every later flow as many batches as permits. With it, permits become
``ceil(permits / average messages per entry)`` entries.

Figure: messages the consumer holds (delivered, not yet acknowledged: the subscription's
``unackedMessages``, sampled every second from the topic stats) and the bytes they take.
"""

from __future__ import annotations

import asyncio

from minipulsar.client import Client, ConsumerType, InitialPosition
from minipulsar.lab.cluster import Server
from minipulsar.lab.probes import Http, Recorder
from minipulsar.lab.result import BASELINE, TUNED, Chart, Guard, Headline, Series, mean
from minipulsar.lab.scenario import LabContext, Measured, Scenario
from minipulsar.lab.topology import bookies_on_disks, topic_stats
from minipulsar.lab.workload import RatedProducer

BATCH = 100
RECEIVER_QUEUE = 100
BACKLOG = 20_000
BACKLOG_RATE = 10_000
PRODUCE_RATE = 200
CONSUME_RATE = 400
MESSAGE_BYTES = 1_024
TOPIC = "lab-precise-flow"
SETTING = "preciseDispatcherFlowControl"


async def run(ctx: LabContext) -> Measured:
    duration_s = ctx.profile.pick(25.0, 90.0)
    held = {variant: Series(variant, variant) for variant in (BASELINE, TUNED)}
    for variant, precise in ((BASELINE, False), (TUNED, True)):
        async with ctx.disk_set(variant) as disks:
            ctx.progress.phase(f"{variant}: starting a bookie and a broker ({SETTING}={str(precise).lower()})")
            async with ctx.cluster(
                variant,
                bookies_on_disks(disks, 1),
                [{SETTING: precise}],
                ensemble=(1, 1, 1),
            ) as cluster:
                await _workload(ctx, cluster.service_url, cluster.running_brokers()[0], held[variant], duration_s)
    mean_held = {v: mean(s.values()) for v, s in held.items()}
    peak_held = {v: max(s.values(), default=0.0) for v, s in held.items()}
    held_kib = {v: Series(v, v, [(t, n * MESSAGE_BYTES / 1024) for t, n in s.points]) for v, s in held.items()}
    return Measured(
        headlines=[
            Headline("messages held by the consumer (mean)", "msgs", mean_held[BASELINE], mean_held[TUNED], "lower"),
            Headline("messages held by the consumer (peak)", "msgs", peak_held[BASELINE], peak_held[TUNED], "lower"),
            Headline(
                "bytes held by the consumer (mean)",
                "KiB",
                mean_held[BASELINE] * MESSAGE_BYTES / 1024,
                mean_held[TUNED] * MESSAGE_BYTES / 1024,
                "lower",
            ),
        ],
        charts=[
            Chart(
                "held-messages",
                f"Messages held by a slow consumer (receiver queue {RECEIVER_QUEUE})",
                "messages",
                list(held.values()),
            ),
            Chart("held-bytes", "Payload bytes held by the consumer", "KiB", list(held_kib.values())),
        ],
        notes=[
            f"Producer: a backlog of {BACKLOG} messages of {MESSAGE_BYTES} B in batches of {BATCH}, then"
            f" {PRODUCE_RATE} msg/s; consumer: Shared, receiverQueueSize={RECEIVER_QUEUE}, {CONSUME_RATE} msg/s,"
            " each acknowledged.",
            "Held = the subscription's unackedMessages (delivered, not acknowledged), sampled every second.",
        ],
    )


async def _workload(ctx: LabContext, service_url: str, broker: Server, held: Series, duration_s: float) -> None:
    async with Client(service_url) as client, Http() as http:
        # the subscription exists before the backlog, so it keeps every message
        await (await client.subscribe(TOPIC, "slow", consumer_type=ConsumerType.Shared)).close()
        producer = await RatedProducer.create(
            client,
            TOPIC,
            BACKLOG_RATE,
            MESSAGE_BYTES,
            seed=ctx.seed,
            batching_max_messages=BATCH,
            batching_max_publish_delay_ms=1000,  # full batches only: every entry holds BATCH messages
        )
        ctx.progress.phase(f"{held.variant}: a backlog of {BACKLOG} messages")
        await producer.run(BACKLOG / BACKLOG_RATE)
        producer.rate_per_s = PRODUCE_RATE

        async def consume() -> None:
            while True:
                message = await consumer.receive()
                await asyncio.sleep(1 / CONSUME_RATE)  # the slow consumer's work per message
                await consumer.acknowledge(message)

        async def sample(at_s: float) -> None:
            stats = await topic_stats(http, broker, TOPIC)
            subscription = (stats or {}).get("subscriptions", {}).get("slow")
            if subscription is not None:
                held.add(at_s, float(subscription.get("unackedMessages", 0)))
            ctx.progress.tick(f"{held.variant}: workload", at_s, duration_s)

        consumer = await client.subscribe(
            TOPIC,
            "slow",
            consumer_type=ConsumerType.Shared,
            receiver_queue_size=RECEIVER_QUEUE,
            initial_position=InitialPosition.Earliest,
        )
        consuming = asyncio.create_task(consume())
        try:
            async with Recorder(1.0, sample):
                await producer.run(duration_s)
        finally:
            consuming.cancel()
            await asyncio.gather(consuming, return_exceptions=True)


SCENARIO = Scenario(
    name="dispatcher-precise-flow",
    title="Precise dispatcher flow control: a slow consumer of batches",
    source="BIGO, Apache Pulsar performance tuning, part 1: broker flow control (Pulsar 2.6.0)",
    finding="Permits count messages but the broker sent entries, so a consumer got permits × batch size"
    " messages; preciseDispatcherFlowControl converts permits to entries by the average batch size.",
    baseline=f"{SETTING}=false (Pulsar's default)",
    tuned=f"{SETTING}=true",
    guard=Guard("messages held by the consumer (mean)", 3.0),
    run=run,
)
