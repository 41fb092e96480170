"""Rollover and trimming rules (retention.py) and the batch header peek used by SEEK by time."""

from __future__ import annotations

import pytest

from minipulsar.broker.managed_ledger.config import MIB, ManagedLedgerConfig
from minipulsar.broker.managed_ledger.info import LedgerInfo
from minipulsar.broker.managed_ledger.position import Position
from minipulsar.broker.managed_ledger.retention import consumed_prefix, current_ledger_is_full, ledgers_to_trim
from minipulsar.protocol.batch import BatchMessage, encode_batch, peek_publish_time_ms

NOW_MS = 10_000_000


def test_full_by_entries_or_size_but_never_before_the_minimum_age() -> None:
    config = ManagedLedgerConfig(max_entries_per_ledger=10, max_size_per_ledger_bytes=1000, min_rollover_s=60)
    assert not current_ledger_is_full(config, 10, 0, age_s=59, max_rollover_s=3600)
    assert current_ledger_is_full(config, 10, 0, age_s=61, max_rollover_s=3600)
    assert current_ledger_is_full(config, 1, 1000, age_s=61, max_rollover_s=3600)
    assert not current_ledger_is_full(config, 9, 999, age_s=61, max_rollover_s=3600)


def test_full_by_age_at_the_maximum_and_never_by_age_when_it_is_zero() -> None:
    config = ManagedLedgerConfig(min_rollover_s=0)
    assert current_ledger_is_full(config, 1, 1, age_s=1.0, max_rollover_s=1.0)
    assert not current_ledger_is_full(config, 1, 1, age_s=0.9, max_rollover_s=1.0)
    assert not current_ledger_is_full(config, 1, 1, age_s=1e9, max_rollover_s=0)


def closed(ledger_id: int, entries: int = 10, size: int = MIB, closed_ms: int = NOW_MS) -> LedgerInfo:
    return LedgerInfo(ledger_id, entries, size, closed_ms)


def test_consumed_means_wholly_at_or_before_the_slowest_mark_delete_and_never_the_last() -> None:
    ledgers = [closed(1), closed(2), closed(3), LedgerInfo(4)]
    assert consumed_prefix(ledgers, Position(2, 8)) == 1, "ledger 2 still has entry 9 unacknowledged"
    assert consumed_prefix(ledgers, Position(2, 9)) == 2, "its last entry acknowledged: all of it"
    assert consumed_prefix(ledgers, Position(4, 3)) == 3, "the open ledger is never consumed"
    assert consumed_prefix(ledgers, None) == 3, "no durable cursor: everything but the last"
    assert consumed_prefix([LedgerInfo(1)], None) == 0


def trim(ledgers: list[LedgerInfo], minutes: float, megabytes: float, slowest: Position | None = None) -> list[int]:
    config = ManagedLedgerConfig(retention_time_minutes=minutes, retention_size_mb=megabytes)
    total = sum(info.size for info in ledgers)
    return [info.ledger_id for info in ledgers_to_trim(config, ledgers, slowest, total, NOW_MS)]


@pytest.mark.parametrize(
    ("minutes", "megabytes", "expected"),
    [
        (0, 0, [1, 2, 3]),  # no retention: consumed ledgers go
        (-1, -1, []),  # keep forever
        (-1, 0, []),  # 0 with a non-zero other bound means "not set": unlimited
        (0, -1, []),
        (-1, 2, [1, 2]),  # keep the newest 2 MB (of 4 MB: ledgers 3 and 4 stay)
        (60, -1, [1, 2]),  # keep an hour: ledgers 1 and 2 closed 2 h ago
        (60, 100, [1, 2]),  # expired OR over size: expired decides
        (600, 1, [1, 2, 3]),  # over size decides (the open ledger is never trimmed)
    ],
)
def test_retention_combination(minutes: float, megabytes: float, expected: list[int]) -> None:
    two_hours_ago = NOW_MS - 2 * 3600 * 1000
    ledgers = [
        closed(1, closed_ms=two_hours_ago),
        closed(2, closed_ms=two_hours_ago),
        closed(3),
        LedgerInfo(4, None, MIB),
    ]
    assert trim(ledgers, minutes, megabytes) == expected


def test_retention_never_trims_what_a_durable_cursor_still_needs() -> None:
    ledgers = [closed(1), closed(2), closed(3), LedgerInfo(4)]
    assert trim(ledgers, 0, 0, slowest=Position(2, 3)) == [1]


def test_trimming_stops_at_the_first_ledger_kept() -> None:
    old, new = NOW_MS - 7200_000, NOW_MS
    ledgers = [closed(1, closed_ms=old), closed(2, closed_ms=new), closed(3, closed_ms=old), LedgerInfo(4)]
    assert trim(ledgers, 60, -1) == [1]


@pytest.mark.parametrize("publish_time_ms", [0, 1, 127, 128, 65_535, 1 << 31, 1_700_000_000_123])
def test_publish_time_is_read_from_the_batch_header(publish_time_ms: int) -> None:
    payload = encode_batch(publish_time_ms, "producer", [BatchMessage(i, b"x" * 10) for i in range(300)])
    assert peek_publish_time_ms(payload) == publish_time_ms
    assert peek_publish_time_ms(b"not a batch") is None
