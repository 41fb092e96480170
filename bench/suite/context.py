"""What every scenario gets: the profile, the cluster recipe, the probes, progress lines, and
:meth:`Context.measure` — one run with the device flushes and server memory seen during it."""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.suite.cluster import BenchCluster, ClusterSpec, bench_cluster
from bench.suite.diskstats import FlushWindow
from bench.suite.profiles import Profile


def progress(text: str) -> None:
    """One progress line on stderr, time-stamped (a long run shows it is alive)."""
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


@dataclass
class Context:
    profile: Profile
    cluster_spec: ClusterSpec
    run_dir: Path
    probes: dict[str, Any] = field(default_factory=dict)
    scenario: str = ""
    label: str = ""
    """``[2/5 latency]``: prefixed to every progress line of the scenario."""

    def emit(self, text: str) -> None:
        progress(f"{self.label} {text}")

    @contextlib.asynccontextmanager
    async def cluster(self, **overrides: Any) -> AsyncIterator[BenchCluster]:
        """A fresh cluster for this scenario (``overrides``: :class:`ClusterSpec` fields)."""
        spec = replace(self.cluster_spec, **overrides)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"bench-{self.scenario}-") as root:
            async with bench_cluster(spec, Path(root)) as cluster:
                self.emit(
                    f"cluster up in {time.monotonic() - started:.1f} s: {spec.bookies} bookies, "
                    f"E/Qw/Qa {'/'.join(map(str, spec.quorum))}, journal sync "
                    f"{'on' if spec.journal_sync else 'off'}"
                    f"{', ' + spec.disk_model + ' (SIMULATED)' if spec.disk_model else ''}"
                )
                yield cluster

    async def measure(self, cluster: BenchCluster, run: Awaitable[dict[str, Any]]) -> dict[str, Any]:
        """Await ``run`` (a perf_adapter call) and add the journal and ledger devices' flushes/s
        during it and the servers' memory after it."""
        journal = FlushWindow(cluster.journal_root).start()
        ledgers = FlushWindow(cluster.ledger_root).start()
        figures = await run
        journal_flushes, ledger_flushes = journal.stop(), ledgers.stop()
        figures["journal_device"] = journal_flushes["device"]
        figures["journal_device_flushes_per_s"] = journal_flushes["device_flushes_per_s"]
        if ledger_flushes["device"] != journal_flushes["device"]:
            figures["ledger_device"] = ledger_flushes["device"]
            figures["ledger_device_flushes_per_s"] = ledger_flushes["device_flushes_per_s"]
        figures["memory"] = cluster.memory_mb()
        lat = figures.get("latency") or {}
        self.emit(
            f"  -> {figures.get('msg_per_s', 0):,.0f} msg/s, {figures.get('mb_per_s', 0):,.1f} MB/s, "
            f"p99 {_ms(lat.get('p99_ms'))} ms, {figures.get('failures', 0)} failed, "
            f"{_num(figures['journal_device_flushes_per_s'])} device flushes/s"
        )
        return figures


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"
