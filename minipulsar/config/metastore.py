"""The built-in metadata store's config (``metastore.conf``, ZooKeeper's key names)."""

from __future__ import annotations

from dataclasses import dataclass

from minipulsar.config.settings import setting


@dataclass(frozen=True, slots=True, kw_only=True)
class MetastoreConfig:
    """The built-in metadata store; keys follow ZooKeeper's zoo.cfg where one exists."""

    bind_address: str = setting("bindAddress", "127.0.0.1")
    port: int = setting("clientPort", 6680, min_value=0, max_value=65535)
    data_dir: str = setting("dataDir", "data/metastore")
    snapshot_every_txns: int = setting("snapCount", 10_000, min_value=1)
    """Write a snapshot and start a new WAL after this many logged changes (ZooKeeper: snapCount)."""
    min_session_timeout_ms: int = setting("minSessionTimeout", 1_000, min_value=100)
    max_session_timeout_ms: int = setting("maxSessionTimeout", 60_000, min_value=100)
    wal_sync: bool = setting("forceSync", True)
    """fsync the WAL before answering (ZooKeeper: forceSync). Off only for throwaway tests."""

    def __post_init__(self) -> None:
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError("minSessionTimeout must not exceed maxSessionTimeout")
