"""Load-balancing simulation: Pulsar's shedding/placement pairs on a synthetic cluster.

The BIGO and WeChat reports (reference tuning-reports.md §1–2, pulsar-internals.md §1.6–1.9)
say: OverloadShedder (85 %) rarely fires, so traffic stays on a few brokers and a restarted
broker stays empty; ThresholdShedder spreads it; ThresholdShedder paired with
LeastLongTermMessageRate oscillates (the shedder measures machine load, the placement message
rate, so a shed bundle lands on another hot broker and comes back); pairing it with
LeastResourceUsageWithWeight, or using AvgShedder for both roles, does not. This bench replays
that with the real classes of ``broker/loadbalance`` — report update rule, bundle histories,
shedders, the placement pipeline and the unload planner — on simulated time: no processes, no
I/O, deterministic for a given ``--seed``.

Model (the defaults; printed by every run):

- 6 brokers, 120 bundles in 4 namespaces. Bundle traffic (bytes) is Zipf-skewed (s = 0.6);
  half the bundles carry small messages (512 B–2 KiB), half large ones (8–32 KiB); fan-out
  (out/in) 1–2; each bundle follows a slow mean-reverting walk (±4 %/min), all follow a
  6-hour wave (±20 %), and every 20 minutes 6 random pairs of bundles swap weights (hot spots
  move);
- a broker's usage comes from its bundles: CPU % half from messages, half from bytes;
  bandwidth in/out % against a 10 Gbit/s NIC; heap and direct memory loosely following
  traffic. Brokers 3–5 share their host with a bookie (BIGO co-locates them): +30 % CPU
  (±5) that no message rate shows — so message rate does not track machine load, which is
  the WeChat report's point. Traffic is scaled so that bandwidth out is 30 % of the NICs;
- the cluster starts with every bundle on brokers 0 and 1 (placed by the placement strategy
  while only they were up; the other four have just joined). At 5 h broker-0 restarts: its
  bundles are placed on the others at once (their clients look them up) and it rejoins
  empty 5 minutes later;
- every simulated minute each broker rebuilds its report and publishes it when
  ``needs_update`` says so (10 %, 15 min); the leader folds the published reports into its
  LoadData (bundle histories, time averages) and runs one shedding cycle (``plan_unloads``:
  the shedder, each destination through the placement pipeline, the 30-minute grace period);
  an unload moves the bundle to its destination at once.
- ``loadBalancerDistributeBundlesEvenlyEnabled`` is off for every pair (WeChat turned it off,
  PR 26609 defaults it off); ``--distribute-evenly`` turns it on, and then the even-spread
  filter, not the strategy, decides most placements.

Measures, per strategy pair:

- load spread, after the first hour (the initial catch-up): the mean over minutes of
  (max − min) and of the standard deviation of the brokers' weighted max usage (points);
- top-2 traffic share, after the first hour: the mean share of all bytes (in+out) on the two
  busiest brokers (an even spread gives 1/3);
- unloads, and move-backs: unloads that send a bundle back to a broker it left at most
  ``--moveback-minutes`` (60) before; landed above mean: unloads whose destination was busier
  than the cluster mean when the bundle arrived (PR 16059's complaint);
- restarted broker / mean: the restarted broker's usage over the cluster mean, averaged from
  its return to the end (0: it stayed empty; 1: it got its share).

The output: the parameters, the Markdown table of the pairs, and one JSON line (all figures).

    .venv/bin/python bench/lb_sim.py                 # all pairs, seed 1, 8 simulated hours
    .venv/bin/python bench/lb_sim.py --seed 7 --hours 12
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import random
import statistics
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from minipulsar.broker.loadbalance.load_data import LoadData  # noqa: E402
from minipulsar.broker.loadbalance.load_report import LocalBrokerData, NamespaceBundleStats, needs_update  # noqa: E402
from minipulsar.broker.loadbalance.placement.pipeline import select_broker  # noqa: E402
from minipulsar.broker.loadbalance.resource_usage import ResourceUsage, SystemResourceUsage  # noqa: E402
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings  # noqa: E402
from minipulsar.broker.loadbalance.strategies import create_strategies  # noqa: E402
from minipulsar.broker.loadbalance.unload_planner import plan_unloads, unload_done  # noqa: E402

DEFAULT_SEED = 1
MINUTE_S = 60.0

PAIRS = [
    ("OverloadShedder", "LeastLongTermMessageRate"),
    ("ThresholdShedder", "LeastLongTermMessageRate"),
    ("ThresholdShedder", "LeastResourceUsageWithWeight"),
    ("UniformLoadShedder", "LeastLongTermMessageRate"),
    ("AvgShedder", "AvgShedder"),
]


@dataclass(frozen=True, slots=True)
class SimParams:
    brokers: int = 6
    bundles: int = 120
    namespaces: int = 4
    hours: float = 8.0
    zipf_s: float = 0.6
    mean_usage_pct: float = 30.0
    initial_brokers: int = 2
    restart_broker: int = 0
    restart_at_hours: float = 5.0
    restart_downtime_minutes: float = 5.0
    moveback_minutes: float = 60.0
    warmup_hours: float = 1.0
    nic_bytes_s: float = 10e9 / 8
    walk_pct: float = 4.0
    wave_pct: float = 20.0
    wave_hours: float = 6.0
    cpu_from_messages: float = 0.5
    """Share of the CPU cost that depends on the message count (the rest on the bytes)."""
    bookie_hosts: int = 3
    bookie_cpu_pct: float = 30.0
    """The last ``bookie_hosts`` brokers share their host with a bookie (BIGO co-locates them):
    CPU % that no message rate shows (±5)."""
    shift_minutes: int = 20
    shift_pairs: int = 6
    """Every ``shift_minutes``, this many random pairs of bundles swap their Zipf weights: hot
    spots move, as they do in production."""
    distribute_evenly: bool = False
    """loadBalancerDistributeBundlesEvenlyEnabled for every pair (both reports turn it off)."""


@dataclass(slots=True)
class SimBundle:
    name: str
    weight: float
    msg_bytes: float
    fanout: float
    walk: float = 1.0


@dataclass(slots=True)
class SimBroker:
    name: str
    background_pct: float = 0.0
    up: bool = True
    bundles: set[str] = field(default_factory=set)
    published: LocalBrokerData | None = None
    published_at_s: float = -math.inf


@dataclass(slots=True)
class PairResult:
    shedder: str
    placement: str
    spread_max_min: float = 0.0
    spread_stddev: float = 0.0
    top2_share: float = 0.0
    unloads: int = 0
    movebacks: int = 0
    restarted_ratio: float = 0.0
    """The restarted broker's usage over the cluster mean, averaged from its return to the end."""
    landed_above_average: int = 0
    """Unloads whose destination was busier than the cluster mean when the bundle arrived."""


