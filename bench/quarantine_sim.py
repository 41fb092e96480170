"""Quarantine simulation: does probabilistic quarantine (BookKeeper PR 2327) calm an overloaded bookie?

BIGO's report (reference tuning-reports.md §1): with the classic rule every broker sees
errors from a hot bookie in the same minute, quarantines it for 30 minutes, and lets it back
in the same minute, so its inbound traffic swings on and off with the quarantine period;
quarantining with probability p cut the standard deviation of bookie inbound traffic from
75 to 40 MB/s. This bench replays that with the real placement and quarantine code
(minipulsar/bookkeeper/placement.py, quarantine.py) and simulated time — no processes, no I/O,
deterministic for a given ``--seed``.

Model (the defaults; printed by every run):

- 20 brokers, 5 bookies; each broker keeps 8 ledgers open, each written at 2 MB/s with
  E=3, Qw=2, Qa=2, so a ledger sends 2·Qw/E ≈ 1.33 MB/s to each bookie of its ensemble and
  an even spread is 128 MB/s per bookie;
- a ledger rolls over every 600 s (``managedLedgerMinLedgerRolloverTimeMinutes`` = 10; phases
  staggered), and each new ensemble comes from ``select_ensemble`` with
  ``DefaultEnsemblePlacementPolicy``, the broker's own rng and its own ``BookieQuarantine``;
- bookie-0 handles 100 MB/s; above that, each second each ledger writing to it sees a failed
  request (a timeout) with probability ``0.1 · (load / capacity - 1)``, capped at 1. Errors
  are only counted (they stand for timed-out reads and slow adds): ensemble changes are
  left out, so only the placement of new ledgers reacts, as in BIGO's description.
  ``--ensemble-change-on-error`` makes every error a failed add that replaces the bookie in
  that ledger at once: the hot bookie then sheds load by itself, sits at its capacity and is
  hardly ever quarantined, under either rule;
- each broker runs its health check every 60 s (own phase): threshold 5 errors, quarantine
  1800 s (Pulsar's defaults); 1 s steps for 10 800 s (3 hours: five or six quarantine cycles,
  so one seed's luck does not decide the comparison).

Both runs use the same seeds for setup, placement and errors; they differ only in the
quarantine ratio (and in everything that follows from it).

Measure: inbound MB/s of each bookie averaged per 60 s sample (a Prometheus ``rate()``), then
**traffic stddev = the mean over bookies of each bookie's standard deviation over time** (how
much a bookie's inbound traffic swings; the on/off cycle of the classic rule shows up in the
hot bookie and, mirrored, in the others). The hot bookie's own swing and its inbound MB/s per
5-minute bucket are printed too.

    .venv/bin/python bench/quarantine_sim.py                       # classic vs ratio 0.3, seed 1
    .venv/bin/python bench/quarantine_sim.py --seed 7 --ratio 0.5

The last line is exactly ``classic_stddev=<MB/s> probabilistic_stddev=<MB/s>``.
"""

from __future__ import annotations

import argparse
import heapq
import random
import statistics
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from minipulsar.bookkeeper.cluster_view import ClusterView  # noqa: E402
from minipulsar.bookkeeper.placement import (  # noqa: E402
    DefaultEnsemblePlacementPolicy,
    select_ensemble,
    select_replacement,
)
from minipulsar.bookkeeper.quarantine import BookieQuarantine  # noqa: E402
from minipulsar.errors import RequestTimeoutError  # noqa: E402

DEFAULT_SEED = 1
FAULTY = "bookie-0"


@dataclass(frozen=True, slots=True)
class SimParams:
    brokers: int = 20
    bookies: int = 5
    ledgers_per_broker: int = 8
    ledger_rate_mb_s: float = 2.0
    ensemble_size: int = 3
    write_quorum: int = 2
    ack_quorum: int = 2
    faulty_capacity_mb_s: float = 100.0
    error_probability_per_overload: float = 0.1
    """Per ledger-second writing to the hot bookie: this times the relative overload."""
    ensemble_change_on_error: bool = False
    """An error is a failed add: the ledger replaces the hot bookie at once (select_replacement)."""
    ledger_rollover_s: int = 600
    health_check_interval_s: int = 60
    error_threshold_per_interval: int = 5
    quarantine_time_s: float = 1800.0
    duration_s: int = 10_800
    sample_s: int = 60
    bucket_s: int = 300

    @property
    def bookie_ids(self) -> list[str]:
        return [f"bookie-{i}" for i in range(self.bookies)]

    def describe(self) -> str:
        return (
            f"brokers={self.brokers} bookies={self.bookies} ledgers_per_broker={self.ledgers_per_broker} "
            f"ledger_rate={self.ledger_rate_mb_s} MB/s E/Qw/Qa={self.ensemble_size}/{self.write_quorum}/"
            f"{self.ack_quorum} {FAULTY}_capacity={self.faulty_capacity_mb_s} MB/s "
            f"error_p=min(1, {self.error_probability_per_overload}*(load/capacity-1)) "
            f"rollover={self.ledger_rollover_s} s health_check={self.health_check_interval_s} s "
            f"threshold={self.error_threshold_per_interval} quarantine={self.quarantine_time_s:.0f} s "
            f"duration={self.duration_s} s sample={self.sample_s} s"
            + (" ensemble_change_on_error" if self.ensemble_change_on_error else "")
        )


