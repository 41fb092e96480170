"""A real multi-process cluster for tests: one metastore, N bookies, M brokers (default 1 each).

- ``make_cluster(..., zookeeper=zk)`` runs it on a ZooKeeper ensemble
  (:class:`tests.support.zookeeper.ZooKeeperEnsemble`, started and stopped by its owner)
  instead of a metastore, ``make_cluster(..., zookeeper_nodes=3)`` on one of its own:
  brokers get Pulsar's ``zk:h:p,…`` URL, bookies BookKeeper's
  ``zk+hierarchical://h:p;…/ledgers``, so both forms run.

- Each server is a separate ``minipulsar`` process on 127.0.0.1 with port 0, its own dirs under
  the test's tmp dir, and a log file under ``<root>/logs``.
- :func:`make_cluster` stops every process (TERM, then KILL) when its context exits, whatever
  happened inside; when start-up or the test fails, it prints every process's log tail.
- ``cluster.broker`` is the first broker (the service URL points at it); ``cluster.brokers`` all of
  them, logging to ``broker.log``, ``broker-1.log``, …; ``restart_broker(index=i)``,
  ``kill_broker(i)`` and ``start_broker(i)`` act on one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from tests.support.process import ServerProcess
from tests.support.servers import bookie_process, metastore_process, set_flags
from tests.support.zookeeper import ZooKeeperEnsemble, skip_unless_zookeeper

CLUSTER_BOOKIE_DEFAULTS: Mapping[str, object] = {"zkTimeout": 2000}
"""A cluster bookie's settings unless ``bookie_settings`` say otherwise (the benchmarks run
these bookies too: journal files keep their default size)."""


@dataclass
class ProcessCluster:
    root: Path
    bookie_count: int = 1
    broker_settings: dict[str, object] = field(default_factory=dict)
    """Extra broker.conf keys (``--set key=value``), e.g. ``{"brokerDeduplicationEnabled": True}``."""
    metastore: ServerProcess | None = None
    bookies: list[ServerProcess] = field(default_factory=list)
    broker_count: int = 1
    brokers: list[ServerProcess] = field(default_factory=list)
    bookie_settings: dict[str, object] = field(default_factory=dict)
    """Extra bookkeeper.conf keys for every bookie (``--set key=value``), e.g. ``{"journalSyncData": False}``."""
    journal_root: Path | None = None
    """Where bookie ``i`` keeps its journal (``<journal_root>/bookie-<i>/journal``); None: under ``root``.
    The benchmarks point it at the disk the user wants measured."""
    ledger_root: Path | None = None
    """Where bookie ``i`` keeps its ledgers (``<ledger_root>/bookie-<i>/ledgers``); None: under ``root``."""
    bookie_env: dict[int, dict[str, str]] = field(default_factory=dict)
    """Extra environment of bookie ``i``'s process (e.g. :class:`tests.support.disk_faults.EioShim`'s)."""
    zookeeper: ZooKeeperEnsemble | None = None
    """The metadata store when set, in place of :attr:`metastore` (which stays None)."""

    @property
    def broker(self) -> ServerProcess | None:
        """The first broker (the one :attr:`service_url` names)."""
        return self.brokers[0] if self.brokers else None

    @broker.setter
    def broker(self, process: ServerProcess | None) -> None:
        assert process is not None
        if self.brokers:
            self.brokers[0] = process
        else:
            self.brokers.append(process)

    def broker_id(self, index: int = 0) -> str:
        """Broker ``index``'s id in the load manager's keys: the host and port of its web service."""
        process = self.brokers[index]
        return f"{process.host}:{process.http_port}"

    @property
    def service_url(self) -> str:
        assert self.broker is not None
        return f"pulsar://{self.broker.address}"

    @property
    def metadata_url(self) -> str:
        if self.zookeeper is not None:
            return self.zookeeper.url
        assert self.metastore is not None
        return f"metastore://{self.metastore.address}"

    def _quorum(self) -> int:
        return 1 if self.bookie_count == 1 else 2

    def _make(self) -> None:
        if self.zookeeper is None:
            self.metastore = metastore_process(self.root)

    def bookie_dirs(self, index: int) -> tuple[Path, Path]:
        """Bookie ``index``'s journal dir and ledger dir."""
        name = f"bookie-{index}"
        return (self.journal_root or self.root) / name / "journal", (self.ledger_root or self.root) / name / "ledgers"

    def metadata_url_of(self, name: str) -> str:
        """The metadata URL process ``name`` (``bookie-0``, ``broker-1``) is given: the
        metastore's own (on ZooKeeper, BookKeeper's form for bookies), unless a subclass puts
        something (a proxy) in between."""
        if self.zookeeper is not None and name.startswith("bookie"):
            return f"zk+hierarchical://{self.zookeeper.connect_string.replace(',', ';')}/ledgers"
        return self.metadata_url

    def settings_of(self, name: str) -> dict[str, object]:
        """Settings of process ``name`` over the role's shared ones (none unless a subclass says)."""
        return {}

    def _bookie(self, index: int, port: int = 0) -> ServerProcess:
        name = f"bookie-{index}"
        process = bookie_process(
            self.root,
            self.metadata_url_of(name),
            port=port,
            journals=[(self.journal_root or self.root) / name / "journal"],
            ledgers=[(self.ledger_root or self.root) / name / "ledgers"],
            settings={**self.bookie_settings, **self.settings_of(name)},
            defaults=CLUSTER_BOOKIE_DEFAULTS,
            name=name,
        )
        process.env.update(self.bookie_env.get(index, {}))
        return process

    def _broker(self, index: int = 0, port: int = 0, http_port: int = 0) -> ServerProcess:
        q = self._quorum()
        extra = set_flags({**self.broker_settings, **self.settings_of(f"broker-{index}")})
        return ServerProcess(
            "broker",
            [
                "--port",
                str(port),
                "--http-port",
                str(http_port),
                "--metadata-url",
                self.metadata_url_of(f"broker-{index}"),
                "--set",
                f"managedLedgerDefaultEnsembleSize={q}",
                "--set",
                f"managedLedgerDefaultWriteQuorum={q}",
                "--set",
                f"managedLedgerDefaultAckQuorum={q}",
                "--set",
                "metadataStoreSessionTimeoutMillis=2000",
                *extra,
            ],
            self.root / "logs" / ("broker.log" if index == 0 else f"broker-{index}.log"),
        )

    async def start(self) -> None:
        self._make()
        if self.metastore is not None:
            await asyncio.to_thread(self.metastore.start)
        for index in range(self.bookie_count):
            bookie = self._bookie(index)
            self.bookies.append(bookie)
            await asyncio.to_thread(bookie.start)
        for index in range(self.broker_count):
            self.brokers.append(self._broker(index))
        # in parallel: each takes a few seconds to import and connect
        await asyncio.gather(*(asyncio.to_thread(b.start) for b in self.brokers))

    async def add_bookie(self) -> ServerProcess:
        """Start one more bookie (index ``len(bookies)``; its :attr:`bookie_env` applies)."""
        bookie = self._bookie(len(self.bookies))
        self.bookies.append(bookie)
        await asyncio.to_thread(bookie.start)
        self.bookie_count = len(self.bookies)
        return bookie

    async def restart_bookie(self, index: int) -> None:
        """Restart bookie ``index`` on its port and dirs (its bookie id must not change)."""
        old = self.bookies[index]
        await asyncio.to_thread(old.stop)
        self.bookies[index] = self._bookie(index, old.port)
        await asyncio.to_thread(self.bookies[index].start)

    async def kill_bookie(self, index: int) -> None:
        """SIGKILL bookie ``index`` (no clean shutdown; start it again with :meth:`start_bookie`)."""
        await asyncio.to_thread(self.bookies[index].kill)

    async def start_bookie(self, index: int) -> None:
        """Start bookie ``index`` again on its port and dirs (after :meth:`kill_bookie`)."""
        self.bookies[index] = self._bookie(index, self.bookies[index].port)
        await asyncio.to_thread(self.bookies[index].start)

    async def restart_broker(self, *, kill: bool = False, index: int = 0, same_ports: bool = False) -> None:
        """Stop (or SIGKILL) broker ``index`` and start a new one, on new ports unless ``same_ports``."""
        old = self.brokers[index]
        await asyncio.to_thread(old.kill if kill else old.stop)
        await self.start_broker(index, same_ports=same_ports)

    async def kill_broker(self, index: int) -> None:
        """SIGKILL broker ``index`` (no clean shutdown: its bundles move once its session expires)."""
        await asyncio.to_thread(self.brokers[index].kill)

    async def stop_broker(self, index: int) -> None:
        """SIGTERM broker ``index`` (a clean shutdown unloads its bundles first)."""
        await asyncio.to_thread(self.brokers[index].stop)

    async def start_broker(self, index: int, *, same_ports: bool = False) -> None:
        """Start broker ``index`` again (after kill_broker / stop_broker)."""
        old = self.brokers[index]
        ports = (old.port, old.http_port) if same_ports else (0, 0)
        self.brokers[index] = self._broker(index, *ports)
        await asyncio.to_thread(self.brokers[index].start)

    def processes(self) -> list[ServerProcess]:
        return [p for p in (*reversed(self.brokers), *reversed(self.bookies), self.metastore) if p is not None]

    async def stop(self) -> None:
        if len(self.brokers) > 1:  # together: one at a time, each would unload to the next
            await asyncio.gather(*(asyncio.to_thread(b.stop) for b in self.brokers))
        for process in self.processes():
            await asyncio.to_thread(process.stop)

    def log_tails(self) -> str:
        return "\n".join(p.log_tail() for p in self.processes())


