"""Client-side bookie quarantine with an injected clock and seeded dice, and the quarantine
simulation bench (bench/quarantine_sim.py) run in-process."""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest
from prometheus_client import REGISTRY

from bench.quarantine_sim import DEFAULT_SEED, FAULTY, SimParams, buckets, compare, simulate
from minipulsar.bookkeeper.metrics import PREFIX
from minipulsar.bookkeeper.quarantine import BookieQuarantine, counts_toward_quarantine
from minipulsar.errors import (
    BookieReadOnlyError,
    ConnectionClosedError,
    LedgerFencedError,
    NoSuchEntryError,
    NoSuchLedgerError,
    NotEnoughBookiesError,
    PersistenceError,
    RequestTimeoutError,
    TooManyRequestsError,
)
from tests.support.clock import ManualClock

SEED = 4327
TIMEOUT = RequestTimeoutError("add timed out")


def quarantine(
    *,
    threshold: int = 5,
    time_s: float = 1800.0,
    ratio: float = 1.0,
    clock: ManualClock | None = None,
    seed: int = SEED,
    **kwargs,
) -> BookieQuarantine:
    return BookieQuarantine(
        error_threshold_per_interval=threshold,
        quarantine_time_s=time_s,
        quarantine_ratio=ratio,
        rng=random.Random(seed),
        clock=clock or ManualClock(1_000.0),
        **kwargs,
    )


def fail(target: BookieQuarantine, bookie: str, times: int, error: BaseException = TIMEOUT) -> None:
    for _ in range(times):
        target.record_error(bookie, error)


def quarantine_metric(name: str) -> float:
    """A sample of the quarantine's metrics in this process's registry (0 before the first)."""
    return REGISTRY.get_sample_value(PREFIX + name) or 0.0


# -- which errors count -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        NoSuchEntryError("x"),
        NoSuchLedgerError("x"),
        LedgerFencedError("x"),
        BookieReadOnlyError("x"),
        asyncio.CancelledError(),
        KeyboardInterrupt(),
    ],
)
def test_expected_errors_do_not_count(error: BaseException) -> None:
    assert not counts_toward_quarantine(error)
    target = quarantine(threshold=1)
    fail(target, "b1", 100, error)
    assert target.check() == [] and not target.is_quarantined("b1")


@pytest.mark.parametrize(
    "error",
    [
        RequestTimeoutError("x"),
        TooManyRequestsError("x"),
        PersistenceError("x"),
        NotEnoughBookiesError("x"),
        OSError("disk"),
        RuntimeError("bug"),
    ],
)
def test_timeouts_and_unexpected_errors_count(error: BaseException) -> None:
    assert counts_toward_quarantine(error)


@pytest.mark.parametrize("error", [ConnectionClosedError("x"), ConnectionResetError("x")])
def test_connection_errors_count_only_when_enabled(error: BaseException) -> None:
    assert not counts_toward_quarantine(error)
    assert counts_toward_quarantine(error, connection_errors_count=True)
    default, enabled = quarantine(threshold=3), quarantine(threshold=3, connection_errors_count=True)
    fail(default, "b1", 3, error)
    fail(enabled, "b1", 3, error)
    assert default.check() == [] and enabled.check() == ["b1"]


# -- the classic rule ---------------------------------------------------------------------------


def test_threshold_errors_in_one_interval_quarantine_the_bookie() -> None:
    target = quarantine(threshold=5)
    fail(target, "b1", 4)
    fail(target, "b2", 5)
    fail(target, "b3", 9)
    assert target.check() == ["b2", "b3"]
    assert target.quarantined() == {"b2", "b3"}
    assert target.is_quarantined("b2") and not target.is_quarantined("b1")


def test_each_check_starts_a_new_interval() -> None:
    """Goal: counters are taken and reset by every pass: 4 + 4 errors split over two intervals
    never reach a threshold of 5."""
    target = quarantine(threshold=5)
    fail(target, "b1", 4)
    assert target.check() == []
    fail(target, "b1", 4)
    assert target.check() == []
    assert target.check() == [], "nothing carried over"
    assert not target.is_quarantined("b1")


def test_quarantine_expires_after_quarantine_time() -> None:
    clock = ManualClock(1_000.0)
    target = quarantine(threshold=1, time_s=1800.0, clock=clock)
    fail(target, "b1", 1)
    assert target.check() == ["b1"]
    clock.now_s = 2_799.9
    assert target.is_quarantined("b1")
    clock.now_s = 2_800.0
    assert not target.is_quarantined("b1")
    assert target.quarantined() == frozenset()


def test_faulty_again_while_quarantined_keeps_the_expiry() -> None:
    """Goal: BookKeeper's quarantineBookie is a no-op for a quarantined bookie: a later faulty
    interval neither extends nor re-counts the quarantine."""
    clock = ManualClock(0.0)
    target = quarantine(threshold=1, time_s=100.0, clock=clock)
    fail(target, "b1", 1)
    assert target.check() == ["b1"]
    before = quarantine_metric("BOOKIE_QUARANTINE")
    clock.now_s = 60.0
    fail(target, "b1", 10)
    assert target.check() == []
    assert quarantine_metric("BOOKIE_QUARANTINE") == before
    clock.now_s = 100.0
    assert not target.is_quarantined("b1")


