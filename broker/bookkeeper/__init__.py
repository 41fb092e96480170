"""The broker's BookKeeper client (docs/design.md §2): ledgers on bookies, quorum writes, recovery."""

from minipulsar.broker.bookkeeper.client import BookKeeper, BookKeeperSettings
from minipulsar.broker.bookkeeper.ledger_handle import LedgerHandle
from minipulsar.broker.bookkeeper.ledger_metadata import LedgerMetadata, LedgerState

__all__ = ["BookKeeper", "BookKeeperSettings", "LedgerHandle", "LedgerMetadata", "LedgerState"]
