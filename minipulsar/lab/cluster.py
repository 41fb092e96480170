"""The lab's cluster: a metastore, N bookies and M brokers, each a ``python -m minipulsar`` process.

Every process listens on 127.0.0.1 with port 0 (the kernel picks a free one), announces
itself with its READY line (:class:`~minipulsar.cli.supervisor.Child`) and logs to
``<root>/logs/<name>.log``. A bookie gets its journal and ledger directories from the
scenario (:class:`BookieSpec`: on the emulated disks of :mod:`minipulsar.lab.disks`), its own
settings and environment; a broker its settings (the variant under test).

Invariants:

- :func:`lab_cluster` stops every process it started when its context exits, whatever
  happened inside: brokers together (one at a time, each would unload its bundles onto the
  next), then bookies, then the metastore; SIGTERM, then SIGKILL after a deadline;
- a process that dies while the scenario runs is not restarted: the scenario's own checks see
  it (and the logs say why).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from minipulsar.cli.supervisor import Child, ReadyLine

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
BOOKIE_DEFAULTS: Mapping[str, object] = {"zkTimeout": 2000}
BROKER_DEFAULTS: Mapping[str, object] = {"metadataStoreSessionTimeoutMillis": 2000}


@dataclass(frozen=True, slots=True)
class BookieSpec:
    """One bookie: where it journals and stores ledgers, and what it is told."""

    journal_dir: Path
    ledger_dir: Path
    settings: Mapping[str, object] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)


def set_flags(settings: Mapping[str, object]) -> list[str]:
    """``--set key=value`` per setting (booleans as ``true``/``false``, as the config files spell them)."""
    return [
        flag
        for key, value in settings.items()
        for flag in ("--set", f"{key}={str(value).lower() if isinstance(value, bool) else value}")
    ]


def broker_settings(
    index: int, ensemble: tuple[int, int, int], seed: int | None, own: Mapping[str, object]
) -> dict[str, object]:
    """Broker ``index``'s settings: the lab's defaults, the ensemble, its random seed
    (``seed * 1000 + index``, so no two brokers draw alike; none when ``seed`` is None), then
    its own, which win."""
    e, qw, qa = ensemble
    seeded = {} if seed is None else {"minipulsarRandomSeed": seed * 1000 + index}
    return {
        **BROKER_DEFAULTS,
        "managedLedgerDefaultEnsembleSize": e,
        "managedLedgerDefaultWriteQuorum": qw,
        "managedLedgerDefaultAckQuorum": qa,
        **seeded,
        **own,
    }


@dataclass
class Server:
    """A started server: its child process and the addresses it announced."""

    name: str
    child: Child
    ready: ReadyLine

    @property
    def address(self) -> str:
        return f"{self.ready.host}:{self.ready.port}"

    @property
    def http_url(self) -> str:
        assert self.ready.http is not None, f"{self.name} serves no HTTP"
        host, port = self.ready.http
        return f"http://{host}:{port}"

    @property
    def pid(self) -> int:
        assert self.child.pid is not None
        return self.child.pid


class LabCluster:
    """The running processes of one scenario variant (see the module docstring)."""

    def __init__(self, root: Path, ensemble: tuple[int, int, int], seed: int | None = None) -> None:
        self.root = root
        self.ensemble = ensemble
        """(E, Qw, Qa) of every managed ledger."""
        self.seed = seed
        """What the brokers' random draws are seeded from (:func:`broker_settings`)."""
        self.metastore: Server | None = None
        self.bookies: list[Server] = []
        self.brokers: list[Server | None] = []
        self._broker_settings: list[dict[str, object]] = []
        self._bookie_specs: list[BookieSpec] = []

    @property
    def metadata_url(self) -> str:
        assert self.metastore is not None
        return f"metastore://{self.metastore.address}"

    @property
    def service_url(self) -> str:
        """The first running broker's ``pulsar://`` URL (lookups find the others)."""
        broker = next(b for b in self.brokers if b is not None)
        return f"pulsar://{broker.address}"

    def running_brokers(self) -> list[Server]:
        return [b for b in self.brokers if b is not None]

    async def _start(self, name: str, role: str, args: list[str], env: Mapping[str, str] | None = None) -> Server:
        child = Child(name, role, args, self.root / "logs" / f"{name}.log", env=env)
        try:
            ready = await child.start()
        except BaseException:
            await child.stop()
            raise
        log.info("%s ready on %s", name, ready.address)
        return Server(name, child, ready)

    async def start_metastore(self) -> Server:
        self.metastore = await self._start(
            "metastore",
            "metastore",
            ["--port", "0", "--http-port", "0", "--data-dir", str(self.root / "metastore")],
        )
        return self.metastore

    async def add_bookie(self, spec: BookieSpec) -> Server:
        index = len(self.bookies)
        args = ["--port", "0", "--http-port", "0", "--metadata-url", self.metadata_url]
        args += ["--journal-dir", str(spec.journal_dir), "--ledger-dirs", str(spec.ledger_dir)]
        args += set_flags({**BOOKIE_DEFAULTS, **spec.settings})
        bookie = await self._start(f"bookie-{index}", "bookie", args, spec.env)
        self.bookies.append(bookie)
        self._bookie_specs.append(spec)
        return bookie

    def _broker_args(self, index: int) -> list[str]:
        settings = broker_settings(index, self.ensemble, self.seed, self._broker_settings[index])
        return ["--port", "0", "--http-port", "0", "--metadata-url", self.metadata_url, *set_flags(settings)]

    async def add_brokers(self, settings: Sequence[Mapping[str, object]]) -> list[Server]:
        """Start one broker per entry of ``settings``, in parallel (each takes seconds to start)."""
        first = len(self.brokers)
        self._broker_settings += [dict(s) for s in settings]
        self.brokers += [None] * len(settings)
        started = await asyncio.gather(
            *(self._start(f"broker-{first + i}", "broker", self._broker_args(first + i)) for i in range(len(settings)))
        )
        self.brokers[first:] = started
        return list(started)

    async def stop_broker(self, index: int) -> None:
        """SIGTERM broker ``index`` (a clean shutdown hands its bundles over)."""
        broker, self.brokers[index] = self.brokers[index], None
        if broker is not None:
            await broker.child.stop()

    async def start_broker(self, index: int) -> Server:
        """Start broker ``index`` again with its settings (on new ports)."""
        assert self.brokers[index] is None, f"broker-{index} is running"
        broker = await self._start(f"broker-{index}", "broker", self._broker_args(index))
        self.brokers[index] = broker
        return broker

    async def stop(self) -> None:
        await asyncio.gather(*(b.child.stop() for b in self.running_brokers()))
        await asyncio.gather(*(b.child.stop() for b in self.bookies))
        if self.metastore is not None:
            await self.metastore.child.stop()


@contextlib.asynccontextmanager
async def lab_cluster(
    root: Path,
    bookies: Sequence[BookieSpec],
    brokers: Sequence[Mapping[str, object]],
    ensemble: tuple[int, int, int] = (2, 2, 2),
    seed: int | None = None,
) -> AsyncIterator[LabCluster]:
    """A started cluster under ``root`` (one broker per entry of ``brokers``: its settings, its
    random draws seeded from ``seed``), stopped when the context exits."""
    cluster = LabCluster(root, ensemble, seed)
    try:
        await cluster.start_metastore()
        for spec in bookies:
            await cluster.add_bookie(spec)
        await cluster.add_brokers(brokers)
        yield cluster
    finally:
        await cluster.stop()
