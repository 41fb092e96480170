"""One run of the harness: a cluster for a profile, the workload under the nemesis for a
while, everything healed, the log read back, the history checked; and the run's table.

The run ends with the cluster healed (every fault ended, every process running) before the
read, so a message that is merely unavailable during a fault is not counted lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.cluster import cluster_running
from tests.support.jepsen.checker import VIOLATION_KINDS, CheckReport, check
from tests.support.jepsen.cluster import JepsenCluster
from tests.support.jepsen.disks import loop_disks_missing
from tests.support.jepsen.history import History
from tests.support.jepsen.nemesis import Nemesis
from tests.support.jepsen.profiles import Profile
from tests.support.jepsen.workload import Workload, read_back

__all__ = ["RunResult", "jepsen_cluster", "run_once"]

BROKER_SETTINGS: dict[str, object] = {
    "brokerDeduplicationEnabled": True,
    "managedLedgerMaxEntriesPerLedger": 500,  # ledgers roll during a run
    "managedLedgerMinLedgerRolloverTimeMinutes": 0,
    "bookkeeperClientTimeoutInSeconds": 10,
}
BOOKIE_SETTINGS: dict[str, object] = {"diskCheckInterval": 1000, "journalPreAllocSizeMB": 1}


@dataclass
class RunResult:
    profile: Profile
    seed: int
    duration_s: float
    history: History
    report: CheckReport
    faults: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.report.ok

    def table(self) -> str:
        counts = self.report.counts
        rows = [
            ("profile", self.profile.name),
            ("seed", str(self.seed)),
            ("nemesis time (s)", f"{self.duration_s:.0f}"),
        ]
        rows += [(f"faults: {kind}", str(n)) for kind, n in sorted(self.faults.items())]
        rows += [(f"skipped: {kind}", why) for kind, why in sorted(self.skipped.items())]
        rows += [(f"messages {name}", str(counts[name])) for name in ("acked", "failed", "unknown", "unknown_stored")]
        rows += [("messages consumed", str(counts["consumed"]))]
        rows += [(kind.replace("_", " "), str(counts[kind])) for kind in VIOLATION_KINDS]
        rows += [
            ("result", "OK" if self.ok else f"{self.report.violations} VIOLATIONS"),
            ("wall time (s)", f"{self.elapsed_s:.0f}"),
        ]
        width = max(len(name) for name, _ in rows)
        lines = [f"{name:<{width}}  {value}" for name, value in rows]
        if not self.ok:
            lines += ["", self.report.describe()]
        return "\n".join(lines)


@contextlib.asynccontextmanager
async def jepsen_cluster(
    root: Path, profile: Profile, *, with_disks: bool, broker_settings: Mapping[str, object] | None = None
) -> AsyncIterator[JepsenCluster]:
    """A started :class:`JepsenCluster` for ``profile``, stopped (healed first) on exit;
    ``broker_settings`` over :data:`BROKER_SETTINGS`."""
    e, qw, qa = profile.quorum
    cluster = JepsenCluster(
        root,
        profile.bookies,
        {
            **BROKER_SETTINGS,
            "managedLedgerDefaultEnsembleSize": e,
            "managedLedgerDefaultWriteQuorum": qw,
            "managedLedgerDefaultAckQuorum": qa,
            **(broker_settings or {}),
        },
        broker_count=profile.brokers,
        bookie_settings=dict(BOOKIE_SETTINGS),
        disk_bookies=profile.disk_bookies if with_disks else (),
    )
    async with cluster_running(cluster):
        yield cluster


async def run_once(
    root: Path,
    profile: Profile,
    seed: int,
    duration_s: float,
    *,
    broker_settings: Mapping[str, object] | None = None,
    **workload: object,
) -> RunResult:
    started = time.monotonic()
    history = History()
    disk_kinds = {"disk-full", "slow-disk"} & set(profile.kinds)
    with_disks = bool(disk_kinds) and loop_disks_missing() is None
    async with jepsen_cluster(root, profile, with_disks=with_disks, broker_settings=broker_settings) as cluster:
        nemesis = Nemesis(cluster, profile, seed, history)
        load = Workload(cluster.service_url, history, seed, **workload)  # type: ignore[arg-type]
        await load.subscribe()
        stop = asyncio.Event()
        producing = asyncio.ensure_future(load.run(stop))
        try:
            await nemesis.run(duration_s)
        finally:
            await nemesis.heal()
            stop.set()
            await producing
        await read_back(cluster.service_url, history, load.topic_names())
    result = RunResult(profile, seed, duration_s, history, check(history), dict(nemesis.counts), nemesis.skipped)
    result.elapsed_s = time.monotonic() - started
    return result
