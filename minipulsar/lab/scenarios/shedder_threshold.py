"""shedder-threshold: OverloadShedder leaves load where it landed; ThresholdShedder spreads it
(BIGO part 1, ``loadBalancerLoadSheddingStrategy``).

Set-up: one bookie (E=Qw=Qa=1), three brokers with :data:`~minipulsar.lab.loadbalance_support.TIME_SCALED`
load-manager schedules and a NIC of :data:`NIC_GBPS` (so the workload's bytes are the load the
shedders see: all of it on one broker is ~:data:`ONE_BROKER_PCT` % bandwidth-in, under
OverloadShedder's 85 %). ``public/default`` has :data:`BUNDLES` bundles.

Workload: :data:`TOPICS` topics with Zipf-skewed rates (seeded) of :data:`MESSAGE_BYTES`-byte
messages. Broker-0 starts alone and owns every bundle (an HTTP lookup of each topic); then
brokers 1 and 2 join and the producers start (phase 1). Mid-run broker-0 is restarted: its
bundles go to the other two and it comes back empty (phase 2).

Figures: per broker, the ``msgRateIn`` of its load report (``GET /admin/v2/broker-stats/load-report``),
sampled every second; the spread is σ/mean of the three brokers' rates, averaged over the
samples after each phase's settle time; the restarted broker's share is its rate over the
cluster's, averaged over the last seconds of the run.
"""

from __future__ import annotations

import asyncio

from minipulsar.client import Client
from minipulsar.lab.cluster import LabCluster
from minipulsar.lab.loadbalance_support import TIME_SCALED, load_reports, lookup, msg_rate_in, window
from minipulsar.lab.probes import Http, Recorder
from minipulsar.lab.result import BASELINE, TUNED, Chart, Guard, Headline, Series, mean, stdev
from minipulsar.lab.scenario import LabContext, Measured, Scenario
from minipulsar.lab.topology import bookies_on_disks
from minipulsar.lab.workload import RatedProducer

SETTING = "loadBalancerLoadSheddingStrategy"
STRATEGIES = {
    BASELINE: "org.apache.pulsar.broker.loadbalance.impl.OverloadShedder",
    TUNED: "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
}
BROKERS = 3
BUNDLES = 8
TOPICS = 16
TOTAL_RATE = 100.0
MESSAGE_BYTES = 2_400
ZIPF_S = 0.8
NIC_GBPS = 0.0026
ONE_BROKER_PCT = round(100 * TOTAL_RATE * MESSAGE_BYTES * 8 / (NIC_GBPS * 1e9))
SETTLE_S = 6.0
TAIL_S = 4.0
COMMON = {
    **TIME_SCALED,
    "loadBalancerOverrideBrokerNicSpeedGbps": NIC_GBPS,
    "loadBalancerBrokerThresholdShedderPercentage": 5,
    "defaultNumberOfNamespaceBundles": BUNDLES,
}


def topic_rates(ctx: LabContext) -> dict[str, float]:
    weights = [1 / (rank + 1) ** ZIPF_S for rank in range(TOPICS)]
    ctx.rng("topic-rates").shuffle(weights)
    total = sum(weights)
    return {f"lab-shedder-{i}": TOTAL_RATE * w / total for i, w in enumerate(weights)}


async def run(ctx: LabContext) -> Measured:
    phase_s = ctx.profile.pick(11.0, 45.0)
    rates = topic_rates(ctx)
    per_broker: dict[str, list[Series]] = {}
    spread: dict[str, Series] = {}
    marks: dict[str, tuple[float, float, float]] = {}
    for variant in (BASELINE, TUNED):
        per_broker[variant] = [Series(f"{variant} broker-{i}", variant) for i in range(BROKERS)]
        spread[variant] = Series(variant, variant)
        settings = {**COMMON, SETTING: STRATEGIES[variant]}
        async with ctx.disk_set(variant) as disks:
            ctx.progress.phase(f"{variant}: a bookie and broker-0 ({SETTING}={STRATEGIES[variant].rsplit('.', 1)[-1]})")
            async with ctx.cluster(variant, bookies_on_disks(disks, 1), [settings], ensemble=(1, 1, 1)) as cluster:
                marks[variant] = await _workload(
                    ctx, cluster, settings, rates, per_broker[variant], spread[variant], phase_s
                )
    settled_spread = {
        v: mean(window(spread[v], m[0] + SETTLE_S, m[1]) + window(spread[v], m[1] + SETTLE_S, m[2]))
        for v, m in marks.items()
    }
    restarted_share = {v: _share(per_broker[v], 0, marks[v][2] - TAIL_S, marks[v][2]) for v in marks}
    top_share = {v: _top_share(per_broker[v], marks[v][1] + SETTLE_S, marks[v][2]) for v in marks}
    return Measured(
        headlines=[
            Headline(
                "per-broker load spread σ/mean (settled)",
                "",
                settled_spread[BASELINE],
                settled_spread[TUNED],
                "lower",
                report_figure="BIGO: load piles on a few brokers under OverloadShedder; even under ThresholdShedder",
            ),
            Headline(
                "restarted broker's share of the load at the end",
                "%",
                100 * restarted_share[BASELINE],
                100 * restarted_share[TUNED],
                "higher",
                report_figure="BIGO: a restarted broker stays empty under OverloadShedder",
            ),
            Headline(
                "busiest broker's share after the restart",
                "%",
                100 * top_share[BASELINE],
                100 * top_share[TUNED],
                "lower",
            ),
        ],
        charts=[
            Chart(
                "per-broker-load",
                "Message rate in per broker (load report); broker-0 restarts mid-run",
                "msg/s",
                per_broker[BASELINE] + per_broker[TUNED],
            ),
            Chart("load-spread", "Spread of the brokers' message rate in (σ/mean)", "σ/mean", list(spread.values())),
        ],
        notes=[
            f"{TOPICS} topics, {TOTAL_RATE:g} msg/s of {MESSAGE_BYTES} B in all, Zipf(s={ZIPF_S}) rates over the"
            f" topics (seeded), {BUNDLES} bundles; no consumers. NIC {NIC_GBPS * 1000:g} Mbit/s"
            f" (loadBalancerOverrideBrokerNicSpeedGbps): the whole load on one broker is ~{ONE_BROKER_PCT} %"
            " bandwidth-in, under OverloadShedder's 85 %.",
            "Time-scaled: shedding every 0.03 min (1.8 s), grace period 0.1 min, report max interval 0.05 min,"
            " loadBalancerHistoryResourcePercentage 0.5, loadBalancerBundleUnloadMinThroughputThreshold 0,"
            " loadBalancerBrokerThresholdShedderPercentage 5 (Pulsar: 10; the lab's three brokers have less room).",
            f"Phases: broker-0 alone owns every bundle, brokers 1-2 join and the producers start ({phase_s:g} s),"
            f" then broker-0 restarts ({phase_s:g} s). Spread: σ/mean of the three brokers' msgRateIn,"
            f" averaged from {SETTLE_S:g} s after each phase starts; the restarted broker's share over the last"
            f" {TAIL_S:g} s.",
        ],
    )


