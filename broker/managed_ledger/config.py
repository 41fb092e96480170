"""ManagedLedgerConfig: the per-topic settings of a managed ledger and its cursors (Pulsar's
``ManagedLedgerConfig``), built from the broker's config keys by :meth:`from_broker_config`.

Defaults are the broker's (``broker.conf``) except the quorums, which default to a single
bookie so a library user (or a unit test) needs no cluster.

Invariant: a value, fixed for the managed ledger's life; each field names its config key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minipulsar.config import BrokerConfig

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ManagedLedgerConfig:
    ensemble_size: int = 1
    write_quorum: int = 1
    ack_quorum: int = 1
    max_entries_per_ledger: int = 50_000
    """managedLedgerMaxEntriesPerLedger"""
    max_size_per_ledger_bytes: int = 2048 * MIB
    """managedLedgerMaxSizePerLedgerMbytes"""
    min_rollover_s: float = 0.0
    """managedLedgerMinLedgerRolloverTimeMinutes: no roll before this age, even when full."""
    max_rollover_s: float = 240 * 60.0
    """managedLedgerMaxLedgerRolloverTimeMinutes: roll once this old (0 = never by age)."""
    retention_time_minutes: float = 0
    """defaultRetentionTimeInMinutes (0 = none, -1 = forever); see retention.py for the rule."""
    retention_size_mb: float = 0
    """defaultRetentionSizeInMB (0 = none, -1 = unlimited)."""
    retention_check_interval_s: float = 120.0
    """retentionCheckIntervalInSeconds: the periodic trim."""
    max_unacked_ranges_to_persist: int = 10_000
    """managedLedgerMaxUnackedRangesToPersist"""
    mark_delete_rate_limit: float = 1.0
    """managedLedgerDefaultMarkDeleteRateLimit: cursor writes per second not awaited by an
    ack receipt (0 = no limit); see cursor.py."""
    cursor_max_entries_per_ledger: int = 50_000
    """managedLedgerCursorMaxEntriesPerLedger: positions per cursor ledger before it rolls over."""
    cursor_rollover_time_s: float = 14_400.0
    """managedLedgerCursorRolloverTimeInSeconds: a cursor ledger's age at which the next write rolls over."""
    max_unacked_ranges_to_persist_in_metadata_store: int = 1000
    """managedLedgerMaxUnackedRangesToPersistInMetadataStore: at a clean close, more ranges than
    this stay in the cursor ledger instead of the metadata key."""
    cursor_backlogged_threshold: int = 1000
    """managedLedgerCursorBackloggedThreshold: a cursor further behind the tail is not active
    for the entry cache."""
    cache_evict_by_mark_delete: bool = False
    """cacheEvictionByMarkDeletedPosition: keep cached entries until every active cursor
    acknowledged them (not merely read them)."""
    non_durable_cursors_inactive: bool = False
    """minipulsarNonDurableCursorsInactive: non-durable (Reader) cursors never count as active for
    the entry cache, as before Pulsar PR 6769 (the lab's baseline; off is today's behaviour)."""

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> ManagedLedgerConfig:
        return cls(
            ensemble_size=config.ensemble_size,
            write_quorum=config.write_quorum,
            ack_quorum=config.ack_quorum,
            max_entries_per_ledger=config.managed_ledger_max_entries_per_ledger,
            max_size_per_ledger_bytes=config.managed_ledger_max_size_per_ledger_mb * MIB,
            min_rollover_s=config.managed_ledger_min_rollover_minutes * 60.0,
            max_rollover_s=config.managed_ledger_max_rollover_minutes * 60.0,
            retention_time_minutes=config.retention_time_minutes,
            retention_size_mb=config.retention_size_mb,
            retention_check_interval_s=config.retention_check_interval_s,
            max_unacked_ranges_to_persist=config.max_unacked_ranges_to_persist,
            mark_delete_rate_limit=config.mark_delete_rate_limit,
            cursor_max_entries_per_ledger=config.cursor_max_entries_per_ledger,
            cursor_rollover_time_s=config.cursor_rollover_time_s,
            max_unacked_ranges_to_persist_in_metadata_store=config.max_unacked_ranges_to_persist_in_metadata_store,
            cursor_backlogged_threshold=config.cursor_backlogged_threshold,
            cache_evict_by_mark_delete=config.cache_eviction_by_mark_deleted_position,
            non_durable_cursors_inactive=config.non_durable_cursors_inactive,
        )
