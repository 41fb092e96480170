"""A real multi-process cluster for tests: one metastore, N bookies, one broker.

Each server is a separate ``minipulsar`` process on 127.0.0.1 with port 0, its own dirs under
the test's tmp dir, and a log file whose tail is shown when start-up fails. The cluster is
stopped (TERM, then KILL) when the context exits, whatever happened inside.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.process import ServerProcess


@dataclass
class ProcessCluster:
    root: Path
    bookie_count: int = 1
    broker_settings: dict[str, object] = field(default_factory=dict)
    """Extra broker.conf keys (``--set key=value``), e.g. ``{"brokerDeduplicationEnabled": True}``."""
    metastore: ServerProcess | None = None
    bookies: list[ServerProcess] = field(default_factory=list)
    broker: ServerProcess | None = None

    @property
    def service_url(self) -> str:
        assert self.broker is not None
        return f"pulsar://{self.broker.address}"

    @property
    def metadata_url(self) -> str:
        assert self.metastore is not None
        return f"metastore://{self.metastore.address}"

    def _quorum(self) -> int:
        return 1 if self.bookie_count == 1 else 2

    def _make(self) -> None:
        logs = self.root / "logs"
        self.metastore = ServerProcess("metastore", ["--port", "0", "--data-dir", str(self.root / "metastore")],
                                       logs / "metastore.log")

    def _bookie(self, index: int, port: int = 0) -> ServerProcess:
        base = self.root / f"bookie-{index}"
        return ServerProcess("bookie", [
            "--port", str(port), "--http-port", "0", "--journal-dir", str(base / "journal"),
            "--ledger-dirs", str(base / "ledgers"), "--metadata-url", self.metadata_url,
            "--set", "zkTimeout=2000",
        ], self.root / "logs" / f"bookie-{index}.log")

    def _broker(self) -> ServerProcess:
        q = self._quorum()
        extra = [arg for key, value in self.broker_settings.items()
                 for arg in ("--set", f"{key}={str(value).lower() if isinstance(value, bool) else value}")]
        return ServerProcess("broker", [
            "--port", "0", "--http-port", "0", "--metadata-url", self.metadata_url,
            "--set", f"managedLedgerDefaultEnsembleSize={q}", "--set", f"managedLedgerDefaultWriteQuorum={q}",
            "--set", f"managedLedgerDefaultAckQuorum={q}", "--set", "metadataStoreSessionTimeoutMillis=2000",
            *extra,
        ], self.root / "logs" / "broker.log")

    async def start(self) -> None:
        self._make()
        assert self.metastore is not None
        await asyncio.to_thread(self.metastore.start)
        for index in range(self.bookie_count):
            bookie = self._bookie(index)
            self.bookies.append(bookie)
            await asyncio.to_thread(bookie.start)
        self.broker = self._broker()
        await asyncio.to_thread(self.broker.start)

    async def restart_bookie(self, index: int) -> None:
        """Restart bookie ``index`` on its port and dirs (its bookie id must not change)."""
        old = self.bookies[index]
        await asyncio.to_thread(old.stop)
        self.bookies[index] = self._bookie(index, old.port)
        await asyncio.to_thread(self.bookies[index].start)

    async def restart_broker(self, *, kill: bool = False) -> None:
        assert self.broker is not None
        await asyncio.to_thread(self.broker.kill if kill else self.broker.stop)
        self.broker = self._broker()
        await asyncio.to_thread(self.broker.start)

    def processes(self) -> list[ServerProcess]:
        return [p for p in (self.broker, *reversed(self.bookies), self.metastore) if p is not None]

    async def stop(self) -> None:
        for process in self.processes():
            await asyncio.to_thread(process.stop)

    def log_tails(self) -> str:
        return "\n".join(p.log_tail() for p in self.processes())


@contextlib.asynccontextmanager
async def process_cluster(root: Path, bookies: int = 1,
                          broker_settings: dict[str, object] | None = None) -> AsyncIterator[ProcessCluster]:
    cluster = ProcessCluster(root, bookies, dict(broker_settings or {}))
    try:
        await cluster.start()
        yield cluster
    except BaseException:
        print(cluster.log_tails())
        raise
    finally:
        await cluster.stop()
