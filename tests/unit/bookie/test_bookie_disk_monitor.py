"""Ledger-dir disk thresholds: full above diskUsageThreshold, read-only when all are full,
writable again below diskUsageLwmThreshold (hysteresis), and the test-only usage override."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from minipulsar.bookie.disk_monitor import (
    DirUsage,
    LedgerDirsMonitor,
    Thresholds,
    check_dirs,
    read_usages,
    total_used_fraction,
)
from minipulsar.config import BookieConfig, load_config
from minipulsar.errors import ConfigError
from tests.support.process import wait_for

THRESHOLDS = Thresholds(full=0.95, warn=0.90, lwm=0.90)
A, B = Path("/a"), Path("/b")
GIB = 1 << 30


def usage(directory: Path, used: float, device: int | None = None) -> DirUsage:
    return DirUsage(directory, used, int(GIB * (1 - used)), GIB, device if device is not None else hash(directory))


def test_a_dir_above_the_threshold_is_full_and_one_below_is_not() -> None:
    assert check_dirs([usage(A, 0.96), usage(B, 0.93)], frozenset(), THRESHOLDS) == {A}
    assert check_dirs([usage(A, 0.95)], frozenset(), THRESHOLDS) == frozenset(), "full means strictly above"


def test_with_a_writable_dir_left_a_full_dir_comes_back_at_the_threshold() -> None:
    assert check_dirs([usage(A, 0.94), usage(B, 0.5)], frozenset({A}), THRESHOLDS) == frozenset()
    assert check_dirs([usage(A, 0.96), usage(B, 0.5)], frozenset({A}), THRESHOLDS) == {A}


def test_when_all_dirs_are_full_none_comes_back_until_total_usage_is_below_the_lwm() -> None:
    """Goal: the hysteresis band. Method: both dirs full; usage falls to 0.93 (below the
    threshold, above the lwm): still full; to 0.85: both writable again."""
    full = check_dirs([usage(A, 0.97), usage(B, 0.99)], frozenset(), THRESHOLDS)
    assert full == {A, B}
    assert check_dirs([usage(A, 0.93), usage(B, 0.93)], full, THRESHOLDS) == full
    assert check_dirs([usage(A, 0.85), usage(B, 0.85)], full, THRESHOLDS) == frozenset()


def test_below_the_lwm_in_total_a_dir_still_above_the_threshold_stays_full() -> None:
    full = frozenset({A, B})
    assert check_dirs([usage(A, 0.96), usage(B, 0.10)], full, THRESHOLDS) == {A}


def test_dirs_on_one_filesystem_count_once_in_the_total() -> None:
    same = [usage(A, 0.5, device=1), usage(B, 0.5, device=1), usage(Path("/c"), 1.0, device=2)]
    assert total_used_fraction(same) == pytest.approx(0.75)


def test_the_override_file_replaces_statvfs_and_a_bad_one_falls_back(tmp_path: Path) -> None:
    override = tmp_path / "usage"
    override.write_text("0.97\n")
    [got] = read_usages([tmp_path], str(override))
    assert got.used_fraction == 0.97 and got.free_bytes == int(got.total_bytes * 0.03)
    [statvfs] = read_usages([tmp_path])
    override.write_text("not a number")
    [fallback] = read_usages([tmp_path], str(override))
    override.unlink()
    [missing] = read_usages([tmp_path], str(override))
    for reading in (fallback, missing):
        assert reading.total_bytes == statvfs.total_bytes
        assert abs(reading.used_fraction - statvfs.used_fraction) < 0.01  # other writers may run meanwhile


def test_a_low_water_mark_above_the_threshold_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="diskUsageLwmThreshold"):
        load_config(BookieConfig, overrides={"diskUsageThreshold": "0.8", "diskUsageWarnThreshold": "0.8"})
    config = load_config(
        BookieConfig,
        overrides={"diskUsageThreshold": "0.8", "diskUsageWarnThreshold": "0.8", "diskUsageLwmThreshold": "0.8"},
    )
    assert config.disk_usage_lwm_threshold == config.disk_usage_threshold == 0.8


def monitor_config(tmp_path: Path, **overrides: str) -> BookieConfig:
    dirs = [tmp_path / "ledgers-a", tmp_path / "ledgers-b"]
    for d in dirs:
        d.mkdir(exist_ok=True)
    return load_config(
        BookieConfig,
        overrides={
            "ledgerDirectories": ",".join(map(str, dirs)),
            "minipulsarDiskUsageOverrideFile": str(tmp_path / "usage"),
            **overrides,
        },
    )


@pytest.mark.expect_error_log(r"is full: usage")
async def test_the_monitor_loses_its_last_writable_dir_and_gets_it_back_with_hysteresis(tmp_path: Path) -> None:
    """Goal: the listener hears each writable/no-writable-dir transition once, at the thresholds,
    and bookie_ledger_writable_dirs follows. Method: drive the usage file through
    0.5 → 0.97 → 0.92 → 0.5, checking after each step."""
    changes: list[bool] = []
    monitor = LedgerDirsMonitor(monitor_config(tmp_path), changes.append)
    override = tmp_path / "usage"
    override.write_text("0.5")
    await monitor.start()
    try:
        assert monitor.writable and changes == []
        assert REGISTRY.get_sample_value("bookie_ledger_writable_dirs") == 2
        override.write_text("0.97")
        await monitor.check()
        assert not monitor.writable and changes == [False]
        assert REGISTRY.get_sample_value("bookie_ledger_writable_dirs") == 0
        override.write_text("0.92")
        await monitor.check()
        assert not monitor.writable and changes == [False], "above the lwm: still full"
        override.write_text("0.5")
        await monitor.check()
        assert monitor.writable and changes == [False, True]
        assert REGISTRY.get_sample_value("bookie_ledger_writable_dirs") == 2
    finally:
        await monitor.close()


@pytest.mark.expect_error_log(r"is full: usage")
async def test_the_monitor_checks_on_its_interval(tmp_path: Path) -> None:
    changes: list[bool] = []
    monitor = LedgerDirsMonitor(monitor_config(tmp_path, diskCheckInterval="20"), changes.append)
    await monitor.start()
    try:
        (tmp_path / "usage").write_text("0.99")
        await wait_for(lambda: changes == [False], timeout_s=5)
        assert not monitor.writable
    finally:
        await monitor.close()