class Traffic:
    """Each bundle's traffic at a given minute: Zipf weight × size class × walk × wave."""

    def __init__(self, params: SimParams, rng: random.Random) -> None:
        self.params = params
        self._rng = rng
        ranks = list(range(1, params.bundles + 1))
        rng.shuffle(ranks)
        weights = [1.0 / r**params.zipf_s for r in ranks]
        total = sum(weights)
        self.bundles: list[SimBundle] = []
        for index, weight in enumerate(weights):
            small = index % 2 == 0
            low, high = (512.0, 2048.0) if small else (8192.0, 32768.0)
            size = math.exp(rng.uniform(math.log(low), math.log(high)))
            namespace = f"tenant/ns{index % params.namespaces}"
            name = f"{namespace}/0x{index:08x}_0x{index + 1:08x}"
            self.bundles.append(SimBundle(name, weight / total, size, rng.uniform(1.0, 2.0)))
        self.by_name = {b.name: b for b in self.bundles}
        self.total_bytes_in = 1.0
        self.cpu_msgs_s = 1.0
        """Messages per second (in+out) that take 100 % CPU on their own."""
        self.cpu_bytes_s = 1.0
        """Bytes per second (in+out) that take 100 % CPU on their own."""
        self._calibrate()

    def _calibrate(self) -> None:
        """Scale so that cluster-wide CPU (half from messages, half from bytes) and bandwidth out
        weigh alike, and the cluster's bandwidth out is ``mean_usage_pct`` of its NICs."""
        p = self.params
        bytes_out = sum(b.weight * b.fanout for b in self.bundles)
        msgs = sum(b.weight * (1 + b.fanout) / b.msg_bytes for b in self.bundles)
        bytes_all = sum(b.weight * (1 + b.fanout) for b in self.bundles)
        # per unit of bytes in: bw_out = bytes_out/nic = cpu = share·msgs/cpu_msgs + (1−share)·bytes_all/cpu_bytes
        self.total_bytes_in = p.mean_usage_pct / 100.0 * p.brokers * p.nic_bytes_s / bytes_out
        self.cpu_msgs_s = msgs * p.nic_bytes_s / bytes_out
        self.cpu_bytes_s = bytes_all * p.nic_bytes_s / bytes_out

    def step(self, minute: int) -> None:
        p = self.params
        if p.shift_minutes and minute % p.shift_minutes == 0:
            for _ in range(p.shift_pairs):
                a, b = self._rng.sample(self.bundles, 2)
                a.weight, b.weight = b.weight, a.weight
        sigma = self.params.walk_pct / 100.0
        for b in self.bundles:  # a mean-reverting walk in log space: no bundle drifts away for good
            b.walk = math.exp(0.98 * math.log(b.walk) + self._rng.gauss(0.0, sigma))

    def wave(self, minute: int) -> float:
        p = self.params
        return 1.0 + p.wave_pct / 100.0 * math.sin(2 * math.pi * minute / (p.wave_hours * 60.0))

    def stats(self, bundle: str, minute: int) -> NamespaceBundleStats:
        b = self.by_name[bundle]
        bytes_in = self.total_bytes_in * b.weight * b.walk * self.wave(minute)
        rate_in = bytes_in / b.msg_bytes
        return NamespaceBundleStats(
            rate_in, rate_in * b.fanout, bytes_in, bytes_in * b.fanout, topics=10, consumer_count=5, producer_count=5
        )


