"""The harness's cluster: :class:`~tests.support.cluster.ProcessCluster` with a
:class:`~.proxy.FaultProxy` on every path a partition cuts, and loop-mounted ledger disks.

Addresses (all on the loopback interface):

- every server binds 127.0.0.1 and advertises :data:`ADVERTISED_HOST` (127.0.0.2) on the
  same port; a proxy listens on ``127.0.0.2:port`` and forwards to ``127.0.0.1:port``. A
  bookie's id (``advertisedAddress:bookiePort``) and a broker's service and web URLs therefore
  lead through its proxy, for every client, broker and bookie alike;
- every bookie and broker reaches the metastore through a proxy of its own (its metadata URL
  names it), so a partition can take a process's metadata session away too;
- a killed process restarts on its ports (a bookie keeps its id); the proxies stay up.

``disk_bookies`` bookies keep their ledger dir on a small :class:`~.disks.LoopDisk` mounted
before they start (needs root: see :func:`~.disks.loop_disks_missing`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from tests.support.cluster import ProcessCluster
from tests.support.jepsen.disks import LoopDisk
from tests.support.jepsen.proxy import FaultProxy
from tests.support.process import ServerProcess

__all__ = ["ADVERTISED_HOST", "BIND_HOST", "JepsenCluster"]

BIND_HOST = "127.0.0.1"
ADVERTISED_HOST = "127.0.0.2"
LOOP_DISK_MB = 256


@dataclass
class JepsenCluster(ProcessCluster):
    disk_bookies: tuple[int, ...] = ()
    """Bookies whose ledger dir is a loop-mounted disk (the disk faults' targets)."""
    inbound: dict[str, list[FaultProxy]] = field(default_factory=dict)
    """Process name → the proxies in front of its ports."""
    metadata_links: dict[str, FaultProxy] = field(default_factory=dict)
    """Process name → the proxy it reaches the metastore through."""
    disks: dict[str, LoopDisk] = field(default_factory=dict)

    def metadata_url_of(self, name: str) -> str:
        return f"metastore://{BIND_HOST}:{self.metadata_links[name].listen[1]}"

    def settings_of(self, name: str) -> dict[str, object]:
        return {"bindAddress": BIND_HOST, "advertisedAddress": ADVERTISED_HOST}

    @property
    def service_url(self) -> str:
        return "pulsar://" + ",".join(f"{ADVERTISED_HOST}:{b.port}" for b in self.brokers)

    def names(self) -> dict[str, ServerProcess]:
        """Every server by name: ``metastore``, ``bookie-i``, ``broker-i``."""
        assert self.metastore is not None
        named = {"metastore": self.metastore}
        named |= {f"bookie-{i}": b for i, b in enumerate(self.bookies)}
        named |= {f"broker-{i}": b for i, b in enumerate(self.brokers)}
        return named

    async def _link(self, name: str) -> None:
        assert self.metastore is not None
        if name not in self.metadata_links:
            proxy = FaultProxy((BIND_HOST, 0), (BIND_HOST, self.metastore.port))
            self.metadata_links[name] = await proxy.start()

    async def _front(self, name: str, process: ServerProcess) -> None:
        if name in self.inbound:
            return
        ports = [process.port] + ([process.http_port] if name.startswith("broker") else [])
        self.inbound[name] = [await FaultProxy((ADVERTISED_HOST, p), (BIND_HOST, p)).start() for p in ports]

    async def start(self) -> None:
        self._make()
        assert self.metastore is not None
        await asyncio.to_thread(self.metastore.start)
        for index in self.disk_bookies:
            name = f"bookie-{index}"
            disk = LoopDisk(self.root / "disks" / f"{name}.img", self.root / name / "ledgers", LOOP_DISK_MB)
            self.disks[name] = await asyncio.to_thread(disk.mount)
        for index in range(self.bookie_count):
            await self._link(f"bookie-{index}")
            bookie = self._bookie(index)
            self.bookies.append(bookie)
            await asyncio.to_thread(bookie.start)
            await self._front(f"bookie-{index}", bookie)
        for index in range(self.broker_count):
            await self._link(f"broker-{index}")
            self.brokers.append(self._broker(index))
        await asyncio.gather(*(asyncio.to_thread(b.start) for b in self.brokers))
        for index, broker in enumerate(self.brokers):
            await self._front(f"broker-{index}", broker)

    async def start_process(self, name: str) -> None:
        """Start ``name`` again after a kill, on its ports."""
        role, _, index = name.partition("-")
        if role == "metastore":
            assert self.metastore is not None
            await asyncio.to_thread(self.metastore.start_on_same_port)
        elif role == "bookie":
            old = self.bookies[int(index)]
            self.bookies[int(index)] = self._bookie(int(index), old.port)
            await asyncio.to_thread(self.bookies[int(index)].start)
        else:
            await self.start_broker(int(index), same_ports=True)

    async def stop(self) -> None:
        for proxy in [*self.metadata_links.values(), *(p for ps in self.inbound.values() for p in ps)]:
            proxy.heal()
        for process in self.processes():
            if process.running:
                await asyncio.to_thread(process.resume)
        await super().stop()
        for proxy in [*self.metadata_links.values(), *(p for ps in self.inbound.values() for p in ps)]:
            await proxy.close()
        for disk in self.disks.values():
            await asyncio.to_thread(disk.unmount)