@dataclass(slots=True)
class SimResult:
    quarantine_ratio: float
    samples_mb_s: dict[str, list[float]]
    """Bookie → its inbound MB/s averaged over each ``sample_s``."""
    quarantines: int = 0
    """Quarantines entered, all brokers together."""
    per_bookie_stddev_mb_s: dict[str, float] = field(default_factory=dict)

    @property
    def traffic_stddev_mb_s(self) -> float:
        """The mean over bookies of each bookie's stddev of inbound MB/s over time."""
        return statistics.fmean(self.per_bookie_stddev_mb_s.values())


@dataclass(slots=True)
class _Broker:
    quarantine: BookieQuarantine
    policy: DefaultEnsemblePlacementPolicy
    ensembles: list[list[str]]
    health_check_phase_s: int
    ledgers_on_faulty: int = 0


class _Simulation:
    """One run. Each broker owns ``ledgers_per_broker`` topics, each with one open ledger.

    Invariant: ``inbound_mb_s[b]`` is the sum over open ledgers whose ensemble holds ``b`` of their share.
    """

    def __init__(self, params: SimParams, seed: int, quarantine_ratio: float) -> None:
        self.params, self.now_s, self.quarantines = params, 0.0, 0
        self.share_mb_s = params.ledger_rate_mb_s * params.write_quorum / params.ensemble_size
        self.inbound_mb_s = dict.fromkeys(params.bookie_ids, 0.0)
        # Separate streams, seeded alike in both runs: they start identical and differ only by the
        # quarantine ratio and what follows from it.
        setup_rng, self.error_rng = random.Random(seed), random.Random(seed + 1)
        self.rollovers: list[tuple[float, int, int]] = []
        self.brokers = [self._new_broker(i, seed, quarantine_ratio, setup_rng) for i in range(params.brokers)]
        for broker_index, broker in enumerate(self.brokers):
            for topic in range(params.ledgers_per_broker):
                broker.ensembles.append([])
                self._roll_over(broker, topic)
                first_rollover_s = setup_rng.uniform(0, params.ledger_rollover_s)
                heapq.heappush(self.rollovers, (first_rollover_s, broker_index, topic))
        self.timeout = RequestTimeoutError("add timed out")

    def _new_broker(self, index: int, seed: int, ratio: float, setup_rng: random.Random) -> _Broker:
        quarantine = BookieQuarantine(
            error_threshold_per_interval=self.params.error_threshold_per_interval,
            quarantine_time_s=self.params.quarantine_time_s,
            quarantine_ratio=ratio,
            rng=random.Random(seed * 1_000 + 2 * index),
            clock=lambda: self.now_s,
        )
        policy = DefaultEnsemblePlacementPolicy(random.Random(seed * 1_000 + 2 * index + 1))
        phase_s = setup_rng.randrange(self.params.health_check_interval_s)
        return _Broker(quarantine, policy, [], phase_s)

    def _roll_over(self, broker: _Broker, topic: int) -> None:
        """Rolls the topic's managed ledger over: its next ledger gets a freshly chosen ensemble."""
        self._move(broker, broker.ensembles[topic], -1)
        ensemble = select_ensemble(
            broker.policy,
            self.params.ensemble_size,
            self.params.write_quorum,
            self.params.ack_quorum,
            self._view(broker),
        )
        broker.ensembles[topic] = ensemble
        self._move(broker, ensemble, +1)

    def _move(self, broker: _Broker, ensemble: list[str], sign: int) -> None:
        for bookie in ensemble:
            self.inbound_mb_s[bookie] += sign * self.share_mb_s
        broker.ledgers_on_faulty += sign * (FAULTY in ensemble)

    def _fail_requests(self, broker: _Broker, error_p: float) -> None:
        for topic, ensemble in enumerate(broker.ensembles):
            if FAULTY in ensemble and self.error_rng.random() < error_p:
                broker.quarantine.record_error(FAULTY, self.timeout)
                if self.params.ensemble_change_on_error:
                    self._replace(broker, topic, ensemble.index(FAULTY))

    def _replace(self, broker: _Broker, topic: int, index: int) -> None:
        """An ensemble change: the topic's ledger writes to a replacement of ``ensemble[index]`` from now on."""
        ensemble = broker.ensembles[topic]
        self._move(broker, ensemble, -1)
        replacement = select_replacement(
            broker.policy, ensemble, index, self.params.write_quorum, self.params.ack_quorum, self._view(broker)
        )
        broker.ensembles[topic] = [*ensemble[:index], replacement, *ensemble[index + 1 :]]
        self._move(broker, broker.ensembles[topic], +1)

    def _view(self, broker: _Broker) -> ClusterView:
        return ClusterView(
            writable=frozenset(self.params.bookie_ids), quarantined=broker.quarantine.quarantined(), now_s=self.now_s
        )

    def step(self) -> None:
        """One simulated second: due rollovers, errors from the hot bookie, due health checks."""
        params = self.params
        while self.rollovers and self.rollovers[0][0] <= self.now_s:
            _, broker_index, topic = heapq.heappop(self.rollovers)
            self._roll_over(self.brokers[broker_index], topic)
            heapq.heappush(self.rollovers, (self.now_s + params.ledger_rollover_s, broker_index, topic))
        overload = self.inbound_mb_s[FAULTY] / params.faulty_capacity_mb_s - 1.0
        error_p = min(1.0, params.error_probability_per_overload * overload)
        for broker in self.brokers:
            if error_p > 0 and broker.ledgers_on_faulty:
                self._fail_requests(broker, error_p)
            if int(self.now_s) % params.health_check_interval_s == broker.health_check_phase_s:
                self.quarantines += len(broker.quarantine.check())
        self.now_s += 1.0