def broker_usage(
    stats: list[NamespaceBundleStats], traffic: Traffic, jitter: float = 0.0, background_pct: float = 0.0
) -> SystemResourceUsage:
    """A broker's five resources from its bundles' traffic (percent of 100); ``jitter`` moves
    the heap figure (garbage collection makes it noisy)."""
    nic = traffic.params.nic_bytes_s
    bw_in = 100.0 * sum(s.msg_throughput_in for s in stats) / nic
    bw_out = 100.0 * sum(s.msg_throughput_out for s in stats) / nic
    share = traffic.params.cpu_from_messages
    cpu = (
        3.0
        + background_pct
        + 100.0
        * (
            share * sum(s.msg_rate for s in stats) / traffic.cpu_msgs_s
            + (1 - share) * sum(s.msg_throughput for s in stats) / traffic.cpu_bytes_s
        )
    )
    busy = max(cpu, bw_in, bw_out)
    memory = 8.0 + 0.25 * busy + jitter
    direct = 4.0 + 0.4 * bw_in
    return SystemResourceUsage(
        ResourceUsage(cpu, 100),
        ResourceUsage(memory, 100),
        ResourceUsage(direct, 100),
        ResourceUsage(bw_in, 100),
        ResourceUsage(bw_out, 100),
    )


