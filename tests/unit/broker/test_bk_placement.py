"""Ensemble placement policies on hand-made ClusterViews with seeded generators (no I/O).

Each test draws many decisions from a seeded ``random.Random``; a failing assertion names the
seed and the layout so the case can be replayed.
"""

from __future__ import annotations

import itertools
import random
import statistics
from collections import Counter
from collections.abc import Mapping

import pytest

from minipulsar.bookkeeper.bookie_load_poller import load_report
from minipulsar.bookkeeper.cluster_view import BookieLoadReport, ClusterView
from minipulsar.bookkeeper.load_aware import LoadAwareEnsemblePlacementPolicy, load_weights
from minipulsar.bookkeeper.placement import (
    DefaultEnsemblePlacementPolicy,
    EnsemblePlacementPolicy,
    select_ensemble,
    select_replacement,
)
from minipulsar.bookkeeper.placement_policies import placement_policy
from minipulsar.bookkeeper.rackaware import RackawareEnsemblePlacementPolicy, arrange_racks, window_neighbours
from minipulsar.errors import ConfigError, NotEnoughBookiesError
from minipulsar.protocol.commands import BookieInfoResponse

SEED = 20240611
MB = 1_000_000


def bookies(count: int, prefix: str = "bookie") -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


def view_of(writable: list[str], **fields) -> ClusterView:
    return ClusterView(writable=frozenset(writable), **fields)


def racked_view(rack_sizes: Mapping[str, int]) -> ClusterView:
    """One bookie per unit of each rack's size, e.g. {"/r0": 2} → r0-0, r0-1 on rack /r0."""
    racks = {f"{rack.strip('/')}-{i}": rack for rack, size in rack_sizes.items() for i in range(size)}
    return ClusterView(writable=frozenset(racks), racks=racks)


def windows(ensemble_size: int, write_quorum: int) -> list[list[int]]:
    return [[(start + k) % ensemble_size for k in range(write_quorum)] for start in range(ensemble_size)]


def clashing_windows(ensemble: list[str], write_quorum: int, view: ClusterView) -> int:
    """Write-quorum windows holding two bookies of one rack."""
    racks = [view.rack_of(bookie) for bookie in ensemble]
    return sum(len({racks[i] for i in window}) < write_quorum for window in windows(len(ensemble), write_quorum))


def perfect_arrangement_exists(ensemble_size: int, write_quorum: int, capacity: Mapping[str, int]) -> bool:
    """Brute force: some rack sequence within capacity puts every window on distinct racks."""
    for racks in itertools.product(sorted(capacity), repeat=ensemble_size):
        if any(racks.count(rack) > capacity[rack] for rack in capacity):
            continue
        if all(len({racks[i] for i in window}) == write_quorum for window in windows(ensemble_size, write_quorum)):
            return True
    return False


def shares(counter: Counter[str], population: list[str]) -> list[int]:
    return [counter[bookie] for bookie in population]


def assert_even(counts: list[int], tolerance: float = 0.15) -> None:
    mean = statistics.fmean(counts)
    assert all(abs(count - mean) <= tolerance * mean for count in counts), (counts, mean)


def bookie_report(
    journal_mb_s: float,
    disk: float = 0.5,
    *,
    at_s: float = 100.0,
    read_only: bool = False,
    journal_disk_mb_s: float | None = None,
) -> BookieLoadReport:
    return BookieLoadReport(
        journal_write_bytes_per_s=journal_mb_s * MB,
        ledger_dirs_used_fraction=disk,
        received_at_s=at_s,
        read_only=read_only,
        journal_disk_write_bytes_per_s=None if journal_disk_mb_s is None else journal_disk_mb_s * MB,
    )


# -- every policy ------------------------------------------------------------------------------


ALL_POLICIES = [DefaultEnsemblePlacementPolicy, RackawareEnsemblePlacementPolicy, LoadAwareEnsemblePlacementPolicy]


