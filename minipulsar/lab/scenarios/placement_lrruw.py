"""placement-lrruw: ThresholdShedder with LeastLongTermMessageRate placement moves bundles back
and forth; with LeastResourceUsageWithWeight it does not (WeChat, Pulsar PR 16281,
``loadBalancerLoadPlacementStrategy``).

Set-up: one bookie (E=Qw=Qa=1), three brokers, ThresholdShedder, the
:data:`~minipulsar.lab.loadbalance_support.TIME_SCALED` load-manager schedules, a NIC of
:data:`NIC_GBPS` (the bytes are the machine load the shedder sees) and
``loadBalancerDistributeBundlesEvenlyEnabled=false`` (as WeChat ran it) in both variants; only the
placement strategy differs.

Workload: half the topics carry large messages at a low rate (:data:`LARGE`), half small ones at a
high rate (:data:`SMALL`), so a broker's message rate and its bandwidth disagree: the shedder
sheds the broker busiest in bytes, and LeastLongTermMessageRate puts the bundle on the broker
with the fewest *messages* — often one already busy in bytes — whence it is shed again.

Figures: the owner of every bundle, from each broker's load report (``bundles``), sampled every
second; a move is an owner change; a move-back is a move to a broker the bundle left earlier in
the run, both counted after :data:`WARMUP_S` (the run is shorter than an "hour" of the
time-scaled schedule: 60 shedding cycles).
"""

from __future__ import annotations

import asyncio

from minipulsar.client import Client
from minipulsar.lab.cluster import LabCluster
from minipulsar.lab.loadbalance_support import TIME_SCALED, load_reports
from minipulsar.lab.probes import Http, Recorder
from minipulsar.lab.result import BASELINE, TUNED, Chart, Guard, Headline, Series
from minipulsar.lab.scenario import LabContext, Measured, Scenario
from minipulsar.lab.topology import bookies_on_disks
from minipulsar.lab.workload import RatedProducer

SETTING = "loadBalancerLoadPlacementStrategy"
STRATEGIES = {
    BASELINE: "org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate",
    TUNED: "org.apache.pulsar.broker.loadbalance.impl.LeastResourceUsageWithWeight",
}
BROKERS = 3
BUNDLES = 16
TOPICS = 18
LARGE = (8_192, 4.0)
"""(bytes, msg/s) of a large-message topic: 32 KiB/s, few messages."""
SMALL = (256, 40.0)
"""(bytes, msg/s) of a small-message topic: 10 KiB/s, many messages."""
NIC_GBPS = 0.002
WARMUP_S = 6.0
"""Moves before this are the first placements settling (every bundle starts wherever its first lookup put it)."""
COMMON = {
    **TIME_SCALED,
    "loadBalancerLoadSheddingStrategy": "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
    "loadBalancerOverrideBrokerNicSpeedGbps": NIC_GBPS,
    "loadBalancerDistributeBundlesEvenlyEnabled": False,
    "defaultNumberOfNamespaceBundles": BUNDLES,
}


