"""What the entry-cache scenarios (``cache-readers``, ``cache-mark-delete``) share: the cache
settings both variants run with, and the probe of the broker's cache and the bookie's reads.

:class:`CacheProbe` scrapes, once per sample, the broker's ``pulsar_ml_cache_hits`` and
``pulsar_ml_cache_misses`` counters (entries served from the cache / read from the bookies) and
the bookie's ``bookkeeper_server_READ_ENTRY_REQUEST`` count (read requests answered) and
``bookie_READ_BYTES`` (payload bytes read). Every figure is a difference of these counters
between two scrapes, so the set-up before the first sample does not count: the hit rate of a
window is ``Δhits / (Δhits + Δmisses)``, bookie reads per second ``Δrequests / Δt``.

Invariant: the four cumulative series of one probe have a point at the same instants (a scrape
that fails on either process adds no point to any of them).
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from minipulsar.client import Client
from minipulsar.lab.cluster import Server
from minipulsar.lab.probes import Http, Recorder, rate_series
from minipulsar.lab.result import Chart, Series
from minipulsar.lab.scenario import LabContext
from minipulsar.lab.topology import bookies_on_disks

Workload = Callable[[Client, Recorder], Awaitable[None]]
"""A variant's load: given the client and the (not yet started) recorder, it runs the load with
the recorder entered around the part that is measured."""

CACHE_SIZE_MB = 1
"""``managedLedgerCacheSizeMB`` of both variants: the smallest non-zero budget, so the cache is
a few seconds of the workload's writes and what is evicted when decides the hit rate."""

CACHE_SETTINGS: dict[str, object] = {"managedLedgerCacheSizeMB": CACHE_SIZE_MB}

HITS, MISSES = "pulsar_ml_cache_hits_total", "pulsar_ml_cache_misses_total"
BOOKIE_READS = "bookkeeper_server_READ_ENTRY_REQUEST_count"
BOOKIE_READ_BYTES = "bookie_READ_BYTES"


@dataclass
class CacheProbe:
    """Cumulative cache and bookie-read counters of one variant, sampled over time."""

    variant: str
    hits: Series = field(init=False)
    misses: Series = field(init=False)
    bookie_reads: Series = field(init=False)
    bookie_read_bytes: Series = field(init=False)

    def __post_init__(self) -> None:
        self.hits, self.misses = Series("hits", self.variant), Series("misses", self.variant)
        self.bookie_reads = Series("bookie reads", self.variant)
        self.bookie_read_bytes = Series("bookie read bytes", self.variant)

    async def sample(self, http: Http, broker: Server, bookie: Server, at_s: float) -> None:
        broker_samples = await http.metrics(broker.http_url)
        bookie_samples = await http.metrics(bookie.http_url)
        if broker_samples is None or bookie_samples is None:
            return
        self.hits.add(at_s, broker_samples.sum(HITS))
        self.misses.add(at_s, broker_samples.sum(MISSES))
        self.bookie_reads.add(at_s, bookie_samples.sum(BOOKIE_READS, success="true"))
        self.bookie_read_bytes.add(at_s, bookie_samples.sum(BOOKIE_READ_BYTES))

    # -- figures ---------------------------------------------------------------------------------

    def hit_rate_series(self) -> Series:
        """The hit rate (%) of each window between two samples (none where nothing was read)."""
        rates = Series(self.variant, self.variant)
        points = list(zip(self.hits.points, self.misses.points))
        for ((_, h0), (_, m0)), ((t1, h1), (_, m1)) in itertools.pairwise(points):
            reads = (h1 - h0) + (m1 - m0)
            if reads > 0:
                rates.add(t1, 100.0 * (h1 - h0) / reads)
        return rates

    def bookie_reads_series(self) -> Series:
        series = rate_series(self.bookie_reads)
        series.label = self.variant
        return series

    def hit_rate(self) -> float:
        """The hit rate (%) over the whole measurement."""
        hits, misses = _delta(self.hits), _delta(self.misses)
        return 100.0 * hits / (hits + misses) if hits + misses > 0 else 0.0

    def bookie_reads_per_s(self) -> float:
        return _per_s(self.bookie_reads)

    def bookie_read_kib_per_s(self) -> float:
        return _per_s(self.bookie_read_bytes) / 1024

    def misses_per_s(self) -> float:
        return _per_s(self.misses)


async def run_variant(
    ctx: LabContext,
    variant: str,
    settings: Mapping[str, object],
    probe: CacheProbe,
    duration_s: float,
    workload: Workload,
) -> None:
    """One variant: a bookie and a broker with :data:`CACHE_SETTINGS` and ``settings``, then
    ``workload`` with a :class:`Recorder` that feeds ``probe`` every second."""
    shown = ", ".join(f"{key}={str(value).lower()}" for key, value in settings.items())
    async with ctx.disk_set(variant) as disks:
        ctx.progress.phase(f"{variant}: starting a bookie and a broker ({shown})")
        async with ctx.cluster(
            variant,
            bookies_on_disks(disks, 1),
            [{**CACHE_SETTINGS, **settings}],
            ensemble=(1, 1, 1),
        ) as cluster:
            broker, bookie = cluster.running_brokers()[0], cluster.bookies[0]
            async with Client(cluster.service_url) as client, Http() as http:

                async def sample(at_s: float) -> None:
                    await probe.sample(http, broker, bookie, at_s)
                    ctx.progress.tick(f"{variant}: workload", at_s, duration_s)

                await workload(client, Recorder(1.0, sample))


def cache_charts(probes: Mapping[str, CacheProbe], hit_rate_title: str) -> list[Chart]:
    """The two charts both cache scenarios draw, each variant a series: the entry cache's hit
    rate and the bookies' read requests per second."""
    return [
        Chart("cache-hit-rate", hit_rate_title, "hit rate (%)", [p.hit_rate_series() for p in probes.values()]),
        Chart(
            "bookie-reads",
            "Bookie read requests per second",
            "reads/s",
            [p.bookie_reads_series() for p in probes.values()],
        ),
    ]


def _delta(series: Series) -> float:
    return series.points[-1][1] - series.points[0][1] if len(series.points) > 1 else 0.0


def _per_s(series: Series) -> float:
    if len(series.points) < 2:
        return 0.0
    elapsed = series.points[-1][0] - series.points[0][0]
    return _delta(series) / elapsed if elapsed > 0 else 0.0