def _share(series: list[Series], index: int, start_s: float, end_s: float) -> float:
    mine = sum(window(series[index], start_s, end_s))
    total = sum(sum(window(s, start_s, end_s)) for s in series)
    return mine / total if total > 0 else 0.0


def _top_share(series: list[Series], start_s: float, end_s: float) -> float:
    sums = [sum(window(s, start_s, end_s)) for s in series]
    return max(sums) / sum(sums) if sum(sums) > 0 else 0.0


async def _workload(
    ctx: LabContext,
    cluster: LabCluster,
    settings: dict[str, object],
    rates: dict[str, float],
    per_broker: list[Series],
    spread: Series,
    phase_s: float,
) -> tuple[float, float, float]:
    """Returns (phase 1 start, restart, end) in seconds of the recorder."""
    variant = spread.variant
    async with Http() as http:
        first = cluster.running_brokers()[0]
        for topic in rates:  # broker-0, alone, takes every bundle
            assert await lookup(http, first, topic), f"lookup of {topic} at broker-0 failed"
        ctx.progress.phase(f"{variant}: brokers 1-2 join")
        await cluster.add_brokers([settings] * (BROKERS - 1))
        urls = ",".join(b.address for b in cluster.running_brokers())

        async def sample(at_s: float) -> None:
            reports = await load_reports(http, cluster.brokers)
            values = [msg_rate_in(r) for r in reports]
            for series, value in zip(per_broker, values):
                series.add(at_s, value)
            if sum(values) > 0:
                spread.add(at_s, stdev(values) / mean(values))
            ctx.progress.tick(f"{variant}: workload", at_s, 2 * phase_s)

        async with Client(f"pulsar://{urls}") as client:
            producers = [
                await RatedProducer.create(client, topic, rate, MESSAGE_BYTES, seed=ctx.seed, batching_enabled=False)
                for topic, rate in rates.items()
            ]
            async with Recorder(1.0, sample) as recorder:
                running = [asyncio.create_task(p.run(2 * phase_s + 4)) for p in producers]
                try:
                    await asyncio.sleep(phase_s)  # the workload's phase length, not a synchronisation
                    restart_at = recorder.elapsed()
                    ctx.progress.phase(f"{variant}: broker-0 restarts")
                    await cluster.stop_broker(0)
                    await cluster.start_broker(0)
                    await asyncio.sleep(phase_s)
                    end = recorder.elapsed()
                finally:
                    for task in running:
                        task.cancel()
                    await asyncio.gather(*running, return_exceptions=True)
    return 0.0, restart_at, end


SCENARIO = Scenario(
    name="shedder-threshold",
    title="ThresholdShedder vs OverloadShedder: spreading skewed bundles and filling a restarted broker",
    source="BIGO, Apache Pulsar performance tuning, part 1: load balancing (ThresholdShedder, Pulsar PR 6772)",
    finding="OverloadShedder sheds only past 85 % of a resource, so load stays on the brokers it landed on and a"
    " restarted broker stays empty; ThresholdShedder sheds from brokers above the cluster average + a threshold.",
    baseline=f"{SETTING}=OverloadShedder",
    tuned=f"{SETTING}=ThresholdShedder",
    guard=Guard("per-broker load spread σ/mean (settled)", 1.5),
    run=run,
    summary_chart="per-broker-load",
)
