"""The standalone cluster's layout: directories, ports, quorums, and what is kept across restarts.

::

    DATA_DIR/
      standalone.json      bookie identities chosen on earlier runs, and the metadata store (see below)
      standalone.lock      held (flock) by the running launcher
      logs/<name>.log      each child's stderr: metastore.log, bookie-0.log, ..., broker.log
                           (broker-0.log, broker-1.log, ... with --brokers N > 1)
      metastore/           the metastore's WAL and snapshots (not with --metadata-url)
    JOURNAL_ROOT/bookie-<i>/   default DATA_DIR/journal; put it on the fast (fsync) disk
    LEDGER_ROOT/bookie-<i>/    default DATA_DIR/ledgers; put it on the big disk

Invariant: a bookie's identity is ``advertised-host:port``, and the metadata of every ledger it
stores names it. Bookie i therefore keeps its port and advertised host on every run on one data
dir: ports picked at random (port 0) are recorded in standalone.json once the bookie is ready and
reused later; only an explicit non-zero ``--bookie-port`` (or ``--advertised-address``) changes them.

Brokers keep nothing on disk, so they need no saved identity: broker i listens on
``--broker-port`` + i and ``--web-port`` + i (or any free ports when those are 0).

Metadata: the launcher's own metastore (``metadata_url`` None), or an external store named by
``--metadata-url`` (a ZooKeeper ensemble, ``zk:host:port[,host:port][/chroot]``, or ``metastore://host:port``),
which every bookie and broker is given and no metastore child is started for. Invariant: one
data dir belongs to one metadata store. Its bookies hold ledgers whose metadata (ensembles, last
entry, the topics naming them) lives in that store: started on another store, a bookie's garbage
collector deletes every ledger that store does not list (bookie/storage/gc.py), and the ledger
ids the other store allocates collide with the ones it held. So the store is recorded in
standalone.json with the bookie ports, and a later run asking for another one is refused
(:func:`make_plan`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from minipulsar.errors import ConfigError
from minipulsar.metadata.zk_url import parse_zookeeper_url

log = logging.getLogger("minipulsar.standalone")

STATE_FORMAT = 1

DEFAULT_BROKER_PORT = 6650  # Pulsar brokerServicePort
DEFAULT_WEB_PORT = 8080  # Pulsar webServicePort
DEFAULT_METASTORE_PORT = 6680  # docs/design.md §1
DEFAULT_METASTORE_HTTP_PORT = 7000  # ZooKeeper metricsProvider.httpPort
DEFAULT_BOOKIE_PORT = 3181  # BookKeeper bookiePort
DEFAULT_BOOKIE_HTTP_PORT = 8000  # BookKeeper httpServerPort

_WILDCARDS = ("0.0.0.0", "::", "")


@dataclass(frozen=True, slots=True)
class Quorum:
    """The broker's managedLedgerDefault{EnsembleSize,WriteQuorum,AckQuorum}."""

    ensemble_size: int
    write_quorum: int
    ack_quorum: int


def quorum_for(bookie_count: int) -> Quorum:
    """1/1/1 with one bookie; 2/2/2 with more: each entry on two bookies, both acknowledging.

    Pulsar's standalone runs 1/1/1 on its single bookie; with two or more, 2/2/2 means losing any
    one bookie's disk loses no acknowledged entry.
    """
    assert bookie_count >= 1, bookie_count
    return Quorum(1, 1, 1) if bookie_count == 1 else Quorum(2, 2, 2)