class ClusterSim:
    def __init__(self, params: SimParams, settings: LoadBalancerSettings, seed: int) -> None:
        self.params = params
        self.settings = settings
        self.traffic = Traffic(params, random.Random(seed))
        self._noise = random.Random(seed * 7919 + 1)
        self.shedder, self.placement = create_strategies(settings, random.Random(seed * 104_729 + 3))
        hosts = random.Random(seed * 31 + 7)
        self.brokers = {
            f"broker-{i}": SimBroker(
                f"broker-{i}",
                params.bookie_cpu_pct + hosts.uniform(-5.0, 5.0) if i >= params.brokers - params.bookie_hosts else 0.0,
            )
            for i in range(params.brokers)
        }
        self.owner: dict[str, str] = {}
        self.load_data = LoadData()
        self.departures: dict[str, list[tuple[float, str]]] = {}
        """Bundle → (minute, broker it left), for move-back detection."""
        self.result = PairResult(settings.shedding_strategy, settings.placement_strategy)
        self._samples: list[tuple[float, float, float]] = []
        self._restarted: list[float] = []
        self._rejoin_at = 0
        self.trace: list[tuple[int, dict[str, float]]] = []
        """(minute, broker → weighted max usage %) every 30 minutes."""

    # -- reports --------------------------------------------------------------------------------

    def _report(self, broker: SimBroker, minute: int) -> LocalBrokerData:
        stats = {b: self.traffic.stats(b, minute) for b in sorted(broker.bundles)}
        usage = broker_usage(list(stats.values()), self.traffic, self._noise.uniform(-2.0, 2.0), broker.background_pct)
        return LocalBrokerData.build(
            web_service_url=f"http://{broker.name}:8080",
            pulsar_service_url=f"pulsar://{broker.name}:6650",
            cluster="sim",
            usage=usage,
            bundles=set(broker.bundles),
            last_stats=stats,
            last_update_ms=int(minute * MINUTE_S * 1000),
        )

    def _publish(self, minute: int, force: bool = False) -> None:
        now_s = minute * MINUTE_S
        s = self.settings
        for broker in self.brokers.values():
            if not broker.up:
                continue
            current = self._report(broker, minute)
            if force or needs_update(
                broker.published,
                current,
                now_s - broker.published_at_s,
                s.report_update_threshold_pct,
                s.report_update_max_interval_minutes,
            ):
                broker.published, broker.published_at_s = current.with_changes_since(broker.published), now_s
        reports = {b.name: b.published for b in self.brokers.values() if b.up and b.published is not None}
        self.load_data.update_reports(reports)
        self.load_data.update_bundle_data()

    # -- moves ----------------------------------------------------------------------------------

    def _assign(self, bundle: str, broker: str) -> None:
        self.owner[bundle] = broker
        self.brokers[broker].bundles.add(bundle)

    def _place(self, bundle: str) -> None:
        destination = select_broker(bundle, self.load_data, self.placement, self.settings)
        assert destination is not None
        self.load_data.preallocate(bundle, destination)
        self._assign(bundle, destination)

    def _move(self, bundle: str, source: str, destination: str, minute: int) -> None:
        now = self._true_usage(minute)
        if now[destination][0] > statistics.fmean(u for u, _ in now.values()):
            self.result.landed_above_average += 1
        left = self.departures.setdefault(bundle, [])
        if any(broker == destination and minute - at <= self.params.moveback_minutes for at, broker in left):
            self.result.movebacks += 1
        left.append((minute, source))
        self.brokers[source].bundles.discard(bundle)
        self._assign(bundle, destination)
        self.result.unloads += 1

    # -- events ---------------------------------------------------------------------------------

    def _start(self) -> None:
        p = self.params
        for index, broker in enumerate(self.brokers.values()):
            broker.up = index < p.initial_brokers
        self._publish(0, force=True)
        for bundle in self.traffic.bundles:
            self._place(bundle.name)
        for broker in self.brokers.values():
            broker.up = True
        self._publish(0, force=True)

    def _restart(self, minute: int) -> None:
        broker = self.brokers[f"broker-{self.params.restart_broker}"]
        broker.up, orphans = False, sorted(broker.bundles)
        broker.bundles.clear()
        broker.published = None
        self._publish(minute, force=True)
        for bundle in orphans:
            self._place(bundle)

    def _rejoin(self, minute: int) -> None:
        self.brokers[f"broker-{self.params.restart_broker}"].up = True
        self._publish(minute, force=True)

    # -- loop -----------------------------------------------------------------------------------

    def run(self) -> PairResult:
        p, s = self.params, self.settings
        minutes = int(p.hours * 60)
        restart_at = int(p.restart_at_hours * 60)
        rejoin_at = self._rejoin_at = restart_at + int(p.restart_downtime_minutes)
        shedding_every = max(1, round(s.shedding_interval_minutes))
        self._start()
        for minute in range(1, minutes + 1):
            self.traffic.step(minute)
            if minute == restart_at:
                self._restart(minute)
            if minute == rejoin_at:
                self._rejoin(minute)
            self._publish(minute)
            if s.shedding_enabled and minute % shedding_every == 0:
                self._shed(minute)
            if minute >= p.warmup_hours * 60:
                self._sample(minute)
        return self._finish()

    def _shed(self, minute: int) -> None:
        now_s = minute * MINUTE_S
        for unload in plan_unloads(self.load_data, self.shedder, self.placement, self.settings, now_s):
            ok = self.owner.get(unload.bundle) == unload.broker and self.brokers[unload.destination].up
            if ok:
                self._move(unload.bundle, unload.broker, unload.destination, minute)
            unload_done(self.load_data, unload, ok, now_s)

    def _true_usage(self, minute: int) -> dict[str, tuple[float, float]]:
        """Broker → (weighted max usage %, bytes in+out) right now, brokers that are up."""
        out = {}
        for broker in self.brokers.values():
            if broker.up:
                stats = [self.traffic.stats(b, minute) for b in sorted(broker.bundles)]
                usage = broker_usage(stats, self.traffic, background_pct=broker.background_pct)
                out[broker.name] = (
                    100.0 * usage.max_resource_usage_with_weight(self.settings.weights),
                    sum(s.msg_throughput for s in stats),
                )
        return out

    def _sample(self, minute: int) -> None:
        now = self._true_usage(minute)
        if minute % 30 == 0:
            self.trace.append((minute, {b: u for b, (u, _) in now.items()}))
        usages = [u for u, _ in now.values()]
        traffic = sorted((t for _, t in now.values()), reverse=True)
        total = sum(traffic) or 1.0
        self._samples.append((max(usages) - min(usages), statistics.pstdev(usages), sum(traffic[:2]) / total))
        restarted = f"broker-{self.params.restart_broker}"
        if minute > self._rejoin_at and restarted in now:
            self._restarted.append(now[restarted][0] / statistics.fmean(usages))

    def _finish(self) -> PairResult:
        r = self.result
        if self._samples:
            r.spread_max_min = statistics.fmean(x[0] for x in self._samples)
            r.spread_stddev = statistics.fmean(x[1] for x in self._samples)
            r.top2_share = statistics.fmean(x[2] for x in self._samples)
        r.restarted_ratio = statistics.fmean(self._restarted) if self._restarted else 0.0
        return r