@pytest.mark.parametrize("policy_class", ALL_POLICIES)
def test_new_ensembles_are_distinct_writable_bookies_outside_every_exclusion(
    policy_class: type[EnsemblePlacementPolicy],
) -> None:
    """Goal: the base invariants hold for every policy. Method: 500 ensembles of 3 from 8 bookies
    on 3 racks, two read-only, one quarantined, one excluded, loads known for all."""
    writable = bookies(8)
    view = view_of(
        writable,
        read_only=frozenset(writable[:2]),
        quarantined=frozenset({writable[2]}),
        racks={bookie: f"/rack-{i % 3}" for i, bookie in enumerate(writable)},
        loads={bookie: bookie_report(10 * i) for i, bookie in enumerate(writable)},
        now_s=101.0,
    )
    policy = policy_class(random.Random(SEED))
    seen: set[str] = set()
    for _ in range(500):
        ensemble = policy.new_ensemble(3, 2, 2, view, exclude={writable[3]})
        assert len(set(ensemble)) == 3, ensemble
        seen.update(ensemble)
    assert seen == set(writable[4:]), "only the four usable bookies, and all of them"


@pytest.mark.parametrize("policy_class", ALL_POLICIES)
def test_not_enough_bookies_says_how_many_and_why(policy_class: type[EnsemblePlacementPolicy]) -> None:
    writable = bookies(4)
    view = view_of(writable, read_only=frozenset({writable[0]}), quarantined=frozenset({writable[1]}))
    with pytest.raises(NotEnoughBookiesError) as raised:
        policy_class(random.Random(SEED)).new_ensemble(3, 2, 2, view, exclude={writable[2]})
    message = str(raised.value)
    assert "needs 3 bookies, 1 available" in message
    assert "1 read-only" in message and "1 quarantined" in message and "1 excluded" in message


@pytest.mark.parametrize("policy_class", ALL_POLICIES)
def test_replacement_is_outside_the_ensemble_exclusions_and_quarantine(
    policy_class: type[EnsemblePlacementPolicy],
) -> None:
    writable = bookies(7)
    ensemble = writable[:3]
    view = view_of(writable, read_only=frozenset({writable[3]}), quarantined=frozenset({writable[4]}))
    policy = policy_class(random.Random(SEED))
    chosen = {policy.replace_bookie(ensemble, 1, 2, 2, view, exclude={writable[5]}) for _ in range(100)}
    assert chosen == {writable[6]}
    with pytest.raises(NotEnoughBookiesError, match="replacing bookie-1 needs 1 bookies, 0 available"):
        policy.replace_bookie(ensemble, 1, 2, 2, view, exclude={writable[5], writable[6]})


@pytest.mark.parametrize("policy_class", ALL_POLICIES)
def test_bad_quorums_and_indexes_are_refused(policy_class: type[EnsemblePlacementPolicy]) -> None:
    policy, view = policy_class(random.Random(SEED)), view_of(bookies(5))
    for ensemble_size, write_quorum, ack_quorum in ((2, 3, 2), (3, 2, 3), (3, 0, 0), (0, 0, 0)):
        with pytest.raises(ValueError):
            policy.new_ensemble(ensemble_size, write_quorum, ack_quorum, view)
    with pytest.raises(ValueError):
        policy.replace_bookie(bookies(3), 3, 2, 2, view)


def test_same_seed_same_choices_regardless_of_set_order() -> None:
    """Goal: a seeded policy is replayable: candidates are taken in sorted order, not set order."""
    writable = bookies(10)
    first = [
        DefaultEnsemblePlacementPolicy(random.Random(SEED)).new_ensemble(3, 2, 2, view_of(writable)) for _ in range(5)
    ]
    second = [
        DefaultEnsemblePlacementPolicy(random.Random(SEED)).new_ensemble(3, 2, 2, view_of(writable[::-1]))
        for _ in range(5)
    ]
    assert first == second


# -- select_ensemble / select_replacement: the quarantine fallback --------------------------------


