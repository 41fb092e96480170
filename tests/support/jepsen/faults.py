"""Fault kinds: one small class each, found by name in :data:`FAULT_KINDS`.

A fault kind says which processes it can hit (:meth:`FaultKind.targets`), what it does to one
(:meth:`FaultKind.begin`) and how that ends (:meth:`FaultKind.end`); the nemesis does the
choosing and timing. ``downs`` says what the fault takes away while it lasts — ``serve`` (the
process answers nothing: killed, paused, cut off) or ``write`` (a bookie that still serves
reads but takes no adds: a full disk) — which is what a profile's limits count. A kind that
needs something missing here (root, a loop device, blkio) says why in :meth:`missing`, and the
harness leaves it out, saying so. Adding a kind (EIO through an LD_PRELOAD shim, a power cut
through a FUSE filesystem) is one more class and one more entry in :data:`FAULT_KINDS`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import ClassVar

from tests.support.jepsen.cluster import JepsenCluster
from tests.support.jepsen.disks import BlkioThrottle, blkio_missing, loop_disks_missing

__all__ = ["FAULT_KINDS", "FaultKind", "missing_kinds"]

SLOW_DISK_BYTES_PER_S = 256 * 1024


class FaultKind:
    name: ClassVar[str]
    downs: ClassVar[str] = "serve"
    """``serve``, ``write`` or ``none``: what the target loses while the fault lasts."""

    def missing(self) -> str | None:
        """Why this kind cannot run here, or None."""
        return None

    def targets(self, cluster: JepsenCluster) -> list[str]:
        return [name for name in cluster.names() if name != "metastore"]

    async def begin(self, cluster: JepsenCluster, target: str) -> None:
        raise NotImplementedError

    async def end(self, cluster: JepsenCluster, target: str) -> None:
        raise NotImplementedError


class Kill(FaultKind):
    """SIGKILL; the process starts again (on its ports, with its dirs) when the fault ends."""

    name = "kill"

    async def begin(self, cluster: JepsenCluster, target: str) -> None:
        await asyncio.to_thread(cluster.names()[target].kill)

    async def end(self, cluster: JepsenCluster, target: str) -> None:
        await cluster.start_process(target)


class Pause(FaultKind):
    """SIGSTOP, then SIGCONT: the process's sessions may expire and its peers time out."""

    name = "pause"

    async def begin(self, cluster: JepsenCluster, target: str) -> None:
        cluster.names()[target].pause()

    async def end(self, cluster: JepsenCluster, target: str) -> None:
        cluster.names()[target].resume()


class MetastoreRestart(Kill):
    """The metastore SIGKILLed and started again on its port and data dir."""

    name = "metastore-restart"
    downs = "none"  # every process waits for it; no bookie or broker is down

    def targets(self, cluster: JepsenCluster) -> list[str]:
        return ["metastore"]


class Partition(FaultKind):
    """The process cut off from everyone: its ports' proxies and its metastore link are cut
    (it still reaches bookies itself: a broker cut off may go on writing, a split brain's
    setting)."""

    name = "partition"

    async def begin(self, cluster: JepsenCluster, target: str) -> None:
        for proxy in [*cluster.inbound[target], cluster.metadata_links[target]]:
            proxy.cut()

    async def end(self, cluster: JepsenCluster, target: str) -> None:
        for proxy in [*cluster.inbound[target], cluster.metadata_links[target]]:
            proxy.heal()


class DiskFull(FaultKind):
    """A bookie's loop-mounted ledger disk filled to its last 8 MB of 256 (it turns read-only
    past ``diskUsageThreshold``); emptied again when the fault ends."""

    name = "disk-full"
    downs = "write"

    def missing(self) -> str | None:
        return loop_disks_missing()

    def targets(self, cluster: JepsenCluster) -> list[str]:
        return list(cluster.disks)

    async def begin(self, cluster: JepsenCluster, target: str) -> None:
        await asyncio.to_thread(cluster.disks[target].fill)

    async def end(self, cluster: JepsenCluster, target: str) -> None:
        await asyncio.to_thread(cluster.disks[target].drain)


class SlowDisk(FaultKind):
    """A bookie's reads and writes of its loop-mounted ledger disk throttled to
    :data:`SLOW_DISK_BYTES_PER_S` (cgroup v1 blkio)."""

    name = "slow-disk"
    downs = "none"

    def __init__(self) -> None:
        self._throttles: dict[str, BlkioThrottle] = {}

    def missing(self) -> str | None:
        return loop_disks_missing() or blkio_missing()

    def targets(self, cluster: JepsenCluster) -> list[str]:
        return list(cluster.disks)

    async def begin(self, cluster: JepsenCluster, target: str) -> None:
        process = cluster.names()[target]
        assert process.proc is not None
        name = f"minipulsar-nemesis-{process.proc.pid}"
        throttle = BlkioThrottle(name, cluster.disks[target].major_minor, SLOW_DISK_BYTES_PER_S)
        self._throttles[target] = throttle
        throttle.apply(process.proc.pid)

    async def end(self, cluster: JepsenCluster, target: str) -> None:
        if (throttle := self._throttles.pop(target, None)) is not None:
            throttle.release()


FAULT_KINDS: dict[str, type[FaultKind]] = {
    kind.name: kind for kind in (Kill, Pause, MetastoreRestart, Partition, DiskFull, SlowDisk)
}


def missing_kinds(names: Iterable[str]) -> dict[str, str]:
    """Of the kinds ``names``, those that cannot run here, with why."""
    return {name: why for name in names if (why := FAULT_KINDS[name]().missing()) is not None}