C = TypeVar("C", bound=ProcessCluster)


@contextlib.asynccontextmanager
async def cluster_running(cluster: C) -> AsyncIterator[C]:
    """``cluster`` started, and stopped when the context exits whatever happened inside; every
    process's log tail is printed when start-up or the body fails."""
    try:
        await cluster.start()
        yield cluster
    except BaseException:
        print(cluster.log_tails())
        raise
    finally:
        await cluster.stop()


@contextlib.asynccontextmanager
async def make_cluster(
    root: Path,
    *,
    bookies: int = 1,
    brokers: int = 1,
    broker_settings: Mapping[str, object] | None = None,
    bookie_settings: Mapping[str, object] | None = None,
    journal_root: Path | None = None,
    ledger_root: Path | None = None,
    bookie_env: Mapping[int, dict[str, str]] | None = None,
    zookeeper: ZooKeeperEnsemble | None = None,
    zookeeper_nodes: int = 0,
) -> AsyncIterator[ProcessCluster]:
    """A started cluster under ``root``, stopped when the context exits.

    Args:
        bookies, brokers: how many of each (brokers may be 0: a metastore and bookies only).
        broker_settings, bookie_settings, journal_root, ledger_root, bookie_env, zookeeper: see
            :class:`ProcessCluster`.
        zookeeper_nodes: without ``zookeeper``, run on an ensemble of this many nodes started
            (under ``root/zookeeper``) and stopped with the cluster; the test is skipped, with
            the reason, where ZooKeeper cannot run.
    """
    if zookeeper is None and zookeeper_nodes:
        skip_unless_zookeeper()
        ensemble = ZooKeeperEnsemble(root / "zookeeper", zookeeper_nodes)
        await asyncio.to_thread(ensemble.start)
        try:
            async with make_cluster(
                root,
                bookies=bookies,
                brokers=brokers,
                broker_settings=broker_settings,
                bookie_settings=bookie_settings,
                journal_root=journal_root,
                ledger_root=ledger_root,
                bookie_env=bookie_env,
                zookeeper=ensemble,
            ) as cluster:
                yield cluster
        finally:
            await asyncio.to_thread(ensemble.stop)
        return
    cluster = ProcessCluster(
        root,
        bookies,
        dict(broker_settings or {}),
        broker_count=brokers,
        bookie_settings=dict(bookie_settings or {}),
        journal_root=journal_root,
        ledger_root=ledger_root,
        bookie_env=dict(bookie_env or {}),
        zookeeper=zookeeper,
    )
    async with cluster_running(cluster):
        yield cluster