def test_select_ensemble_uses_quarantined_bookies_only_when_needed() -> None:
    """Goal: BookKeeper's fallback. Method: 5 writable, 2 quarantined, E=3 never touches the
    quarantined; with one of the others read-only, the choice is made again among all 4 usable
    bookies as if none were quarantined (BookKeeper's retry), the read-only one still out;
    too few even with the quarantined still raises."""
    policy = DefaultEnsemblePlacementPolicy(random.Random(SEED))
    writable = bookies(5)
    quarantined = frozenset(writable[:2])
    roomy = view_of(writable, quarantined=quarantined)
    for _ in range(300):
        assert not set(select_ensemble(policy, 3, 2, 2, roomy)) & quarantined

    tight = view_of(writable, quarantined=quarantined, read_only=frozenset({writable[4]}))
    used: Counter[str] = Counter()
    for _ in range(300):
        ensemble = select_ensemble(policy, 3, 2, 2, tight)
        assert writable[4] not in ensemble and set(ensemble) & quarantined
        used.update(ensemble)
    assert set(used) == set(writable[:4])

    with pytest.raises(NotEnoughBookiesError):
        select_ensemble(policy, 3, 2, 2, tight, exclude={writable[0], writable[1]})


def test_select_replacement_uses_a_quarantined_bookie_only_when_needed() -> None:
    policy = DefaultEnsemblePlacementPolicy(random.Random(SEED))
    writable = bookies(5)
    view = view_of(writable, quarantined=frozenset({writable[3]}))
    assert {select_replacement(policy, writable[:3], 0, 2, 2, view) for _ in range(100)} == {writable[4]}
    assert select_replacement(policy, writable[:3], 0, 2, 2, view, exclude={writable[4]}) == writable[3]
    with pytest.raises(NotEnoughBookiesError):
        select_replacement(policy, writable[:3], 0, 2, 2, view, exclude=writable[3:])


# -- placement_policy: the ensemblePlacementPolicy setting -------------------------------------


@pytest.mark.parametrize(
    ("name", "policy_class"),
    [
        ("DefaultEnsemblePlacementPolicy", DefaultEnsemblePlacementPolicy),
        ("RackawareEnsemblePlacementPolicy", RackawareEnsemblePlacementPolicy),
        ("LoadAwareEnsemblePlacementPolicy", LoadAwareEnsemblePlacementPolicy),
        ("org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy", RackawareEnsemblePlacementPolicy),
        ("org.apache.bookkeeper.client.DefaultEnsemblePlacementPolicy", DefaultEnsemblePlacementPolicy),
    ],
)
def test_placement_policy_by_setting(name: str, policy_class: type) -> None:
    assert type(placement_policy(name, random.Random(SEED))) is policy_class


def test_placement_policy_passes_the_staleness_and_refuses_unknown_names() -> None:
    policy = placement_policy("LoadAwareEnsemblePlacementPolicy", load_stale_after_s=7.5)
    assert isinstance(policy, LoadAwareEnsemblePlacementPolicy) and policy.stale_after_s == 7.5
    with pytest.raises(ConfigError, match="RegionAwareEnsemblePlacementPolicy"):
        placement_policy("RegionAwareEnsemblePlacementPolicy")


# -- rack-aware --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ensemble_size", "write_quorum", "rack_sizes"),
    [
        (3, 2, {"/r0": 2, "/r1": 2, "/r2": 2}),
        (3, 3, {"/r0": 1, "/r1": 3, "/r2": 1, "/r3": 2}),
        (4, 2, {"/r0": 3, "/r1": 3}),  # only A B A B works
        (4, 3, {"/r0": 2, "/r1": 2, "/r2": 2, "/r3": 1}),
        (5, 2, {"/r0": 2, "/r1": 1, "/r2": 4}),
        (5, 3, {"/dc/r0": 2, "/dc/r1": 2, "/dc/r2": 2, "/dc/r3": 1, "/dc/r4": 1}),
        (6, 3, {"/r0": 2, "/r1": 2, "/r2": 2}),  # only a rotation of A B C A B C works
        (6, 2, {"/r0": 4, "/r1": 4}),
        (3, 2, {"/r0": 5, "/r1": 1, "/r2": 1}),
    ],
)
def test_rackaware_never_puts_a_write_quorum_on_one_rack_when_racks_allow(
    ensemble_size: int, write_quorum: int, rack_sizes: dict[str, int]
) -> None:
    """Goal: with enough racks, no write-quorum window holds two bookies of one rack. Method:
    check by brute force that such an arrangement exists, then draw 300 ensembles."""
    assert perfect_arrangement_exists(ensemble_size, write_quorum, rack_sizes)
    view = racked_view(rack_sizes)
    policy = RackawareEnsemblePlacementPolicy(random.Random(SEED))
    for trial in range(300):
        ensemble = policy.new_ensemble(ensemble_size, write_quorum, 1, view)
        assert len(set(ensemble)) == ensemble_size
        assert clashing_windows(ensemble, write_quorum, view) == 0, (trial, ensemble)


