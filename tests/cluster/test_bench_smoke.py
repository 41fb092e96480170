"""Goal: ``bench/bookie_bench.py`` runs end to end — real metastore and bookie processes, both
ceilings, both modes — with tiny settings, and writes every figure the issue names.

Method: run the bench as a user would (a subprocess from the project root) for a fraction of a
second per run; check the JSON file, the last stdout line, and that the ratios are the ratios
of the figures. No timing assertions: the figures depend on the machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.bench_run import ROOT, bench_result, run_bench

BENCH = ROOT / "bench" / "bookie_bench.py"
HOP_CEILING = ROOT.parent / "shared" / "tools" / "hop_ceiling.py"
ISSUE_KEYS = (
    "adds_per_s_1k",
    "hop_ceiling_per_s_1k",
    "ratio_1k",
    "mb_per_s_64k",
    "disk_fsync_mb_per_s_64k",
    "ratio_64k",
    "ratio_64k_shared_disk",
)
TINY = ["--secs", "0.3", "--warmup", "0.1", "--progress-interval", "0.1", "--window", "20"]


def run_bookie_bench(tmp_path: Path, *args: str) -> dict:
    result_path = tmp_path / "result.json"
    dirs = ["--journal-dir", str(tmp_path / "journal"), "--ledger-dir", str(tmp_path / "ledgers")]
    completed = run_bench(str(BENCH), *TINY, *dirs, "--json", str(result_path), *args)
    result = bench_result(completed, result_path)
    assert "adds/s" in completed.stderr, "progress lines go to stderr"
    return result


def test_throughput_mode_writes_every_figure_and_ratio(tmp_path: Path) -> None:
    result = run_bookie_bench(tmp_path, "--disk-file-mb", "4", "--disk-group-bytes", "65536")
    assert all(key in result for key in ISSUE_KEYS)
    assert {(run["entry_bytes"], run["sync"]) for run in result["runs"]} == {
        (1024, True),
        (65536, True),
        (1024, False),
        (65536, False),
    }
    assert all(run["errors"] == 0 and run["adds"] > 0 for run in result["runs"])
    assert all(run["p99_ms"] is not None for run in result["runs"])
    assert result["disk_fsync_mb_per_s_64k"] > 0
    assert result["ratio_64k"] == pytest.approx(result["mb_per_s_64k"] / result["disk_fsync_mb_per_s_64k"])
    assert result["ratio_64k_shared_disk"] == pytest.approx(
        result["mb_per_s_64k"] / result["shared_disk_fsync_mb_per_s_64k"]
    )
    # Journal and ledgers under one tmp_path: one device, so no two-device figure.
    assert result["two_devices"] is False and "ratio_64k_two_devices" not in result
    assert result["disk_fsync_mb_per_s_64k_after"] > 0, "measured again right after the sync-on runs"
    assert result["ratio_64k_after"] == pytest.approx(result["mb_per_s_64k"] / result["disk_fsync_mb_per_s_64k_after"])
    if "skipped" not in result["ceilings"]["io_pattern_64k"]:  # the temp dir's file system may refuse O_DIRECT
        assert result["io_pattern_mb_per_s_64k"] > 0
        assert result["ratio_64k_io_pattern"] == pytest.approx(
            result["mb_per_s_64k"] / result["io_pattern_mb_per_s_64k"]
        )
    if HOP_CEILING.exists():
        assert result["hop_ceiling_per_s_1k"] > 0
        assert result["ratio_1k"] == pytest.approx(result["adds_per_s_1k"] / result["hop_ceiling_per_s_1k"])
    else:  # ../shared is not beside the project: the bench says so and leaves the ratio out
        assert result["hop_ceiling_per_s_1k"] is None and result["ratio_1k"] is None
    assert not list((tmp_path / "journal").iterdir()), "the bench removes its own dirs"
    assert_device_wrote_what_was_acked(
        next(run for run in result["runs"] if run["entry_bytes"] == 65536 and run["sync"])
    )


def assert_device_wrote_what_was_acked(run: dict) -> None:
    """With sync on, every payload acked in the measured window is on the journal's disk: the
    device wrote at least that much, less what was in flight when the window opened."""
    if not run["devices"]:  # a file system /proc/diskstats cannot name (tmpfs, overlay): nothing to check
        return
    journal_device = next(iter(run["devices"].values()))
    acked_bytes = run["adds"] * run["entry_bytes"]
    in_flight_bytes = run["window"] * run["entry_bytes"]
    assert journal_device["device_written_bytes"] >= acked_bytes - in_flight_bytes, (journal_device, run["adds"])


def test_catch_up_reader_mode_reports_add_p99_with_and_without_the_reader(tmp_path: Path) -> None:
    result = run_bookie_bench(
        tmp_path, "--catch-up-reader", "--reader-entries", "300", "--read-batch", "25", "--read-window", "2"
    )
    assert result["mode"] == "catch-up-reader"
    assert result["add_p99_ms_alone"] > 0 and result["add_p99_ms_with_reader"] > 0
    assert result["add_p99_ratio"] == pytest.approx(result["add_p99_ms_with_reader"] / result["add_p99_ms_alone"])
    assert result["read_entries_per_s"] > 0 and result["read_errors"] == 0
    assert [run["label"] for run in result["runs"]] == ["writer alone", "writer + catch-up reader"]
