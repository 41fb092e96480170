"""Metadata stores: the ZooKeeper model behind one async interface (see :mod:`.store`).

``await open_metadata_store(url)`` picks the backend from the URL:

- ``memory://<name>``: in-process (:mod:`.memory`); stores opened with the same name in one
  process share one tree, each with its own session;
- ``metastore://host:port``: the built-in ``minipulsar metastore`` server (:mod:`.client`);
- ``zk:host:port[,host:port...][/chroot]`` (Pulsar's ``metadataStoreUrl``, also ``zk://``) or
  ``zk+hierarchical://host:port[;host:port...]/ledgers`` (BookKeeper's ``metadataServiceUri``):
  a ZooKeeper ensemble (:mod:`.zookeeper`, URLs in :mod:`.zk_url`).

Whichever it is, the store comes wrapped in an :class:`~.instrumented.InstrumentedMetadataStore`,
which exports the metadata layer's metrics (:mod:`.stats`).
"""

from __future__ import annotations

from minipulsar.errors import ConfigError
from minipulsar.metadata.client import DEFAULT_PORT, MetastoreClient
from minipulsar.metadata.instrumented import InstrumentedMetadataStore
from minipulsar.metadata.memory import MemoryMetadataStore, shared_tree
from minipulsar.metadata.store import (
    NOT_EXISTS,
    GetResult,
    Listener,
    MetadataStore,
    Notification,
    NotificationType,
    SessionEvent,
    SessionListener,
    Stat,
    is_under,
    parent_of,
    validate_path,
)
from minipulsar.metadata.zk_url import is_zookeeper_url, parse_zookeeper_url
from minipulsar.net.client import parse_address

__all__ = [
    "NOT_EXISTS",
    "GetResult",
    "InstrumentedMetadataStore",
    "Listener",
    "MemoryMetadataStore",
    "MetadataStore",
    "MetastoreClient",
    "Notification",
    "NotificationType",
    "SessionEvent",
    "SessionListener",
    "Stat",
    "is_under",
    "open_metadata_store",
    "parent_of",
    "validate_path",
]


class UnsupportedMetadataUrl(ConfigError, ValueError):
    """A metadata store URL of an unknown form: a configuration error (servers exit with one
    clear line), and a ``ValueError`` for library callers."""


async def open_metadata_store(url: str, *, session_timeout_ms: int = 30_000) -> MetadataStore:
    """A started store for ``url``, with a session of ``session_timeout_ms``, measured by an
    :class:`InstrumentedMetadataStore` (its ``backend`` is the store :func:`_open_backend` opened).

    Raises: as :func:`_open_backend`.
    """
    return InstrumentedMetadataStore(await _open_backend(url, session_timeout_ms=session_timeout_ms))


async def _open_backend(url: str, *, session_timeout_ms: int) -> MetadataStore:
    """A started backend for ``url``, with a session of ``session_timeout_ms``.

    Raises:
        ConfigError: ``url`` is not ``memory://<name>``, ``metastore://host:port`` or a
            ZooKeeper URL (a ``ValueError`` too).
        ConnectionClosedError, RequestTimeoutError: the metastore server or ZooKeeper is unreachable.
    """
    if is_zookeeper_url(url):
        from minipulsar.metadata.zookeeper import ZooKeeperMetadataStore  # kazoo only where it is used

        store = ZooKeeperMetadataStore(parse_zookeeper_url(url), session_timeout_ms=session_timeout_ms)
        await store.start()
        return store
    scheme, separator, rest = url.partition("://")
    if separator and scheme == "memory":
        return MemoryMetadataStore(shared_tree(rest), session_timeout_ms=session_timeout_ms)
    if separator and scheme == "metastore" and rest.strip("/"):
        host, port = parse_address(url, DEFAULT_PORT)
        client = MetastoreClient(host, port, session_timeout_ms=session_timeout_ms)
        await client.start()
        return client
    raise UnsupportedMetadataUrl(
        f"unsupported metadata store URL {url!r}: expected memory://<name>, metastore://host:port, "
        "zk:host:port[,host:port][/chroot] or zk+hierarchical://host:port[;host:port]/ledgers"
    )
