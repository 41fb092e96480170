"""ZooKeeper metadata URLs, as Pulsar and BookKeeper spell them, parsed to (servers, chroot).

- Pulsar's ``metadataStoreUrl``: ``zk:host1:2181,host2:2181[/chroot]`` (also ``zk://…``);
- BookKeeper's ``metadataServiceUri``: ``zk+hierarchical://host1:2181;host2:2181/ledgers``
  (servers separated by ``;`` or ``,``). Its path names the *ledgers root*. minipulsar keeps
  one layout under ``/ledgers`` (``/ledgers/L{id}``, ``/ledgers/available``, …), so the path
  must end in ``/ledgers`` and what comes before it is the chroot:
  ``zk+hierarchical://h:2181/pulsar1/ledgers`` is chroot ``/pulsar1``. The ledger manager
  named in the scheme (``hierarchical``, ``flat``, ``null``: BookKeeper's) does not change
  that layout; any other is refused.

The chroot is a path prefix the store adds to every key and strips from every notification;
"" means none.
"""

from __future__ import annotations

from dataclasses import dataclass

from minipulsar.errors import ConfigError

DEFAULT_PORT = 2181
LEDGERS_ROOT = "/ledgers"
LEDGER_MANAGERS = ("hierarchical", "flat", "null")
"""BookKeeper's ``zk+<ledger manager>://`` schemes accepted (all map to one layout)."""


class InvalidZooKeeperUrl(ConfigError, ValueError):
    """A ``zk:`` / ``zk+…://`` URL that does not parse: a configuration error and a ``ValueError``."""


@dataclass(frozen=True, slots=True)
class ZooKeeperUrl:
    servers: tuple[tuple[str, int], ...]
    chroot: str
    """"" or an absolute path without a trailing ``/``."""

    @property
    def connect_string(self) -> str:
        """ZooKeeper's ``host:port,host:port`` (without the chroot)."""
        return ",".join(f"{host}:{port}" for host, port in self.servers)


def is_zookeeper_url(url: str) -> bool:
    return url.startswith("zk:") or url.startswith("zk+")


def parse_zookeeper_url(url: str) -> ZooKeeperUrl:
    """Parse a Pulsar ``zk:`` or BookKeeper ``zk+<manager>://`` URL.

    Raises:
        InvalidZooKeeperUrl: not one of those forms, no server, a bad port or path.
    """
    if url.startswith("zk+"):
        scheme, separator, rest = url.partition("://")
        manager = scheme.removeprefix("zk+")
        if not separator or manager not in LEDGER_MANAGERS:
            raise InvalidZooKeeperUrl(
                f"unsupported metadata service URI {url!r}: expected zk+{{{','.join(LEDGER_MANAGERS)}}}://host:port/ledgers"
            )
        hosts, path = _split_path(url, rest)
        if not path.endswith(LEDGERS_ROOT):
            raise InvalidZooKeeperUrl(f"{url!r}: the ledgers root must be <chroot>{LEDGERS_ROOT}, got {path or '/'!r}")
        return ZooKeeperUrl(_servers(url, hosts), _chroot(url, path.removesuffix(LEDGERS_ROOT)))
    if not url.startswith("zk:"):
        raise InvalidZooKeeperUrl(f"not a ZooKeeper URL: {url!r}")
    rest = url.removeprefix("zk:")
    rest = rest.removeprefix("//")
    hosts, path = _split_path(url, rest)
    return ZooKeeperUrl(_servers(url, hosts), _chroot(url, path))


def _split_path(url: str, rest: str) -> tuple[str, str]:
    hosts, slash, path = rest.partition("/")
    return hosts, f"/{path}" if slash else ""


def _servers(url: str, hosts: str) -> tuple[tuple[str, int], ...]:
    servers = []
    for server in hosts.replace(";", ",").split(","):
        host, colon, port = server.strip().rpartition(":")
        if not colon:
            host, port = port, str(DEFAULT_PORT)
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidZooKeeperUrl(f"{url!r}: bad ZooKeeper server {server!r} (expected host:port)")
        servers.append((host, int(port)))
    return tuple(servers)


def _chroot(url: str, path: str) -> str:
    path = path.rstrip("/")
    if "//" in path or path.strip() != path:
        raise InvalidZooKeeperUrl(f"{url!r}: bad chroot {path!r}")
    return path