def simulate(quarantine_ratio: float, params: SimParams = SimParams(), seed: int = DEFAULT_SEED) -> SimResult:
    """Runs the model for ``params.duration_s`` seconds with one ``bookkeeperClientQuarantineRatio``."""
    sim = _Simulation(params, seed, quarantine_ratio)
    result = SimResult(quarantine_ratio, {bookie: [] for bookie in params.bookie_ids})
    sums = dict.fromkeys(params.bookie_ids, 0.0)
    for second in range(params.duration_s):
        sim.step()
        for bookie, mb_s in sim.inbound_mb_s.items():
            sums[bookie] += mb_s
        if (second + 1) % params.sample_s == 0:
            for bookie in sums:
                result.samples_mb_s[bookie].append(sums[bookie] / params.sample_s)
                sums[bookie] = 0.0
    result.per_bookie_stddev_mb_s = {
        bookie: statistics.pstdev(samples) for bookie, samples in result.samples_mb_s.items()
    }
    result.quarantines = sim.quarantines
    return result


def compare(
    params: SimParams = SimParams(), seed: int = DEFAULT_SEED, probabilistic_ratio: float = 0.3
) -> tuple[SimResult, SimResult]:
    """(classic, probabilistic): the same seeds, quarantine ratio 1.0 and ``probabilistic_ratio``."""
    return simulate(1.0, params, seed), simulate(probabilistic_ratio, params, seed)


def buckets(samples: list[float], per_bucket: int) -> list[float]:
    """Means of consecutive groups of ``per_bucket`` samples (the last group may be shorter)."""
    return [statistics.fmean(samples[i : i + per_bucket]) for i in range(0, len(samples), per_bucket)]


def report(result: SimResult, params: SimParams, label: str) -> list[str]:
    hot = buckets(result.samples_mb_s[FAULTY], params.bucket_s // params.sample_s)
    swings = " ".join(f"{bookie}={stddev:.1f}" for bookie, stddev in result.per_bookie_stddev_mb_s.items())
    return [
        f"{label} (bookkeeperClientQuarantineRatio={result.quarantine_ratio}):",
        f"  {FAULTY} inbound MB/s per {params.bucket_s // 60}-min bucket: " + " ".join(f"{v:.0f}" for v in hot),
        f"  quarantines entered (all brokers): {result.quarantines}",
        f"  stddev over time per bookie (MB/s): {swings}",
        f"  traffic stddev (mean over bookies): {result.traffic_stddev_mb_s:.2f} MB/s",
    ]


def main(argv: list[str] | None = None) -> int:
    defaults = SimParams()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})")
    parser.add_argument("--ratio", type=float, default=0.3, help="probabilistic quarantine ratio (default 0.3)")
    parser.add_argument("--duration-s", type=int, default=defaults.duration_s)
    parser.add_argument("--quarantine-time-s", type=float, default=defaults.quarantine_time_s)
    parser.add_argument("--rollover-s", type=int, default=defaults.ledger_rollover_s)
    parser.add_argument("--capacity-mb-s", type=float, default=defaults.faulty_capacity_mb_s)
    parser.add_argument(
        "--ensemble-change-on-error", action=argparse.BooleanOptionalAction, default=defaults.ensemble_change_on_error
    )
    args = parser.parse_args(argv)
    params = replace(
        SimParams(),
        duration_s=args.duration_s,
        quarantine_time_s=args.quarantine_time_s,
        ledger_rollover_s=args.rollover_s,
        faulty_capacity_mb_s=args.capacity_mb_s,
        ensemble_change_on_error=args.ensemble_change_on_error,
    )
    print(f"seed={args.seed} {params.describe()}")
    classic, probabilistic = compare(params, args.seed, args.ratio)
    for line in report(classic, params, "classic") + report(probabilistic, params, "probabilistic"):
        print(line)
    print(
        f"classic_stddev={classic.traffic_stddev_mb_s:.2f} probabilistic_stddev={probabilistic.traffic_stddev_mb_s:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
