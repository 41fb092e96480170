"""AutoRecovery's knobs (BookKeeper's keys; :meth:`AutoRecoverySettings.from_bookie_config`
maps the bookie's config onto them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AutoRecoverySettings:
    lost_bookie_recovery_delay_s: int = 0
    """lostBookieRecoveryDelay; the metadata store's value, when set, wins."""
    auditor_periodic_check_interval_s: float = 604_800
    """auditorPeriodicCheckInterval: every ledger's fragments are checked on their bookies; 0: off."""
    auditor_periodic_bookie_check_interval_s: float = 86_400
    """auditorPeriodicBookieCheckInterval: bookies named by ledgers but not registered; 0: off."""
    rereplication_entry_batch_size: int = 10
    """rereplicationEntryBatchSize: entries read (and then written) in one batch."""
    open_ledger_rereplication_grace_period_s: float = 30.0
    """openLedgerRereplicationGracePeriod: how long an open ledger's writer has to replace a
    lost bookie itself before the worker fences and closes the ledger."""
    lock_release_of_failed_ledger_grace_period_s: float = 300.0
    """lockReleaseOfFailedLedgerGracePeriod: the longest a ledger whose re-replication failed
    is put aside (the wait doubles from 1 s with each failure)."""
    worker_poll_interval_s: float = 5.0
    """A worker with nothing to do looks again this often, besides on every change notification."""

    @classmethod
    def from_bookie_config(cls, config) -> AutoRecoverySettings:
        return cls(
            lost_bookie_recovery_delay_s=config.lost_bookie_recovery_delay_s,
            auditor_periodic_check_interval_s=config.auditor_periodic_check_interval_s,
            auditor_periodic_bookie_check_interval_s=config.auditor_periodic_bookie_check_interval_s,
            rereplication_entry_batch_size=config.rereplication_entry_batch_size,
            open_ledger_rereplication_grace_period_s=config.open_ledger_rereplication_grace_period_ms / 1000,
            lock_release_of_failed_ledger_grace_period_s=config.lock_release_of_failed_ledger_grace_period_ms / 1000,
        )