@dataclass(slots=True)
class StandaloneState:
    """What standalone.json remembers between runs: the bookies' identities and their metadata store."""

    advertised_address: str | None = None
    bookie_ports: dict[str, int] = field(default_factory=dict)
    """Bookie name (``bookie-0``) → the port it registered with."""
    metadata_url: str | None = None
    """``--metadata-url`` of the run that registered the bookies; None: the launcher's own
    metastore (also what a file written before the key existed means)."""

    def to_json(self) -> str:
        return (
            json.dumps(
                {
                    "format": STATE_FORMAT,
                    "advertised_address": self.advertised_address,
                    "bookie_ports": self.bookie_ports,
                    "metadata_url": self.metadata_url,
                },
                indent=2,
                sort_keys=True,
            )
            + "\n"
        )

    @classmethod
    def from_json(cls, text: str, source: str) -> StandaloneState:
        """Raises ConfigError on anything but a well-formed state document."""
        try:
            raw = json.loads(text)
            ports = raw["bookie_ports"]
            ok = (
                raw.get("format") == STATE_FORMAT
                and isinstance(ports, dict)
                and all(isinstance(p, int) and 0 < p < 65536 for p in ports.values())
                and isinstance(raw.get("metadata_url"), str | None)
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            ok = False
        if not ok:
            raise ConfigError(
                f"{source} is not a minipulsar standalone state file (format {STATE_FORMAT}); "
                "fix or remove it (bookies will then pick new ports, and ledgers written "
                "under the old bookie ids become unreadable)"
            )
        return cls(raw.get("advertised_address"), {str(k): int(v) for k, v in ports.items()}, raw.get("metadata_url"))


def load_state(path: Path) -> StandaloneState:
    """The saved state, or an empty one when there is none yet (a fresh data dir)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return StandaloneState()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    return StandaloneState.from_json(text, str(path))


def save_state(path: Path, state: StandaloneState) -> None:
    """Write atomically (temp file, fsync, rename): a crash leaves the old or the new file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(state.to_json())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@dataclass(frozen=True, slots=True)
class BookieSlot:
    """Bookie i of the standalone cluster."""

    index: int
    port: int
    """0: pick a free port (and record it once the bookie is ready)."""
    http_port: int
    journal_dir: Path
    ledger_dir: Path

    @property
    def name(self) -> str:
        return f"bookie-{self.index}"


@dataclass(frozen=True, slots=True)
class BrokerSlot:
    """Broker i of the standalone cluster."""

    index: int
    name: str
    """``broker`` when there is one, else ``broker-<i>`` (its log file and its name in messages)."""
    port: int
    """0: any free port."""
    web_port: int


@dataclass(frozen=True, slots=True)
class StandalonePlan:
    data_dir: Path
    bind_address: str
    advertised_address: str
    metastore_port: int
    broker_port: int
    web_port: int
    bookies: tuple[BookieSlot, ...]
    broker_count: int = 1
    metastore_http_port: int = DEFAULT_METASTORE_HTTP_PORT
    """The metastore's /metrics port (0: any free port)."""
    metadata_url: str | None = None
    """The external metadata store every bookie and broker uses; None: start a metastore child."""

    @property
    def brokers(self) -> tuple[BrokerSlot, ...]:
        """Broker i on ``broker_port + i`` / ``web_port + i`` (0 stays 0: any free port)."""
        count = self.broker_count
        return tuple(
            BrokerSlot(
                i,
                "broker" if count == 1 else f"broker-{i}",
                self.broker_port + i if self.broker_port else 0,
                self.web_port + i if self.web_port else 0,
            )
            for i in range(count)
        )

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def metastore_dir(self) -> Path:
        return self.data_dir / "metastore"

    @property
    def state_path(self) -> Path:
        return self.data_dir / "standalone.json"

    @property
    def quorum(self) -> Quorum:
        return quorum_for(len(self.bookies))

    @property
    def runs_metastore(self) -> bool:
        return self.metadata_url is None

    def fixed_ports(self) -> list[tuple[str, int]]:
        """(owner, port) for every non-zero port the children will bind."""
        metastore = [("metastore", self.metastore_port), ("metastore http", self.metastore_http_port)]
        owners = metastore if self.runs_metastore else []
        for broker in self.brokers:
            owners += [(broker.name, broker.port), (f"{broker.name} web service", broker.web_port)]
        for b in self.bookies:
            owners += [(b.name, b.port), (f"{b.name} http", b.http_port)]
        return [(owner, port) for owner, port in owners if port]


def default_advertised_address(bind_address: str) -> str:
    """The bind address, or loopback when binding every interface (a wildcard is no address)."""
    return "127.0.0.1" if bind_address in _WILDCARDS else bind_address


def bookie_ports(count: int, explicit_base: int | None, saved: Mapping[str, int]) -> list[int]:
    """Bookie i's port: explicit non-zero base + i, else the saved port, else default base + i.

    An explicit 0 means "any free port", so it keeps a saved port: a restart with the same
    command line must not change a bookie's identity.
    """
    ports = []
    for i in range(count):
        name = f"bookie-{i}"
        if explicit_base:
            port = explicit_base + i
            if name in saved and saved[name] != port:
                log.warning(
                    "%s moves from port %d to %d: ledgers it stored name its old id and become unreadable through it",
                    name,
                    saved[name],
                    port,
                )
        elif name in saved:
            port = saved[name]
        else:
            port = DEFAULT_BOOKIE_PORT + i if explicit_base is None else 0
        ports.append(port)
    return ports


def make_plan(
    *,
    data_dir: Path,
    bookie_count: int,
    journal_root: Path | None = None,
    ledger_root: Path | None = None,
    bind_address: str = "127.0.0.1",
    advertised_address: str | None = None,
    metastore_port: int = DEFAULT_METASTORE_PORT,
    metastore_http_port: int = DEFAULT_METASTORE_HTTP_PORT,
    broker_port: int = DEFAULT_BROKER_PORT,
    web_port: int = DEFAULT_WEB_PORT,
    bookie_port: int | None = None,
    bookie_http_port: int = DEFAULT_BOOKIE_HTTP_PORT,
    state: StandaloneState | None = None,
    broker_count: int = 1,
    metadata_url: str | None = None,
) -> StandalonePlan:
    """Resolve the command line against the saved state.

    Raises:
        ConfigError: no bookies or brokers, a port out of range, one port given to two servers,
            a metadata URL no separate process can share, or another metadata store than the
            one this data dir's bookies were registered in.
    """
    if bookie_count < 1:
        raise ConfigError(f"--bookies must be at least 1, got {bookie_count}")
    if broker_count < 1:
        raise ConfigError(f"--brokers must be at least 1, got {broker_count}")
    state = state or StandaloneState()
    if metadata_url is not None:
        check_external_metadata_url(metadata_url)
    _check_same_metadata_store(metadata_url, state, data_dir)
    advertised = _advertised_address(advertised_address, bind_address, state)
    ports = bookie_ports(bookie_count, bookie_port, state.bookie_ports)
    journal_root = journal_root or data_dir / "journal"
    ledger_root = ledger_root or data_dir / "ledgers"
    bookies = tuple(
        BookieSlot(
            i,
            ports[i],
            bookie_http_port + i if bookie_http_port else 0,
            journal_root / f"bookie-{i}",
            ledger_root / f"bookie-{i}",
        )
        for i in range(bookie_count)
    )
    plan = StandalonePlan(
        data_dir,
        bind_address,
        advertised,
        metastore_port,
        broker_port,
        web_port,
        bookies,
        broker_count,
        metastore_http_port=metastore_http_port,
        metadata_url=metadata_url,
    )
    _check_ports(plan.fixed_ports())
    return plan


def check_external_metadata_url(url: str) -> None:
    """Refuse, before anything starts, a URL the children could not share or would not parse.

    ``memory://`` would give every child a store of its own. A ZooKeeper URL is parsed here as
    its children will parse it; a ``metastore://`` one only by its scheme (its children name
    what is wrong with its host or port).

    Raises:
        ConfigError: not a ZooKeeper URL (Pulsar's ``zk:`` form) that parses, nor a metastore URL.
    """
    if url.startswith("zk:"):
        parse_zookeeper_url(url)  # InvalidZooKeeperUrl is a ConfigError naming the fault
    elif not url.startswith("metastore://") or url == "metastore://":
        raise ConfigError(
            f"--metadata-url {url!r}: expected zk:host:port[,host:port][/chroot] (ZooKeeper) or "
            "metastore://host:port (a metastore started on its own)"
        )


def _check_same_metadata_store(url: str | None, state: StandaloneState, data_dir: Path) -> None:
    if not state.bookie_ports or state.metadata_url == url:
        return
    raise ConfigError(
        f"{data_dir} holds bookies registered in {_store_name(state.metadata_url)}, and this run asks "
        f"for {_store_name(url)}: their ledgers' metadata is in the first store, and on the second "
        f"their garbage collector would delete every ledger it does not list. Use another --data-dir, "
        f"or the same store (if it only moved, set metadata_url in {data_dir / 'standalone.json'})"
    )


def _store_name(url: str | None) -> str:
    return f"--metadata-url {url}" if url else "the standalone's own metastore"


def _advertised_address(explicit: str | None, bind_address: str, state: StandaloneState) -> str:
    chosen = explicit or state.advertised_address or default_advertised_address(bind_address)
    if chosen in _WILDCARDS:
        raise ConfigError(f"--advertised-address must be an address clients can reach, not {chosen!r}")
    if state.advertised_address and chosen != state.advertised_address and state.bookie_ports:
        log.warning(
            "bookies were advertised as %s and now as %s: ledgers they stored name the old "
            "ids and become unreadable through them",
            state.advertised_address,
            chosen,
        )
    return chosen


def _check_ports(owned: list[tuple[str, int]]) -> None:
    seen: dict[int, str] = {}
    for owner, port in owned:
        if not 0 < port < 65536:
            raise ConfigError(f"{owner} port {port} is out of range (1-65535, or 0 for any free port)")
        if port in seen:
            raise ConfigError(f"port {port} is given to both {seen[port]} and {owner}")
        seen[port] = owner
