"""quarantine-probabilistic: the bookie client's quarantine makes every broker drop a hot bookie
at once and take it back at once, so its load swings; quarantining with a probability spreads
that out (BIGO part 1, bookie load balancing; BookKeeper PR 2327, ``bookkeeperClientQuarantineRatio``).

Set-up: :data:`BROKERS` brokers, :data:`BOOKIES` bookies, every ledger E=Qw=Qa=2. ``bookie-0`` is
the hot bookie: the lab fault ``minipulsarAddErrorAboveAddsPerSecond`` (bookie/add_fault.py)
makes it answer adds beyond :data:`HOT_LIMIT_FRACTION` of its fair share with TooManyRequests,
as an overloaded bookie would. A refused add makes that ledger replace the bookie (an ensemble
change) and counts toward the broker's quarantine of it. The quarantine is time-scaled from
minutes to seconds (:data:`QUARANTINE_SETTINGS`: a health check every second, and
:data:`ERROR_THRESHOLD` error in a check quarantines a bookie for :data:`QUARANTINE_S` s), and
every topic's ledger rolls over about every :data:`ROLLOVER_S` s
(``managedLedgerMaxLedgerRolloverTimeMinutes``), so new ensembles are picked all the time and
quarantine decides where they go.

Workload: :data:`TOPICS` topics spread over the brokers by their bundles, each with one
producer of :data:`RATE` unbatched messages of :data:`MESSAGE_BYTES` a second (seeded payloads).

Baseline: ``bookkeeperClientQuarantineRatio=1.0`` (the classic rule); tuned: :data:`TUNED_RATIO`.

Figures: each bookie's inbound MB/s (the rate of its ``bookie_WRITE_BYTES``, entry payload
bytes added, scraped every second and stamped when each answer came), after a warm-up of
:data:`WARMUP_S` s. Headline: the standard deviation over time of the hot bookie's inbound MB/s
(the swing BIGO's chart showed; their 75 → 40 MB/s is the same figure over a cluster of
bookies), and the mean over bookies of each bookie's standard deviation over time
(bench/quarantine_sim.py's measure); the hot bookie's inbound range (p95 less p5); the
producers' publish p99.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from minipulsar.client import Client
from minipulsar.lab.cluster import LabCluster
from minipulsar.lab.probes import Http, Recorder, Samples, rate_series
from minipulsar.lab.result import BASELINE, TUNED, Chart, Guard, Headline, Series, mean, percentile, stdev
from minipulsar.lab.scenario import LabContext, Measured, Scenario
from minipulsar.lab.topology import bookies_on_disks
from minipulsar.lab.workload import RatedProducer, p99_ms

SETTING = "bookkeeperClientQuarantineRatio"
HOT_FAULT = "minipulsarAddErrorAboveAddsPerSecond"
TUNED_RATIO = 0.3
BROKERS = 3
BOOKIES = 4
ENSEMBLE = (2, 2, 2)
TOPICS = 24
RATE = 20.0
MESSAGE_BYTES = 8 * 1024
HOT_LIMIT_FRACTION = 0.5
FAIR_ADDS_PER_S = TOPICS * RATE * ENSEMBLE[1] / BOOKIES
HOT_LIMIT_ADDS_PER_S = HOT_LIMIT_FRACTION * FAIR_ADDS_PER_S
QUARANTINE_S = 4
ERROR_THRESHOLD = 1
ROLLOVER_S = 1.0
WARMUP_S = 4.0
QUARANTINE_SETTINGS: dict[str, object] = {
    "bookkeeperClientHealthCheckIntervalSeconds": 1,
    "bookkeeperClientHealthCheckErrorThresholdPerInterval": ERROR_THRESHOLD,
    "bookkeeperClientHealthCheckQuarantineTimeInSeconds": QUARANTINE_S,
    "managedLedgerMinLedgerRolloverTimeMinutes": 0,
    "managedLedgerMaxLedgerRolloverTimeMinutes": ROLLOVER_S / 60,
    "defaultNumberOfNamespaceBundles": 8,
}
MB = 1_000_000


async def run(ctx: LabContext) -> Measured:
    duration_s = ctx.profile.pick(60.0, 75.0)
    inbound: dict[str, list[Series]] = {}
    p99: dict[str, float] = {}
    for variant, ratio in ((BASELINE, 1.0), (TUNED, TUNED_RATIO)):
        async with ctx.disk_set(variant) as disks:
            ctx.progress.phase(f"{variant}: {BOOKIES} bookies (bookie-0 hot), {BROKERS} brokers ({SETTING}={ratio})")
            specs = bookies_on_disks(disks, BOOKIES)
            specs[0] = replace(specs[0], settings={**specs[0].settings, HOT_FAULT: HOT_LIMIT_ADDS_PER_S})
            brokers = [{**QUARANTINE_SETTINGS, SETTING: ratio}] * BROKERS
            async with ctx.cluster(variant, specs, brokers, ensemble=ENSEMBLE) as cluster:
                inbound[variant], p99[variant] = await _workload(ctx, cluster, variant, duration_s)
    hot = {v: [value for t, value in s[0].points if t >= WARMUP_S] for v, s in inbound.items()}
    swing = {v: stdev(values) for v, values in hot.items()}
    per_bookie = {
        v: mean(stdev(value for t, value in s.points if t >= WARMUP_S) for s in series) for v, series in inbound.items()
    }
    spread = {v: percentile(values, 0.95) - percentile(values, 0.05) for v, values in hot.items()}
    return Measured(
        headlines=[
            Headline(
                "hot bookie inbound stddev over time",
                "MB/s",
                swing[BASELINE],
                swing[TUNED],
                "lower",
                report_figure="75 → 40 MB/s (stddev of bookie inbound traffic)",
            ),
            Headline(
                "mean per-bookie inbound stddev over time", "MB/s", per_bookie[BASELINE], per_bookie[TUNED], "lower"
            ),
            Headline("hot bookie inbound range (p95 - p5)", "MB/s", spread[BASELINE], spread[TUNED], "lower"),
            Headline("publish latency p99 (whole run)", "ms", p99[BASELINE], p99[TUNED], "lower"),
        ],
        charts=[
            Chart(
                "hot-bookie-inbound",
                f"Hot bookie's inbound traffic: {SETTING} 1.0 vs {TUNED_RATIO:g}",
                "MB/s",
                [Series(v, v, s[0].points) for v, s in inbound.items()],
            ),
            Chart(
                "bookie-inbound",
                "Every bookie's inbound traffic",
                "MB/s",
                [series for variant_series in inbound.values() for series in variant_series],
            ),
        ],
        notes=[
            f"Time-scaled: health check every 1 s (Pulsar: 60), threshold {ERROR_THRESHOLD} error a check (Pulsar: 5)"
            f" and quarantine {QUARANTINE_S} s"
            f" (Pulsar: 1800), ledgers roll over every ~{ROLLOVER_S:g} s (managedLedgerMaxLedgerRolloverTimeMinutes"
            f"={ROLLOVER_S / 60:.4f}; Pulsar: 10 min to 4 h).",
            f"bookie-0 refuses adds beyond {HOT_LIMIT_ADDS_PER_S:.0f} adds/s with TooManyRequests"
            f" ({HOT_LIMIT_FRACTION:.0%} of its fair share of {FAIR_ADDS_PER_S:.0f}): the lab fault"
            " minipulsarAddErrorAboveAddsPerSecond, standing for BIGO's overloaded bookie.",
            f"{TOPICS} topics × {RATE:g} msg/s × {MESSAGE_BYTES // 1024} KiB unbatched, over {BROKERS} brokers"
            f" (8 bundles); {BOOKIES} bookies, E=Qw=Qa=2.",
            f"Inbound = rate of each bookie's bookie_WRITE_BYTES, per second; stddevs over time skip the first"
            f" {WARMUP_S:g} s. With {BROKERS} brokers (BIGO had tens) a ratio below 1 has few brokers to"
            " desynchronise, so the effect is smaller and noisier than the report's.",
            "Publish latency includes the ensemble changes every refused add causes (both variants).",
        ],
    )


async def _workload(
    ctx: LabContext, cluster: LabCluster, variant: str, duration_s: float
) -> tuple[list[Series], float]:
    """Run the producers; returns each bookie's inbound MB/s series and the publish p99 (ms)."""
    written = [Series(f"bookie-{i}{' (hot)' if i == 0 else ''}", variant) for i in range(len(cluster.bookies))]
    async with Client(cluster.service_url) as client, Http() as http:
        producers = [
            await RatedProducer.create(
                client, f"lab-quarantine-{i}", RATE, MESSAGE_BYTES, seed=ctx.seed * 100 + i, batching_enabled=False
            )
            for i in range(TOPICS)
        ]

        async def scrape(url: str) -> tuple[float, Samples | None]:
            # Stamped when the answer came, i.e. about when the bookie read its counter: on a
            # loaded machine a scrape can take a good part of the second, and stamping it when it
            # was sent would put that delay into the per-second rates as noise.
            samples = await http.metrics(url)
            return recorder.elapsed(), samples

        async def sample(at_s: float) -> None:
            scrapes = await asyncio.gather(*(scrape(b.http_url) for b in cluster.bookies))
            for series, (answered_s, samples) in zip(written, scrapes):
                if samples is not None:
                    series.add(answered_s, samples.get("bookie_WRITE_BYTES"))
            ctx.progress.tick(f"{variant}: workload", at_s, duration_s)

        recorder = Recorder(1.0, sample)
        async with recorder:
            await asyncio.gather(*(p.run(duration_s) for p in producers))
        whole_run = p99_ms(*(p.stats.total for p in producers)) or 0.0
    rates = [rate_series(series) for series in written]
    return [Series(s.label, s.variant, [(t, v / MB) for t, v in s.points]) for s in rates], whole_run


SCENARIO = Scenario(
    name="quarantine-probabilistic",
    title="Probabilistic bookie quarantine: a hot bookie's load stops swinging",
    source="BIGO, Apache Pulsar performance tuning, part 1: bookie load balancing (BookKeeper PR 2327)",
    finding="Every broker quarantined an erroring bookie in the same minute and released it in the same minute,"
    " so its load swung on and off; quarantining with probability bookkeeperClientQuarantineRatio < 1 cut the"
    " standard deviation of bookie inbound traffic from 75 to 40 MB/s.",
    baseline=f"{SETTING}=1.0 (the classic rule, BookKeeper's default)",
    tuned=f"{SETTING}={TUNED_RATIO:g}",
    guard=Guard("hot bookie inbound stddev over time", 1.2),
    run=run,
    summary_chart="hot-bookie-inbound",
)
