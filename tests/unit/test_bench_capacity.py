"""Goal: a bench run refuses to start when its mounts cannot hold what it will write
(bench/capacity.py, bench/suite/space.py), before any server starts, with a message that names
the mount, the estimate and the room — and runs when they can.

Method: direct calls with the room per device replaced (no disk is filled); the estimates are
checked against rate × seconds × size × copies by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import capacity
from bench.capacity import NotEnoughSpace, Write, check_space
from bench.suite import space
from bench.suite.cluster import ClusterSpec
from bench.suite.profiles import KIB, PROFILES


def test_writes_on_one_device_add_up_and_a_short_device_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(capacity, "room_bytes", lambda _path, usage_threshold=0.95: 10 * capacity.GB)
    fits = [Write(tmp_path / "j", 4 * capacity.GB, "journals"), Write(tmp_path / "l", 4 * capacity.GB, "entry logs")]
    (line,) = check_space(fits, "hint")  # one device: one line, 8 GB × 1.2 < 10 GB
    assert "needs ~9.6 GB" in line and "room 10.0 GB" in line
    with pytest.raises(NotEnoughSpace) as refused:
        check_space([*fits, Write(tmp_path / "not-yet" / "x", 1 * capacity.GB, "AOF")], "shorten it")
    message = str(refused.value)
    assert "before any server starts" in message and str(tmp_path) in message and message.endswith("shorten it")


def test_room_stays_below_the_bookies_disk_usage_threshold(tmp_path: Path) -> None:
    free_to_user = capacity.room_bytes(tmp_path, usage_threshold=1.0)
    assert 0 <= capacity.room_bytes(tmp_path) <= free_to_user
    assert capacity.room_bytes(tmp_path, usage_threshold=0.0) == 0


def test_full_speed_is_bounded_by_messages_payload_and_the_device() -> None:
    assert capacity.full_speed_bytes_per_s(100, True, 2) == capacity.BATCHED_MSG_PER_S_MAX * 100 * 2
    assert capacity.full_speed_bytes_per_s(KIB, False, 1) == capacity.UNBATCHED_MSG_PER_S_MAX * KIB
    assert capacity.full_speed_bytes_per_s(64 * KIB, True, 2) == capacity.PAYLOAD_MB_PER_S_MAX * 1e6 * 2
    assert capacity.full_speed_bytes_per_s(64 * KIB, True, 2, device_mb_per_s=100) == 100e6


def test_the_suite_needs_room_for_its_largest_cluster_unless_it_keeps_them_all(tmp_path: Path) -> None:
    profile = PROFILES["quick"]
    spec = ClusterSpec(bookies=3, journal_dir=tmp_path / "j", ledger_dir=tmp_path / "l")
    probes = {"same_device": False, "journal": {"seq_write_mb_per_s": None}, "ledgers": {}}
    (journal, ledgers) = space.planned_writes(["latency"], profile, spec, probes)
    seconds = profile.warmup_s + profile.duration_s
    assert journal.bytes == ledgers.bytes == pytest.approx(sum(profile.rates) * KIB * seconds * 2)  # Qw = 2
    largest = space.planned_writes(["latency", "size"], profile, spec, probes)
    kept = space.planned_writes(["latency", "size"], profile, ClusterSpec(3, tmp_path, tmp_path, keep=True), probes)
    assert "size" in largest[0].what and kept[0].bytes > largest[0].bytes
    capped = space.planned_writes(["size"], profile, spec, probes | {"journal": {"seq_write_mb_per_s": 1.0}})
    assert capped[0].bytes <= 1e6 * seconds * len(profile.sizes)


def test_the_suite_refuses_a_run_that_does_not_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capacity, "room_bytes", lambda _path, usage_threshold=0.95: 1_000_000)
    spec = ClusterSpec(bookies=1, journal_dir=tmp_path, ledger_dir=tmp_path)
    with pytest.raises(NotEnoughSpace, match="--duration"):
        space.check(["size"], PROFILES["quick"], spec, {"same_device": True, "journal": {}})


def test_the_bookie_bench_counts_both_modes_and_refuses_a_mount_too_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import bookie_bench

    both = capacity.bookie_bench_writes(tmp_path, tmp_path, {"1k": KIB}, 6.0, 2, 1000.0, 0, None)
    assert both[1].bytes == 2 * 1000 * KIB * 6.0  # two bookies (sync on, off), one entry log each
    catch_up = capacity.bookie_bench_writes(tmp_path, tmp_path, {}, 1.0, 1, 10.0, 0, 100_000)
    assert catch_up[1].bytes == 100_000 * KIB + 2 * 10 * KIB
    monkeypatch.setattr(capacity, "room_bytes", lambda _path, usage_threshold=0.95: 1_000_000)
    with pytest.raises(NotEnoughSpace, match="--secs"):
        bookie_bench.check_space(bookie_bench.parse_args(["--journal-dir", str(tmp_path)]))