def simulate(
    shedder: str, placement: str, params: SimParams, seed: int, settings: LoadBalancerSettings | None = None
) -> PairResult:
    base = settings or LoadBalancerSettings()
    base = replace(base, distribute_bundles_evenly=params.distribute_evenly)
    return ClusterSim(params, base.with_strategies(shedder, placement), seed).run()


def run_all(params: SimParams, seed: int) -> list[PairResult]:
    return [simulate(shedder, placement, params, seed) for shedder, placement in PAIRS]


def markdown_table(results: list[PairResult], params: SimParams) -> str:
    lines = [
        f"| shedder + placement | load max−min (pts) | load stddev (pts) | top-2 traffic share | unloads | "
        f"move-backs (≤{params.moveback_minutes:.0f} min) | landed above mean | restarted broker / mean |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.shedder} + {r.placement} | {r.spread_max_min:.1f} | {r.spread_stddev:.1f} | "
            f"{r.top2_share:.2f} | {r.unloads} | {r.movebacks} | {r.landed_above_average} | "
            f"{r.restarted_ratio:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    defaults = SimParams()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--hours", type=float, default=defaults.hours)
    parser.add_argument("--brokers", type=int, default=defaults.brokers)
    parser.add_argument("--bundles", type=int, default=defaults.bundles)
    parser.add_argument("--moveback-minutes", type=float, default=defaults.moveback_minutes)
    parser.add_argument(
        "--distribute-evenly",
        action="store_true",
        help="loadBalancerDistributeBundlesEvenlyEnabled=true for every pair (Pulsar's default)",
    )
    parser.add_argument("--trace", metavar="SHEDDER+PLACEMENT", help="print hourly broker usages of one pair")
    parser.add_argument("--json", metavar="FILE", help="also write the final JSON line to FILE")
    args = parser.parse_args(argv)
    logging.getLogger("minipulsar.broker.loadbalance").setLevel(logging.ERROR)  # per-cycle warnings of the strategies
    params = SimParams(
        brokers=args.brokers,
        bundles=args.bundles,
        hours=args.hours,
        moveback_minutes=args.moveback_minutes,
        distribute_evenly=args.distribute_evenly,
    )
    print(f"# lb_sim seed={args.seed} {params}")
    if args.trace:
        shedder, placement = args.trace.split("+")
        settings = LoadBalancerSettings().with_strategies(shedder, placement)
        sim = ClusterSim(params, replace(settings, distribute_bundles_evenly=params.distribute_evenly), args.seed)
        sim.run()
        for minute, usages in sim.trace:
            print(f"{minute / 60:5.1f} h  " + "  ".join(f"{u:5.1f}" for _, u in sorted(usages.items())))
        return 0
    results = run_all(params, args.seed)
    print(markdown_table(results, params))
    summary = json.dumps(
        {
            "name": "lb_sim",
            "seed": args.seed,
            "params": dataclasses.asdict(params),
            "python": sys.version.split()[0],
            "results": [dataclasses.asdict(r) for r in results],
        }
    )
    print(summary)
    if args.json:
        Path(args.json).write_text(summary + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
