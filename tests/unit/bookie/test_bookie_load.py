"""The load report: rates over the recent window from the journal's metrics, disk figures from
the disk monitor, pending requests, and the read-only flag."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minipulsar.bookie import metrics
from minipulsar.bookie.disk_monitor import LedgerDirsMonitor
from minipulsar.bookie.load import (
    BookieLoad,
    HistogramSnapshot,
    LoadSample,
    block_disk_of,
    busiest_disk_rate,
    io_util_percent,
    latency_in_window,
)
from minipulsar.bookie.read_pool import ReadThreadPool
from minipulsar.bookie.state_manager import LEDGER_DIRS_FULL, BookieStateManager
from minipulsar.config import BookieConfig, load_config
from tests.support.process import wait_for


def snap(count: float, total: float, buckets: dict[float, float]) -> HistogramSnapshot:
    return HistogramSnapshot(count, total, tuple(sorted(buckets.items())))


def test_sync_latency_covers_only_the_observations_in_the_window() -> None:
    old = snap(100, 5000.0, {1: 0, 10: 50, 100: 100, float("inf"): 100})  # slow syncs long ago
    new = snap(200, 5100.0, {1: 99, 10: 150, 100: 200, float("inf"): 200})  # 99 at <=1 ms, 1 at <=10
    avg, p99 = latency_in_window(old, new)
    assert avg == pytest.approx(1.0) and p99 == 1


def test_a_p99_past_the_last_bucket_is_reported_as_that_bucket_bound() -> None:
    old = snap(0, 0.0, {10: 0, float("inf"): 0})
    new = snap(10, 500_000.0, {10: 0, float("inf"): 10})
    assert latency_in_window(old, new) == (50_000.0, 10)


def test_sync_latency_is_unknown_without_syncs_in_the_window() -> None:
    same = snap(5, 10.0, {1: 5, float("inf"): 5})
    assert latency_in_window(same, same) == (None, None)


def test_io_util_is_the_busiest_known_device_and_minus_one_when_none_is_known() -> None:
    hist = snap(0, 0, {})
    old = LoadSample(10.0, 0, hist, 0, {1: 1000.0, 2: 0.0})
    new = LoadSample(12.0, 0, hist, 0, {1: 1500.0, 2: 1800.0})  # 25% and 90% of 2 s
    assert io_util_percent(old, new, [1]) == 25.0
    assert io_util_percent(old, new, [1, 2, None]) == 90.0
    assert io_util_percent(old, new, [3, None]) == -1.0


def disk_sample(at_s: float, written: dict[str, float]) -> LoadSample:
    return LoadSample(at_s, 0, snap(0, 0, {}), 0, {}, journal_disk_written_bytes=written)


def test_the_journal_disk_rate_is_the_busiest_disk_counted_in_both_samples() -> None:
    old = disk_sample(10.0, {"8:0": 1e6, "8:16": 0.0, "7:3": 0.0})
    new = disk_sample(12.0, {"8:0": 3e6, "8:16": 9e6, "259:1": 5e9})  # 1 and 4.5 MB/s; 259:1 is new
    assert busiest_disk_rate(old, new) == ("8:16", 4.5e6)
    assert busiest_disk_rate(old, disk_sample(12.0, {"8:0": 0.0})) == ("8:0", 0.0), "a counter going back is 0"
    assert busiest_disk_rate(old, disk_sample(12.0, {})) == (None, None)


def test_a_filesystem_without_a_block_device_has_no_journal_disk() -> None:
    """Goal: tmpfs (an anonymous device, 0:N) has no counters: the report says None, not 0."""
    if not os.path.isdir("/sys/dev/block") or os.major(os.stat("/dev/shm").st_dev) != 0:
        pytest.skip("needs Linux sysfs and a tmpfs /dev/shm")
    assert block_disk_of(os.stat("/dev/shm").st_dev) is None


class CountingDevice:
    """A SIMULATED shared journal device's counter (bookie/disk_model.SharedDevice's shape)."""

    disk_id = "simulated:/lab/journal-disk-0.dev"

    def __init__(self) -> None:
        self.written = 0

    def written_bytes(self) -> int:
        return self.written


def load_config_for(tmp_path: Path) -> BookieConfig:
    for name in ("journal", "ledgers"):
        (tmp_path / name).mkdir(exist_ok=True)
    return load_config(
        BookieConfig,
        overrides={
            "journalDirectories": str(tmp_path / "journal"),
            "ledgerDirectories": str(tmp_path / "ledgers"),
            "minipulsarDiskUsageOverrideFile": str(tmp_path / "usage"),
        },
    )


@pytest.mark.expect_error_log(r"is full: usage")
async def test_the_report_has_throughput_disk_pending_and_state(tmp_path: Path) -> None:
    """Goal: every figure the broker's placement needs is in the report and moves with the
    bookie. Method: 1 MiB written to the journal counter and two syncs and a hundred adds observed
    between two samples; usage 0.97 makes the bookie read-only."""
    config = load_config_for(tmp_path)
    (tmp_path / "usage").write_text("0.3")
    state = BookieStateManager()
    monitor = LedgerDirsMonitor(config, lambda writable: state.set_cause(LEDGER_DIRS_FULL, not writable))
    pool = ReadThreadPool(1, 10)
    load = BookieLoad(config.journal_dirs, config.ledger_dirs, monitor, state, pool, sample_interval_s=0.05, window_s=5)
    await monitor.start()
    await load.start()
    try:
        assert load.report()["journalWriteBytesPerSecond"] == 0.0  # one sample: no rate yet
        metrics.JOURNAL_WRITE_BYTES.inc(1 << 20)
        metrics.JOURNAL_SYNC.observe(0.7)
        metrics.JOURNAL_SYNC.observe(0.9)
        metrics.ADD_ENTRY_REQUEST_OK.record(0.0004, times=99)
        metrics.ADD_ENTRY_REQUEST_OK.record(0.030)
        metrics.ADD_ENTRY_REQUEST_FAILED.record(5.0)  # failures are not in the add latency
        await wait_for(lambda: load.report()["journalWriteBytesPerSecond"] > 0, timeout_s=5)
        report = load.report()
        window_s = report["loadWindowSeconds"]
        assert report["journalWriteBytesPerSecond"] == pytest.approx((1 << 20) / window_s, rel=0.02)
        assert report["journalSyncLatencyMsAvg"] == pytest.approx(0.8) and report["journalSyncLatencyMsP99"] == 1
        assert report["addEntryLatencyMsAvg"] == pytest.approx(0.696) and report["addEntryLatencyMsP99"] == 0.5
        assert report["ledgerDirsUsedFraction"] == pytest.approx(0.3)
        assert 0 < report["ledgerDirsFreeBytes"] < report["ledgerDirsTotalBytes"]
        assert report["ledgerDirsUsage"][0]["dir"] == str(tmp_path / "ledgers")
        assert report["pendingAdds"] == metrics.TOTALS.adds_in_progress and report["readPoolPending"] == 0
        assert report["readOnly"] is False and report["state"] == "writable" and report["writableLedgerDirs"] == 1
        if os.path.exists("/sys/dev/block"):
            assert report["journalIoUtil"] >= -1 and report["cpuUsedRate"] >= 0
        (tmp_path / "usage").write_text("0.97")
        await monitor.check()
        report = load.report()
        assert report["readOnly"] is True and report["state"] == "readonly" and report["writableLedgerDirs"] == 0
        assert report["readOnlyReasons"] == [LEDGER_DIRS_FULL]
        assert load.disk_space() == (report["ledgerDirsFreeBytes"], report["ledgerDirsTotalBytes"])
    finally:
        await load.close()
        await monitor.close()
        pool.close()


async def test_the_journal_disk_figure_counts_the_neighbours_writes_on_a_shared_device(tmp_path: Path) -> None:
    """Goal: with a SIMULATED shared journal device, the journal-disk rate is the device's
    (every bookie writing to it), while the bookie's own journal rate stays 0. Method: 4 MB
    added to the device's counter by "neighbours" between samples, nothing by this bookie."""
    config = load_config_for(tmp_path)
    monitor = LedgerDirsMonitor(config, lambda writable: None)
    device = CountingDevice()
    load = BookieLoad(
        config.journal_dirs, config.ledger_dirs, monitor, BookieStateManager(), None, 0.05, 5, journal_device=device
    )
    await monitor.start()
    await load.start()
    try:
        first = load.report()
        assert first["journalDiskId"] == device.disk_id and first["journalDiskWriteBytesPerSecond"] == 0.0
        device.written += 4_000_000
        await wait_for(lambda: (load.report()["journalDiskWriteBytesPerSecond"] or 0) > 0, timeout_s=5)
        report = load.report()
        assert report["journalDiskWriteBytesPerSecond"] == pytest.approx(4e6 / report["loadWindowSeconds"], rel=0.02)
        assert report["journalDiskId"] == device.disk_id
        assert report["journalWriteBytesPerSecond"] == 0.0, "this bookie wrote nothing"
    finally:
        await load.close()
        await monitor.close()
