"""The built-in metadata store's config (``metastore.conf``, ZooKeeper's key names)."""

from __future__ import annotations

from dataclasses import dataclass

from minipulsar.config.settings import setting


@dataclass(frozen=True, slots=True, kw_only=True)
class MetastoreConfig:
    """The built-in metadata store; keys follow ZooKeeper's zoo.cfg where one exists."""

    bind_address: str = setting(
        "bindAddress",
        "127.0.0.1",
        doc="Address the metastore listens on.",
        upstream="minipulsar's own key; ZooKeeper listens on every interface (clientPortAddress).",
    )
    port: int = setting(
        "clientPort",
        6680,
        doc="Port clients connect to; 0 picks a free one.",
        upstream="ZooKeeper's usual clientPort is 2181; the metastore speaks minipulsar's protocol, not ZooKeeper's.",
        min_value=0,
        max_value=65535,
    )
    http_port: int = setting(
        "metricsProvider.httpPort",
        7000,
        doc="Port of the HTTP server for /metrics, with ZooKeeper's metric names; 0 picks a free one.",
        upstream="ZooKeeper's default (its Prometheus metrics provider); Pulsar's zookeeper.conf: 8000.",
        min_value=0,
        max_value=65535,
    )
    data_dir: str = setting(
        "dataDir",
        "data/metastore",
        doc="Directory of the metastore's write-ahead log and snapshots.",
        upstream="Pulsar's zookeeper.conf: data/zookeeper.",
    )
    snapshot_every_txns: int = setting(
        "snapCount",
        10_000,
        doc="Logged changes after which a snapshot is written and a new write-ahead log begun.",
        upstream="ZooKeeper's default: 100000.",
        min_value=1,
    )
    min_session_timeout_ms: int = setting(
        "minSessionTimeout",
        1_000,
        doc="Shortest session timeout (ms) granted; a client asking for less gets this.",
        upstream="ZooKeeper's default: 2 x tickTime = 4000.",
        min_value=100,
    )
    max_session_timeout_ms: int = setting(
        "maxSessionTimeout",
        60_000,
        doc="Longest session timeout (ms) granted; a client asking for more gets this.",
        upstream="ZooKeeper's default: 20 x tickTime = 40000.",
        min_value=100,
    )
    wal_sync: bool = setting(
        "forceSync", True, doc="Sync the write-ahead log before answering a change; off only for throwaway tests."
    )

    def __post_init__(self) -> None:
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError("minSessionTimeout must not exceed maxSessionTimeout")