def test_rackaware_on_random_layouts_finds_a_spread_whenever_one_exists() -> None:
    """Goal: the same property on 150 random layouts (E <= 5, 2-5 racks of 1-3 bookies); where
    no perfect spread exists, the ensemble still spans as many racks as it can (min(E, racks))."""
    rng = random.Random(SEED)
    feasible = 0
    for layout in range(150):
        ensemble_size = rng.randint(2, 5)
        write_quorum = rng.randint(2, ensemble_size)
        rack_sizes = {f"/r{i}": rng.randint(1, 3) for i in range(rng.randint(2, 5))}
        if sum(rack_sizes.values()) < ensemble_size:
            continue
        view = racked_view(rack_sizes)
        policy = RackawareEnsemblePlacementPolicy(random.Random(layout))
        perfect = perfect_arrangement_exists(ensemble_size, write_quorum, rack_sizes)
        feasible += perfect
        for _ in range(20):
            ensemble = policy.new_ensemble(ensemble_size, write_quorum, 1, view)
            context = (layout, ensemble_size, write_quorum, rack_sizes, ensemble)
            assert len({view.rack_of(b) for b in ensemble}) == min(ensemble_size, len(rack_sizes)), context
            if perfect:
                assert clashing_windows(ensemble, write_quorum, view) == 0, context
    assert feasible >= 50, "the random layouts must exercise the property"


def test_rackaware_spreads_as_well_as_possible_with_too_few_racks() -> None:
    """Goal: E=3, Qw=2 on two racks cannot avoid a clash; exactly one window clashes (the best)."""
    view = racked_view({"/r0": 3, "/r1": 3})
    policy = RackawareEnsemblePlacementPolicy(random.Random(SEED))
    for _ in range(200):
        assert clashing_windows(policy.new_ensemble(3, 2, 2, view), 2, view) == 1


def test_rackaware_with_one_rack_is_uniformly_random() -> None:
    writable = bookies(6)
    view = view_of(writable)  # every bookie in the default rack
    policy = RackawareEnsemblePlacementPolicy(random.Random(SEED))
    counts = Counter(itertools.chain.from_iterable(policy.new_ensemble(3, 2, 2, view) for _ in range(6_000)))
    assert_even(shares(counts, writable))
    positions = Counter(policy.new_ensemble(3, 2, 2, view)[0] for _ in range(6_000))
    assert_even(shares(positions, writable))


def test_rackaware_uses_every_rack_evenly() -> None:
    """Goal: no rack or bookie is favoured when racks are alike."""
    view = racked_view({"/r0": 2, "/r1": 2, "/r2": 2, "/r3": 2})
    policy = RackawareEnsemblePlacementPolicy(random.Random(SEED))
    counts = Counter(itertools.chain.from_iterable(policy.new_ensemble(3, 3, 2, view) for _ in range(8_000)))
    assert_even(shares(counts, sorted(view.writable)))


def test_rackaware_replacement_prefers_the_failed_bookies_rack() -> None:
    """Goal: replace_bookie keeps the ensemble's spread. Method: ensemble on racks r0 r1 r2,
    E=3 Qw=2; the r1 bookie fails. Same rack first; with none left there, the free rack r3
    (not in the failed position's windows); with none there either, any."""
    view = racked_view({"/r0": 2, "/r1": 2, "/r2": 2, "/r3": 2})
    ensemble = ["r0-0", "r1-0", "r2-0"]
    policy = RackawareEnsemblePlacementPolicy(random.Random(SEED))
    assert {policy.replace_bookie(ensemble, 1, 2, 2, view) for _ in range(100)} == {"r1-1"}
    assert {policy.replace_bookie(ensemble, 1, 2, 2, view, exclude={"r1-1"}) for _ in range(100)} == {"r3-0", "r3-1"}
    assert {policy.replace_bookie(ensemble, 1, 2, 2, view, exclude={"r1-1", "r3-0", "r3-1"}) for _ in range(100)} == {
        "r0-1",
        "r2-1",
    }