def test_release_all_ends_every_quarantine() -> None:
    target = quarantine(threshold=1)
    fail(target, "b1", 1)
    fail(target, "b2", 1)
    assert target.check() == ["b1", "b2"]
    target.release_all()
    assert target.quarantined() == frozenset()
    assert quarantine_metric("QUARANTINED_BOOKIES") == 0


def test_metrics_count_quarantines_skips_and_the_quarantined() -> None:
    quarantined_before, skipped_before = (
        quarantine_metric("BOOKIE_QUARANTINE"),
        quarantine_metric("BOOKIE_QUARANTINE_SKIP"),
    )
    always, never = quarantine(threshold=1, ratio=1.0), quarantine(threshold=1, ratio=0.0)
    fail(always, "b1", 1)
    fail(always, "b2", 1)
    fail(never, "b1", 1)
    always.check()
    never.check()
    assert quarantine_metric("BOOKIE_QUARANTINE") == quarantined_before + 2
    assert quarantine_metric("BOOKIE_QUARANTINE_SKIP") == skipped_before + 1
    always.quarantined()
    assert quarantine_metric("QUARANTINED_BOOKIES") == 2


@pytest.mark.parametrize("kwargs", [{"threshold": 0}, {"time_s": -1.0}, {"ratio": 1.5}, {"ratio": -0.1}])
def test_bad_settings_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        quarantine(**kwargs)


# -- the probabilistic rule (BookKeeper PR 2327) ------------------------------------------------


def test_ratio_zero_never_quarantines() -> None:
    target = quarantine(threshold=1, ratio=0.0)
    for _ in range(1_000):
        fail(target, "b1", 50)
        assert target.check() == []
    assert not target.is_quarantined("b1")


@pytest.mark.parametrize("ratio", [0.1, 0.3, 0.7])
def test_ratio_p_quarantines_about_p_of_faulty_intervals(ratio: float) -> None:
    """Goal: each faulty interval quarantines with probability p. Method: 4,000 faulty
    intervals, each on a fresh quarantine (so an earlier quarantine cannot swallow the dice),
    seeded; the fraction is within 3 points of p (binomial stddev <= 0.8 points)."""
    rng = random.Random(SEED)
    quarantined = 0
    for _ in range(4_000):
        target = BookieQuarantine(
            error_threshold_per_interval=5,
            quarantine_time_s=1800.0,
            quarantine_ratio=ratio,
            rng=rng,
            clock=ManualClock(1_000.0),
        )
        fail(target, "b1", 5)
        quarantined += len(target.check())
    assert abs(quarantined / 4_000 - ratio) < 0.03, quarantined


def test_brokers_with_a_ratio_lock_a_bookie_out_at_different_moments() -> None:
    """Goal: the point of PR 2327: 20 brokers seeing the same faulty bookie every interval do not
    all quarantine it in the same pass (ratio 0.3), while the classic rule makes them (ratio 1.0)."""

    def first_passes(ratio: float) -> set[int]:
        brokers = [quarantine(threshold=5, ratio=ratio, seed=SEED + i) for i in range(20)]
        first: dict[int, int] = {}
        for interval in range(30):
            for index, broker in enumerate(brokers):
                fail(broker, "hot", 10)
                if broker.check():
                    first.setdefault(index, interval)
        return set(first.values())

    assert first_passes(1.0) == {0}
    assert len(first_passes(0.3)) >= 4


# -- the simulation bench ------------------------------------------------------------------------


def test_quarantine_sim_probabilistic_rule_swings_less_than_classic() -> None:
    """Goal: the issue's simulation criterion, with the bench's default parameters and seed.
    Method: 20 brokers, 5 bookies, one overloaded; the classic rule shows the on/off cycle (the
    hot bookie's 5-minute traffic drops near zero and comes back above 100 MB/s more than once);
    the probabilistic rule's traffic stddev is lower."""
    params = SimParams()
    classic, probabilistic = compare(params, DEFAULT_SEED, 0.3)
    hot = buckets(classic.samples_mb_s[FAULTY], params.bucket_s // params.sample_s)
    troughs = sum(1 for before, value in itertools.pairwise(hot) if value < 10 <= before)
    peaks = sum(1 for before, value in itertools.pairwise(hot) if value > 100 >= before)
    assert troughs >= 2 and peaks >= 2, hot
    assert probabilistic.traffic_stddev_mb_s < classic.traffic_stddev_mb_s, (classic, probabilistic)
    assert classic.quarantines > probabilistic.quarantines > 0


def test_quarantine_sim_is_deterministic_for_a_seed() -> None:
    params = SimParams(duration_s=1_200)
    first, second = simulate(0.3, params, seed=9), simulate(0.3, params, seed=9)
    assert first.samples_mb_s == second.samples_mb_s and first.quarantines == second.quarantines
    assert simulate(0.3, params, seed=10).samples_mb_s != first.samples_mb_s
