"""Garbage-collection rules without I/O: which entry logs are deleted or compacted at which
thresholds, when a major or a minor compaction is due (disk pressure included), the
compaction throttle's pacing, the ledger-path contract and the config checks."""

from __future__ import annotations

import pytest

from minipulsar.bookie.storage.compaction import CHUNK_BYTES_MAX, CompactionThrottle, logs_to_compact, logs_to_delete
from minipulsar.bookie.storage.entry_log import LOG_HEADER_SIZE
from minipulsar.bookie.storage.gc import (
    NO_PRESSURE,
    TIMER,
    CompactionKind,
    DiskPressure,
    GcSettings,
    Trigger,
    compaction_due,
)
from minipulsar.bookie.storage.single_directory import EntryLogUsage
from minipulsar.config import BookieConfig, load_config
from minipulsar.errors import ConfigError
from minipulsar.ledger_paths import ledger_path, parse_ledger_node
from tests.support.clock import ManualClock

HOUR, DAY = 3600.0, 86_400.0


def log_usage(log_id: int, live_fraction: float, records_bytes: int = 1000) -> EntryLogUsage:
    return EntryLogUsage(log_id, int(live_fraction * records_bytes), records_bytes + LOG_HEADER_SIZE)


def test_usage_is_the_live_fraction_of_the_records_space() -> None:
    assert log_usage(1, 0.25).usage == pytest.approx(0.25)
    assert EntryLogUsage(1, 0, LOG_HEADER_SIZE).usage == 0.0, "a log with only its header"
    assert EntryLogUsage(1, 5000, 1000).usage == 1.0, "live bytes are an upper bound: capped"


def test_only_logs_without_live_bytes_are_deleted() -> None:
    logs = [log_usage(1, 0.0), log_usage(2, 0.001), log_usage(3, 1.0), EntryLogUsage(4, 0, 50_000)]
    assert [u.log_id for u in logs_to_delete(logs)] == [1, 4]


def test_logs_below_the_threshold_are_compacted_emptiest_first() -> None:
    logs = [
        log_usage(1, 0.0),
        log_usage(2, 0.45),
        log_usage(3, 0.1),
        log_usage(4, 0.5),
        log_usage(5, 0.19),
        log_usage(6, 0.9),
    ]
    assert [u.log_id for u in logs_to_compact(logs, 0.5)] == [3, 5, 2], "dead logs are deleted, not compacted"
    assert [u.log_id for u in logs_to_compact(logs, 0.2)] == [3, 5]
    assert logs_to_compact(logs, 0.0) == [], "threshold 0 disables"


def gc_settings(**overrides) -> GcSettings:
    config = load_config(BookieConfig, overrides={k: str(v) for k, v in overrides.items()})
    return GcSettings.from_config(config)


def due(
    now: float,
    last_major: float = 0.0,
    last_minor: float = 0.0,
    trigger: Trigger = TIMER,
    pressure: DiskPressure = NO_PRESSURE,
    **overrides,
) -> CompactionKind | None:
    return compaction_due(gc_settings(**overrides), now, last_major, last_minor, trigger, pressure)


def test_compaction_runs_on_its_intervals_major_first() -> None:
    assert due(now=HOUR - 1) is None
    assert due(now=HOUR + 1) is CompactionKind.MINOR
    assert due(now=DAY + 1) is CompactionKind.MAJOR
    assert due(now=DAY + 1, last_major=DAY) is CompactionKind.MINOR, "major ran recently, minor is due"
    assert due(now=DAY + 1, majorCompactionThreshold=0, minorCompactionThreshold=0) is None, "both disabled"
    assert due(now=DAY + 1, majorCompactionInterval=0) is CompactionKind.MINOR, "major disabled"


def test_a_forced_round_compacts_at_once() -> None:
    assert due(now=1, trigger=Trigger(force=True)) is CompactionKind.MAJOR
    assert due(now=1, trigger=Trigger(force=True, force_major=False)) is CompactionKind.MINOR
    assert due(now=1, trigger=Trigger(force=True, force_major=False, force_minor=False)) is None


def test_disk_pressure_suspends_major_then_minor_compaction() -> None:
    almost_full, full = DiskPressure(almost_full=True), DiskPressure(almost_full=True, full=True)
    assert due(now=DAY + 1, pressure=almost_full) is CompactionKind.MINOR, "major suspended"
    assert due(now=1, trigger=Trigger(force=True), pressure=almost_full) is CompactionKind.MINOR
    assert due(now=DAY + 1, pressure=full) is None, "both suspended"
    assert due(now=1, trigger=Trigger(force=True), pressure=full) is None, "a force does not lift it"


def test_with_force_gc_allowed_disk_pressure_forces_compaction() -> None:
    full = DiskPressure(almost_full=True, full=True)
    assert due(now=1, pressure=full, isForceGCAllowWhenNoSpace="true") is CompactionKind.MAJOR
    assert due(now=1, pressure=DiskPressure(almost_full=True), isForceGCAllowWhenNoSpace="true") is CompactionKind.MAJOR
    assert due(now=1, isForceGCAllowWhenNoSpace="true") is None, "no pressure, nothing due"


def test_the_throttle_paces_chunks_at_the_entry_rate() -> None:
    clock = ManualClock()
    throttle = CompactionThrottle(1000, by_bytes=False, clock=clock)
    assert throttle.chunk_caps() == (1000, CHUNK_BYTES_MAX)
    assert throttle.delay_s(500, 10**9) == 0, "the first chunk goes at once; bytes do not count"
    assert throttle.delay_s(500, 1) == pytest.approx(0.5)
    clock.advance(2.0)  # idle time is not saved up beyond the current chunk
    assert throttle.delay_s(1000, 1) == 0
    assert throttle.delay_s(1, 1) == pytest.approx(1.0)


def test_the_throttle_paces_chunks_at_the_byte_rate() -> None:
    clock = ManualClock()
    throttle = CompactionThrottle(1_000_000, by_bytes=True, clock=clock)
    assert throttle.chunk_caps()[1] == 1_000_000, "one second's worth per chunk"
    assert throttle.delay_s(1, 250_000) == 0
    assert throttle.delay_s(1000, 250_000) == pytest.approx(0.25)
    assert CompactionThrottle(10, by_bytes=False).chunk_caps()[0] == 10


def test_the_ledger_path_contract() -> None:
    assert ledger_path(42) == "/ledgers/L42"
    assert parse_ledger_node("L42") == 42
    for name in ("available", "idgen", "L", "L-1", "Lx2", "l42", "L４２"):
        assert parse_ledger_node(name) is None, name


def test_the_broker_uses_the_shared_ledger_path() -> None:
    from minipulsar.bookkeeper import ledger_metadata

    assert ledger_metadata.ledger_path is ledger_path


def test_gc_settings_keep_bookkeeper_names_and_defaults() -> None:
    config = BookieConfig()
    assert (
        config.gc_wait_time_ms,
        config.minor_compaction_threshold,
        config.minor_compaction_interval_s,
        config.major_compaction_threshold,
        config.major_compaction_interval_s,
    ) == (900_000, 0.2, 3600, 0.5, 86_400)
    assert (
        config.compaction_rate_by_entries,
        config.compaction_rate_by_bytes,
        config.is_throttle_by_bytes,
        config.is_force_gc_allow_when_no_space,
    ) == (1000, 1_000_000, False, False)
    with pytest.raises(ConfigError, match="minorCompactionThreshold"):
        load_config(BookieConfig, overrides={"minorCompactionThreshold": "0.6", "majorCompactionThreshold": "0.5"})