def test_rackaware_replacement_avoids_racks_in_the_affected_windows() -> None:
    """E=5, Qw=2: position 2's windows hold positions 1 and 3 only, so racks of positions 0 and 4
    do not clash and are preferred over the racks of positions 1 and 3."""
    view = racked_view({"/r0": 2, "/r1": 2, "/r2": 1, "/r3": 2, "/r4": 2})
    ensemble = ["r0-0", "r1-0", "r2-0", "r3-0", "r4-0"]
    policy = RackawareEnsemblePlacementPolicy(random.Random(SEED))
    assert {policy.replace_bookie(ensemble, 2, 2, 2, view) for _ in range(200)} == {"r0-1", "r4-1"}


def test_window_neighbours_are_positions_sharing_a_write_quorum() -> None:
    assert list(window_neighbours(0, 5, 2)) == [1, 4]
    assert list(window_neighbours(2, 5, 3)) == [0, 1, 3, 4]
    assert list(window_neighbours(0, 3, 3)) == [1, 2]
    assert list(window_neighbours(0, 4, 1)) == []


def test_arrange_racks_respects_rack_capacity() -> None:
    rng = random.Random(SEED)
    for _ in range(200):
        racks = arrange_racks(5, 3, {"a": 1, "b": 1, "c": 3}, rng.random)
        assert racks.count("a") <= 1 and racks.count("b") <= 1 and len(racks) == 5


# -- load-aware ---------------------------------------------------------------------------------


def loaded_view(loads: Mapping[str, BookieLoadReport], *, now_s: float = 101.0, **fields) -> ClusterView:
    return ClusterView(writable=frozenset(loads), loads=dict(loads), now_s=now_s, **fields)


def test_loadaware_sends_clearly_more_ledgers_to_lightly_loaded_bookies() -> None:
    """Goal: BIGO's journal-throughput spread (24 vs 155 MB/s). Method: 10,000 ensembles of 3 over
    3 light (25 MB/s, disks 30 % used) and 3 heavy (150 MB/s, 70 %) bookies; the light ones get
    at least twice the ledgers, and the heavy ones still get some (no herding, no lock-out)."""
    light, heavy = bookies(3, "light"), bookies(3, "heavy")
    view = loaded_view({**{b: bookie_report(25, 0.3) for b in light}, **{b: bookie_report(150, 0.7) for b in heavy}})
    policy = LoadAwareEnsemblePlacementPolicy(random.Random(SEED))
    counts = Counter(itertools.chain.from_iterable(policy.new_ensemble(3, 2, 2, view) for _ in range(10_000)))
    light_share, heavy_share = sum(shares(counts, light)), sum(shares(counts, heavy))
    assert light_share >= 2 * heavy_share, counts
    assert min(shares(counts, heavy)) >= 1_000, counts
    assert_even(shares(counts, light), 0.05)
    assert_even(shares(counts, heavy), 0.10)


def test_loadaware_prefers_a_low_disk_usage_at_equal_throughput() -> None:
    view = loaded_view(
        {
            "a": bookie_report(50, 0.1),
            "b": bookie_report(50, 0.1),
            "c": bookie_report(50, 0.8),
            "d": bookie_report(50, 0.8),
        }
    )
    policy = LoadAwareEnsemblePlacementPolicy(random.Random(SEED))
    counts = Counter(itertools.chain.from_iterable(policy.new_ensemble(2, 2, 2, view) for _ in range(10_000)))
    assert counts["a"] + counts["b"] >= 1.3 * (counts["c"] + counts["d"]), counts