def topic_sizes(ctx: LabContext) -> dict[str, tuple[int, float]]:
    kinds = [LARGE, SMALL] * (TOPICS // 2)
    ctx.rng("topic-kinds").shuffle(kinds)
    return {f"lab-placement-{i}": kind for i, kind in enumerate(kinds)}


class Ownership:
    """Every bundle's owner as last seen, with the moves and move-backs seen so far."""

    def __init__(self, variant: str, warmup_s: float) -> None:
        self.warmup_s = warmup_s
        self.owner: dict[str, str] = {}
        self.left: dict[str, set[str]] = {}
        self.moves = Series(variant, variant)
        self.move_backs = Series(variant, variant)
        self._moves = 0
        self._backs = 0

    def observe(self, at_s: float, owners: dict[str, str]) -> None:
        for bundle, broker in owners.items():
            previous = self.owner.get(bundle)
            if previous is not None and previous != broker and at_s >= self.warmup_s:
                self._moves += 1
                if broker in self.left.get(bundle, set()):
                    self._backs += 1
                self.left.setdefault(bundle, set()).add(previous)
            self.owner[bundle] = broker
        self.moves.add(at_s, float(self._moves))
        self.move_backs.add(at_s, float(self._backs))


async def run(ctx: LabContext) -> Measured:
    duration_s = ctx.profile.pick(18.0, 90.0)
    sizes = topic_sizes(ctx)
    seen = {v: Ownership(v, WARMUP_S) for v in STRATEGIES}
    for variant, strategy in STRATEGIES.items():
        settings = {**COMMON, SETTING: strategy}
        async with ctx.disk_set(variant) as disks:
            ctx.progress.phase(f"{variant}: a bookie and three brokers ({SETTING}={strategy.rsplit('.', 1)[-1]})")
            async with ctx.cluster(
                variant, bookies_on_disks(disks, 1), [settings] * BROKERS, ensemble=(1, 1, 1)
            ) as cluster:
                await _workload(ctx, cluster, sizes, seen[variant], duration_s)
    moves = {v: s.moves.values()[-1] if s.moves.points else 0.0 for v, s in seen.items()}
    backs = {v: s.move_backs.values()[-1] if s.move_backs.points else 0.0 for v, s in seen.items()}
    return Measured(
        headlines=[
            Headline(
                "bundle moves",
                "moves",
                moves[BASELINE],
                moves[TUNED],
                "lower",
                report_figure="WeChat: bundles kept moving with LeastLongTermMessageRate; stable with PR 16281",
            ),
            Headline("bundle move-backs", "moves", backs[BASELINE], backs[TUNED], "lower"),
        ],
        charts=[
            Chart("bundle-moves", "Bundle ownership changes (cumulative)", "moves", [s.moves for s in seen.values()]),
            Chart(
                "move-backs",
                "Moves back to a broker the bundle had left (cumulative)",
                "moves",
                [s.move_backs for s in seen.values()],
            ),
        ],
        notes=[
            f"{TOPICS} topics in {BUNDLES} bundles: half {LARGE[0]} B at {LARGE[1]:g} msg/s, half {SMALL[0]} B at"
            f" {SMALL[1]:g} msg/s (which is which: seeded); NIC {NIC_GBPS * 1000:g} Mbit/s, so bytes are the load"
            " the shedder sees and message rate does not track it.",
            "Time-scaled: shedding every 0.03 min (1.8 s), grace period 0.1 min, history 0.5.",
            "Moves are counted from the owners in the brokers'"
            f" load reports, sampled every second (a bundle moved twice within a second counts once),"
            f" from {WARMUP_S:g} s on.",
        ],
    )


async def _workload(
    ctx: LabContext, cluster: LabCluster, sizes: dict[str, tuple[int, float]], seen: Ownership, duration_s: float
) -> None:
    variant = seen.moves.variant
    urls = ",".join(b.address for b in cluster.running_brokers())
    async with Http() as http, Client(f"pulsar://{urls}") as client:
        producers = [
            await RatedProducer.create(client, topic, rate, size, seed=ctx.seed, batching_enabled=False)
            for topic, (size, rate) in sizes.items()
        ]

        async def sample(at_s: float) -> None:
            owners: dict[str, str] = {}
            for index, report in enumerate(await load_reports(http, cluster.brokers)):
                bundles = (report or {}).get("bundles", [])
                for bundle in bundles if isinstance(bundles, list) else []:
                    owners[str(bundle)] = f"broker-{index}"
            seen.observe(at_s, owners)
            ctx.progress.tick(f"{variant}: workload", at_s, duration_s)

        async with Recorder(1.0, sample):
            await asyncio.gather(*(p.run(duration_s) for p in producers))


SCENARIO = Scenario(
    name="placement-lrruw",
    title="LeastResourceUsageWithWeight vs LeastLongTermMessageRate placement under ThresholdShedder",
    source="WeChat, Apache Pulsar load balancing in practice (Pulsar PR 16281)",
    finding="ThresholdShedder sheds by machine load but LeastLongTermMessageRate places by message rate, so a"
    " shed bundle lands on another loaded broker and moves again; LeastResourceUsageWithWeight places by the"
    " same resource usage and the bundles settle.",
    baseline=f"{SETTING}=LeastLongTermMessageRate",
    tuned=f"{SETTING}=LeastResourceUsageWithWeight",
    guard=Guard("bundle moves", 2.0),
    run=run,
    summary_chart="bundle-moves",
)
