"""The suite's cluster: the test suite's ``make_cluster`` (a metastore, N bookies, one
broker, each a ``python -m minipulsar`` process), with every bookie's journal and ledgers
under the mounts the user names.

Bookie ``i`` journals to ``<journal dir>/minipulsar-bench-<run>/bookie-<i>/journal`` and stores
ledgers in ``<ledger dir>/minipulsar-bench-<run>/bookie-<i>/ledgers``; those sub-dirs are
created fresh and removed when the cluster stops (unless ``keep``), the user's dirs are left
as they were. Quorums: E/Qw/Qa = 2/2/2 whenever there is more than one bookie (the cluster
helper's rule), journal sync as ``journal_sync`` says, a SIMULATED disk model when given.
With ``diagnostics`` (the latency scenario), every server records its stall events into one
``minipulsarDiagnosticsFile`` (:attr:`BenchCluster.diagnostics_file`, under the logs root),
for the latency timeline; the other scenarios run without (a 10 ms timer per process).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.cluster import ProcessCluster, make_cluster

DIAGNOSTICS_FILE = "diagnostics.jsonl"
"""Under the cluster's logs root: every server's stall events (minipulsar/diagnostics.py)."""


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    bookies: int = 3
    journal_dir: Path | None = None
    """The mount for every bookie's journal; None: the system temp dir."""
    ledger_dir: Path | None = None
    journal_sync: bool = True
    disk_model: str | None = None
    """``minipulsarSimulatedDiskModel`` for every bookie (SIMULATED; None: the real disk)."""
    bookie_settings: dict[str, Any] = field(default_factory=dict)
    broker_settings: dict[str, Any] = field(default_factory=dict)
    keep: bool = False
    diagnostics: bool = False
    """Servers record stall events (``minipulsarDiagnosticsFile``) for the latency timeline."""

    @property
    def quorum(self) -> tuple[int, int, int]:
        q = 1 if self.bookies == 1 else 2
        return q, q, q

    def describe(self) -> dict[str, Any]:
        e, w, a = self.quorum
        return {
            "bookies": self.bookies,
            "brokers": 1,
            "ensemble": e,
            "write_quorum": w,
            "ack_quorum": a,
            "journal_sync": self.journal_sync,
            "journal_dir": str(self.journal_dir or tempfile.gettempdir()),
            "ledger_dir": str(self.ledger_dir or tempfile.gettempdir()),
            "disk_model": self.disk_model,
            "bookie_settings": self.bookie_settings,
            "broker_settings": self.broker_settings,
        }


@dataclass
class BenchCluster:
    spec: ClusterSpec
    cluster: ProcessCluster
    journal_root: Path
    ledger_root: Path

    @property
    def service_url(self) -> str:
        return self.cluster.service_url

    @property
    def metadata_url(self) -> str:
        return self.cluster.metadata_url

    @property
    def diagnostics_file(self) -> Path:
        """The servers' stall events (``minipulsarDiagnosticsFile``, JSONL, shared by all)."""
        return self.cluster.root / DIAGNOSTICS_FILE

    def pids(self) -> dict[str, int]:
        """``broker``, ``bookie-0`` …, ``metastore``: the pid of each running server."""
        named = {"broker": self.cluster.broker, "metastore": self.cluster.metastore}
        named |= {f"bookie-{i}": bookie for i, bookie in enumerate(self.cluster.bookies)}
        return {name: p.proc.pid for name, p in named.items() if p is not None and p.proc is not None}

    def memory_mb(self) -> dict[str, Any]:
        """Resident and peak-resident MB of the broker and each bookie (/proc/<pid>/status)."""
        pids = self.pids()
        broker = process_memory_mb(pids["broker"])
        bookies = [process_memory_mb(pid) for name, pid in sorted(pids.items()) if name.startswith("bookie-")]
        return {
            "broker_rss_mb": broker["rss_mb"],
            "broker_hwm_mb": broker["hwm_mb"],
            "bookie_rss_mb": [b["rss_mb"] for b in bookies],
            "bookie_hwm_mb": [b["hwm_mb"] for b in bookies],
            "bookie_rss_mb_max": max((b["rss_mb"] or 0 for b in bookies), default=None),
        }


def process_memory_mb(pid: int) -> dict[str, float | None]:
    """``VmRSS`` and ``VmHWM`` of ``pid`` in MB (2^20 bytes); None when the process is gone."""
    values: dict[str, float | None] = {"rss_mb": None, "hwm_mb": None}
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    values["rss_mb" if key == "VmRSS" else "hwm_mb"] = int(rest.split()[0]) / 1024
    except OSError:
        pass
    return values


@contextlib.asynccontextmanager
async def bench_cluster(spec: ClusterSpec, logs_root: Path) -> AsyncIterator[BenchCluster]:
    """Start the cluster (logs and metastore data under ``logs_root``), always stop it, and
    remove the bookies' dirs from the user's mounts unless ``spec.keep``."""
    created: list[Path] = []

    def fresh(parent: Path | None) -> Path:
        if parent is None:
            path = Path(tempfile.mkdtemp(prefix="minipulsar-bench-"))
        else:
            parent.mkdir(parents=True, exist_ok=True)
            path = Path(tempfile.mkdtemp(prefix=f"minipulsar-bench-{os.getpid()}-", dir=parent))
        created.append(path)
        return path

    diagnostics = {"minipulsarDiagnosticsFile": str(logs_root / DIAGNOSTICS_FILE)} if spec.diagnostics else {}
    bookie_settings = {"journalSyncData": spec.journal_sync, **diagnostics, **spec.bookie_settings}
    broker_settings = {**diagnostics, **spec.broker_settings}
    if spec.disk_model:
        bookie_settings["minipulsarSimulatedDiskModel"] = spec.disk_model
    try:
        journal_root = fresh(spec.journal_dir)
        ledger_root = fresh(spec.ledger_dir)
        logs_root.mkdir(parents=True, exist_ok=True)
        async with make_cluster(
            logs_root,
            bookies=spec.bookies,
            broker_settings=broker_settings,
            bookie_settings=bookie_settings,
            journal_root=journal_root,
            ledger_root=ledger_root,
        ) as cluster:
            yield BenchCluster(spec, cluster, journal_root, ledger_root)
    finally:
        if not spec.keep:
            for path in created:
                shutil.rmtree(path, ignore_errors=True)