def test_loadaware_never_chooses_read_only_or_quarantined_bookies() -> None:
    """Goal: the lightest bookies are the forbidden ones, and still never chosen: one read-only by
    its fresh load report, one read-only in the registry, one quarantined."""
    loads = {b: bookie_report(100) for b in bookies(5)}
    loads |= {
        "idle-report-ro": bookie_report(0, read_only=True),
        "idle-registry-ro": bookie_report(0),
        "idle-quarantined": bookie_report(0),
    }
    view = loaded_view(loads, read_only=frozenset({"idle-registry-ro"}), quarantined=frozenset({"idle-quarantined"}))
    policy = LoadAwareEnsemblePlacementPolicy(random.Random(SEED))
    counts = Counter(itertools.chain.from_iterable(policy.new_ensemble(3, 2, 2, view) for _ in range(10_000)))
    assert set(counts) == set(bookies(5)), counts
    assert {policy.replace_bookie(bookies(3), 0, 2, 2, view) for _ in range(500)} == set(bookies(5)[3:])


def test_loadaware_spreads_evenly_over_identical_loads() -> None:
    writable = bookies(5)
    view = loaded_view({b: bookie_report(80, 0.4) for b in writable})
    policy = LoadAwareEnsemblePlacementPolicy(random.Random(SEED))
    counts = Counter(itertools.chain.from_iterable(policy.new_ensemble(3, 2, 2, view) for _ in range(10_000)))
    assert_even(shares(counts, writable))


@pytest.mark.parametrize("reported", ["stale", "mostly_missing"])
def test_loadaware_places_at_random_without_fresh_reports(reported: str) -> None:
    """Goal: skewed but stale (older than stale_after_s) or mostly missing reports are ignored:
    the spread is even, as DefaultEnsemblePlacementPolicy's."""
    writable = bookies(5)
    if reported == "stale":
        loads = {b: bookie_report(10 if i < 2 else 200, at_s=50.0) for i, b in enumerate(writable)}
    else:
        loads = {writable[0]: bookie_report(200), writable[1]: bookie_report(200)}
    view = ClusterView(writable=frozenset(writable), loads=loads, now_s=101.0)
    policy = LoadAwareEnsemblePlacementPolicy(random.Random(SEED), stale_after_s=15.0)
    assert load_weights(writable, view, 15.0) is None
    counts = Counter(itertools.chain.from_iterable(policy.new_ensemble(3, 2, 2, view) for _ in range(10_000)))
    assert_even(shares(counts, writable))


def test_loadaware_stale_read_only_report_is_ignored() -> None:
    view = loaded_view(
        {"a": bookie_report(10, read_only=True, at_s=0.0), "b": bookie_report(10), "c": bookie_report(10)}, now_s=101.0
    )
    policy = LoadAwareEnsemblePlacementPolicy(random.Random(SEED), stale_after_s=15.0)
    assert sorted(policy.new_ensemble(3, 2, 2, view)) == ["a", "b", "c"]


def test_load_weights_are_positive_floored_and_neutral_for_unknown_bookies() -> None:
    view = loaded_view(
        {"idle": bookie_report(0, 0.0), "avg": bookie_report(100, 0.5), "hot": bookie_report(1_000, 1.0)}
    )
    view = ClusterView(writable=view.writable | {"new"}, loads=view.loads, now_s=view.now_s)
    weights = load_weights(["avg", "hot", "idle", "new"], view, 15.0)
    assert weights is not None
    assert weights["idle"] > weights["avg"] > weights["hot"] > 0
    assert weights["hot"] >= 0.1 * weights["idle"] - 1e-12, "a candidate keeps a tenth of the best chance"
    assert weights["new"] == pytest.approx(statistics.fmean([weights["idle"], weights["avg"], weights["hot"]]))


def test_load_weights_of_near_equal_bookies_are_near_equal() -> None:
    """Goal: randomisation among near-equal candidates: 10 % more journal load costs < 10 % chance."""
    view = loaded_view({"a": bookie_report(50), "b": bookie_report(55), "c": bookie_report(50)})
    weights = load_weights(["a", "b", "c"], view, 15.0)
    assert weights is not None
    assert 0.9 < weights["b"] / weights["a"] < 1.0


