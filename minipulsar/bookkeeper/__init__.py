"""The broker's BookKeeper client (docs/design.md §2): ledgers on bookies, quorum writes, recovery."""

from minipulsar.bookkeeper.client import BookKeeper, BookKeeperSettings
from minipulsar.bookkeeper.ledger_handle import LedgerHandle
from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata, LedgerState

__all__ = ["BookKeeper", "BookKeeperSettings", "LedgerHandle", "LedgerMetadata", "LedgerState"]
