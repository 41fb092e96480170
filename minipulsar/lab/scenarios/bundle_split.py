"""bundle-split: an automatic bundle split disconnects every client of the bundle while it is
hot; pre-split bundles with auto split off do not (BIGO part 1, ``loadBalancerAutoBundleSplitEnabled``).

Set-up: one bookie (E=Qw=Qa=1), two brokers (Pulsar splits nothing with one) with
:data:`~minipulsar.lab.loadbalance_support.TIME_SCALED` load-manager schedules and shedding off
(``loadBalancerSheddingEnabled=false``, both variants: only splits move bundles here). Baseline:
``public/default`` starts with one bundle (``defaultNumberOfNamespaceBundles=1``) and auto split
on with a low limit, ``loadBalancerNamespaceBundleMaxTopics`` = :data:`MAX_TOPICS` (Pulsar: 1000;
the lab has :data:`TOPICS` topics); every split unloads its halves
(``loadBalancerAutoUnloadSplitBundlesEnabled``, Pulsar's default). Tuned: the namespace is
created with :data:`PRESPLIT` bundles and auto split is off.

Workload: one producer per topic at :data:`RATE` msg/s of :data:`MESSAGE_BYTES` B, no batching.

Figures: client disconnects = the producers' reconnections (their connection handler counts one
per re-attachment after the broker closed the producer or the connection), cumulative, sampled
every second; publish p99 per second (from each message's intended send time, so a producer
waiting for its topic's new owner shows as latency).
"""

from __future__ import annotations

import asyncio

from minipulsar.client import Client
from minipulsar.lab.cluster import LabCluster
from minipulsar.lab.loadbalance_support import TIME_SCALED
from minipulsar.lab.probes import Recorder
from minipulsar.lab.result import BASELINE, TUNED, Chart, Guard, Headline, Series
from minipulsar.lab.scenario import LabContext, Measured, Scenario
from minipulsar.lab.topology import bookies_on_disks
from minipulsar.lab.workload import RatedProducer, p99_ms

TOPICS = 16
RATE = 10.0
MESSAGE_BYTES = 1_024
MAX_TOPICS = 2
PRESPLIT = 16
COMMON = {**TIME_SCALED, "loadBalancerSheddingEnabled": False, "loadBalancerNamespaceBundleMaxTopics": MAX_TOPICS}
VARIANTS = {
    BASELINE: {"loadBalancerAutoBundleSplitEnabled": True, "defaultNumberOfNamespaceBundles": 1},
    TUNED: {"loadBalancerAutoBundleSplitEnabled": False, "defaultNumberOfNamespaceBundles": PRESPLIT},
}


def reconnections(producer: RatedProducer) -> int:
    """How many times the producer re-attached after losing its broker (its handler's count)."""
    handler = getattr(producer.producer, "_handler", None)
    return int(getattr(handler, "reconnections", 0))


async def run(ctx: LabContext) -> Measured:
    duration_s = ctx.profile.pick(18.0, 75.0)
    disconnects = {v: Series(v, v) for v in VARIANTS}
    p99 = {v: Series(v, v) for v in VARIANTS}
    for variant, settings in VARIANTS.items():
        async with ctx.disk_set(variant) as disks:
            ctx.progress.phase(f"{variant}: a bookie and two brokers ({settings})")
            async with ctx.cluster(
                variant, bookies_on_disks(disks, 1), [{**COMMON, **settings}] * 2, ensemble=(1, 1, 1)
            ) as cluster:
                await _workload(ctx, cluster, disconnects[variant], p99[variant], duration_s)
    total = {v: max(s.values(), default=0.0) for v, s in disconnects.items()}
    worst = {v: max(s.values(), default=0.0) for v, s in p99.items()}
    return Measured(
        headlines=[
            Headline(
                "client disconnects",
                "reconnections",
                total[BASELINE],
                total[TUNED],
                "lower",
                report_figure="BIGO: a split disconnects all the bundle's clients; they turned auto split off",
            ),
            Headline("publish p99 (worst second)", "ms", worst[BASELINE], worst[TUNED], "lower"),
        ],
        charts=[
            Chart("disconnects", "Producers' reconnections (cumulative)", "reconnections", list(disconnects.values())),
            Chart("publish-p99", "Publish latency p99 per second", "ms", list(p99.values())),
        ],
        notes=[
            f"{TOPICS} topics, one producer each at {RATE:g} msg/s of {MESSAGE_BYTES} B (no batching), two brokers.",
            f"Time-scaled: the leader's cycle (shedding off, then the split check) every 0.03 min (1.8 s);"
            f" loadBalancerNamespaceBundleMaxTopics={MAX_TOPICS} stands for Pulsar's 1000 topics (or the"
            " MaxMsgRate / MaxBandwidthMbytes limits a busy bundle reaches), so the one bundle splits in rounds"
            f" until no bundle has more than {MAX_TOPICS} topics.",
            f"Tuned: public/default created with {PRESPLIT} bundles (defaultNumberOfNamespaceBundles), auto split off.",
        ],
    )


async def _workload(ctx: LabContext, cluster: LabCluster, disconnects: Series, p99: Series, duration_s: float) -> None:
    variant = disconnects.variant
    urls = ",".join(b.address for b in cluster.running_brokers())
    async with Client(f"pulsar://{urls}") as client:
        producers = [
            await RatedProducer.create(
                client, f"lab-split-{i}", RATE, MESSAGE_BYTES, seed=ctx.seed + i, batching_enabled=False
            )
            for i in range(TOPICS)
        ]

        async def sample(at_s: float) -> None:
            disconnects.add(at_s, float(sum(reconnections(p) for p in producers)))
            p99.add(at_s, p99_ms(*(p.take_window() for p in producers)))
            ctx.progress.tick(f"{variant}: workload", at_s, duration_s)

        async with Recorder(1.0, sample):
            await asyncio.gather(*(p.run(duration_s) for p in producers))


SCENARIO = Scenario(
    name="bundle-split",
    title="Auto bundle split vs pre-split bundles: clients disconnected while the bundle is hot",
    source="BIGO, Apache Pulsar performance tuning, part 1: load balancing (bundle split)",
    finding="An automatic split unloads the bundle and disconnects all its clients when it is busiest;"
    " create namespaces with enough bundles and turn auto split off.",
    baseline="loadBalancerAutoBundleSplitEnabled=true, 1 bundle (low split limits, time-scaled)",
    tuned=f"loadBalancerAutoBundleSplitEnabled=false, {PRESPLIT} pre-split bundles",
    guard=Guard("client disconnects", 3.0),
    run=run,
    summary_chart="disconnects",
)