def test_loadaware_keeps_racks_apart_when_racks_differ() -> None:
    """Goal: load-awareness works inside the rack-aware choice: windows still span distinct racks,
    and inside each rack the light bookie gets more ledgers."""
    racks = {f"r{r}-{kind}": f"/r{r}" for r in range(3) for kind in ("light", "heavy")}
    loads = {bookie: bookie_report(20 if bookie.endswith("light") else 150) for bookie in racks}
    view = ClusterView(writable=frozenset(racks), racks=racks, loads=loads, now_s=101.0)
    policy = LoadAwareEnsemblePlacementPolicy(random.Random(SEED))
    counts: Counter[str] = Counter()
    for _ in range(3_000):
        ensemble = policy.new_ensemble(3, 3, 2, view)
        assert clashing_windows(ensemble, 3, view) == 0
        counts.update(ensemble)
    for r in range(3):
        assert counts[f"r{r}-light"] >= 2 * counts[f"r{r}-heavy"], counts


def test_loadaware_weighs_the_journal_disk_a_bookie_shares_with_its_neighbours() -> None:
    """Goal: BIGO's shared journal disks. A bookie whose own journal is quiet (5 MB/s) but whose
    disk its neighbours saturate (155 MB/s) is a heavy bookie; one on a 24 MB/s disk is light.
    Method: three bookies on hot disks, three on quiet disks, all with the same own-journal
    rate; the choices (same seed) are exactly those for own-journal rates of 155 and 24 MB/s:
    the quiet-disk bookies get clearly more ledgers and the hot ones still some. Without the
    disk figure the same bookies look alike and the spread is even."""
    hot, quiet = bookies(3, "hot-disk"), bookies(3, "quiet-disk")

    def counts_for(loads: dict[str, BookieLoadReport]) -> Counter[str]:
        policy = LoadAwareEnsemblePlacementPolicy(random.Random(SEED))
        return Counter(
            itertools.chain.from_iterable(policy.new_ensemble(3, 2, 2, loaded_view(loads)) for _ in range(10_000))
        )

    shared = counts_for(
        {b: bookie_report(5, journal_disk_mb_s=155) for b in hot}
        | {b: bookie_report(5, journal_disk_mb_s=24) for b in quiet}
    )
    assert shared == counts_for({b: bookie_report(155) for b in hot} | {b: bookie_report(24) for b in quiet})
    assert sum(shares(shared, quiet)) >= 1.8 * sum(shares(shared, hot)), shared
    assert min(shares(shared, hot)) >= 1_000, shared
    assert_even(shares(counts_for({b: bookie_report(5) for b in hot + quiet}), hot + quiet))


def test_a_bookie_without_a_journal_disk_figure_is_weighed_by_its_own_journal_bytes() -> None:
    view = loaded_view(
        {
            "measured": bookie_report(1, journal_disk_mb_s=100),
            "unmeasured": bookie_report(100),
            "idle": bookie_report(1),
        }
    )
    assert [view.loads[b].journal_load_bytes_per_s for b in ("measured", "unmeasured", "idle")] == [100 * MB] * 2 + [MB]
    weights = load_weights(["measured", "unmeasured", "idle"], view, 15.0)
    assert weights is not None
    assert weights["measured"] == pytest.approx(weights["unmeasured"]) and weights["idle"] > weights["measured"]


def test_the_poller_reads_the_journal_disk_figure_and_none_when_the_bookie_has_none() -> None:
    info = {"journalWriteBytesPerSecond": 2e6, "journalDiskWriteBytesPerSecond": 9e7, "ledgerDirsUsedFraction": 0.4}
    report = load_report(BookieInfoResponse(id=1, free_disk_bytes=0, total_disk_bytes=0, info=info), 3.0)
    assert report == BookieLoadReport(2e6, 0.4, 3.0, journal_disk_write_bytes_per_s=9e7)
    for unknown in ({"journalDiskWriteBytesPerSecond": None}, {}):  # no block device; an older bookie
        report = load_report(BookieInfoResponse(id=1, free_disk_bytes=0, total_disk_bytes=1, info=unknown), 3.0)
        assert report.journal_disk_write_bytes_per_s is None and report.journal_load_bytes_per_s == 0.0
