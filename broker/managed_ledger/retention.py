"""When to roll the current ledger and which ledgers to trim: pure rules, no I/O.

Rollover is Pulsar's ``currentLedgerIsFull``: full by entries or bytes, or aged past the
maximum rollover time — but never before the minimum rollover time.

Trimming. A ledger may go only when it is *consumed*: wholly at or before the slowest durable
cursor's mark-delete position (every ledger but the last when there is no durable cursor;
non-durable cursors never hold data). Consumed ledgers are then walked oldest first and
deleted while they are *outside the retention window*; the walk stops at the first one kept.
The last ledger (the one written, or about to be replaced) is never deleted.

The retention window (``defaultRetentionTimeInMinutes`` T, ``defaultRetentionSizeInMB`` S):

- T = 0 and S = 0: no window — a ledger goes as soon as it is consumed (Pulsar's default);
- -1 makes that bound unlimited; 0 for one bound while the other is non-zero means "not set",
  i.e. unlimited too (Pulsar rejects such a policy; we let the other bound decide);
- otherwise a consumed ledger is outside the window when it is older than T (closed more than
  T minutes ago) OR when, without it and every older ledger, the topic still holds at least S
  — Pulsar's rule (``hasLedgerRetentionExpired || isLedgerRetentionOverSizeQuota``).
  So T = -1, S = -1 keeps everything; T = 60, S = -1 keeps an hour; T = -1, S = 100 keeps the
  newest 100 MB (slightly more: whole ledgers).

Invariants:

- the last ledger is never trimmed;
- a ledger is trimmed only when consumed by every durable cursor, and the walk stops at the
  first ledger kept (no holes in the list).
"""

from __future__ import annotations

from collections.abc import Sequence

from minipulsar.broker.managed_ledger.config import MIB, ManagedLedgerConfig
from minipulsar.broker.managed_ledger.info import LedgerInfo
from minipulsar.broker.managed_ledger.position import Position


def current_ledger_is_full(
    config: ManagedLedgerConfig, entries: int, size_bytes: int, age_s: float, max_rollover_s: float
) -> bool:
    """Pulsar's rule; ``max_rollover_s`` is this ledger's jittered maximum (0 = never by age)."""
    space = entries >= config.max_entries_per_ledger or size_bytes >= config.max_size_per_ledger_bytes
    aged = max_rollover_s > 0 and age_s >= max_rollover_s
    if space or aged:
        return config.min_rollover_s <= 0 or age_s > config.min_rollover_s
    return False


def consumed_prefix(ledgers: Sequence[LedgerInfo], slowest_mark_delete: Position | None) -> int:
    """How many leading ledgers are wholly consumed (never the last one)."""
    limit = len(ledgers) - 1
    if slowest_mark_delete is None:
        return max(0, limit)
    count = 0
    for info in ledgers[:limit]:
        if info.ledger_id < slowest_mark_delete.ledger_id or (
            info.ledger_id == slowest_mark_delete.ledger_id
            and info.entries is not None
            and slowest_mark_delete.entry_id >= info.entries - 1
        ):
            count += 1
        else:
            break
    return count


def ledgers_to_trim(
    config: ManagedLedgerConfig,
    ledgers: Sequence[LedgerInfo],
    slowest_mark_delete: Position | None,
    total_size_bytes: int,
    now_ms: int,
) -> list[LedgerInfo]:
    """The consumed ledgers outside the retention window, oldest first (see the module doc)."""
    consumed = ledgers[: consumed_prefix(ledgers, slowest_mark_delete)]
    time_limit_ms, size_limit_bytes = _retention_bounds(config)
    if time_limit_ms == 0 and size_limit_bytes == 0:
        return list(consumed)
    trimmed: list[LedgerInfo] = []
    freed = 0
    for info in consumed:
        freed += info.size
        expired = time_limit_ms is not None and now_ms - info.timestamp_ms > time_limit_ms
        over_size = size_limit_bytes is not None and total_size_bytes - freed >= size_limit_bytes
        if not (expired or over_size):
            break
        trimmed.append(info)
    return trimmed


def _retention_bounds(config: ManagedLedgerConfig) -> tuple[float | None, float | None]:
    """(time ms, size bytes); None = unlimited; (0, 0) = no retention at all."""
    minutes, megabytes = config.retention_time_minutes, config.retention_size_mb
    if minutes == 0 and megabytes == 0:
        return 0, 0
    time_limit = None if minutes <= 0 else minutes * 60_000
    size_limit = None if megabytes <= 0 else megabytes * MIB
    return time_limit, size_limit
