"""The five resource figures of a broker's load report, measured here.

What minipulsar measures, and how it differs from Pulsar's ``LinuxBrokerHostUsageImpl``:

- ``cpu``: CPU time of **this broker process** (user + system, all threads) per wall second,
  in percent of one core; limit = 100 × the CPUs the process may run on. Pulsar measures the
  whole host; several minipulsar brokers often share one host (tests, ``standalone --brokers``),
  and the host figure would then be the same for all of them.
- ``memory``: the process's resident set (MB) against physical memory — the heap stand-in
  (Pulsar reports JVM heap used/max).
- ``directMemory``: bytes in the entry cache plus publishes not yet persisted, against
  ``managedLedgerCacheSizeMB`` + ``maxMessagePublishBufferSizeInMB`` — what a JVM broker keeps
  in direct memory.
- ``bandwidthIn`` / ``bandwidthOut``: the topics' published / dispatched bytes per second
  (their rates, not NIC counters — loopback traffic of co-hosted brokers would be
  indistinguishable), in kbit/s, against ``loadBalancerOverrideBrokerNicSpeedGbps`` or else the
  link speed of the host's physical NICs (``/sys/class/net/*/speed``), or else 1 Gbit/s.

Sampling reads ``/proc``; :meth:`HostUsage.sample` runs it in a thread (never on the loop).

Invariant: every figure is a usage against a limit; a limit of 0 means unknown.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

from minipulsar.broker.loadbalance.resource_usage import ResourceUsage

log = logging.getLogger(__name__)

DEFAULT_NIC_SPEED_GBPS = 1.0
"""When neither the override nor a physical NIC's link speed is known."""
KBITS_PER_GBIT = 1_000_000
MB = 1024 * 1024


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def physical_nic_speed_gbps(sys_class_net: Path = Path("/sys/class/net")) -> float | None:
    """Σ link speed of physical NICs (type 1, not virtual), in Gbit/s; None when unknown.
    Blocking: call from a thread."""
    total_mbps = 0
    try:
        devices = list(sys_class_net.iterdir())
    except OSError:
        return None
    for device in devices:
        try:
            if (device / "type").read_text().strip() != "1" or "virtual" in str(device.resolve()):
                continue
            speed = int((device / "speed").read_text().strip())
        except (OSError, ValueError):  # speed unreadable on a link that is down, or not a NIC
            continue
        if speed > 0:
            total_mbps += speed
    return total_mbps / 1000 if total_mbps else None


def resident_memory_bytes() -> int:
    """RSS of this process from /proc/self/statm (blocking). 0 when unknown."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource  # not Linux: the peak is the best there is

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def physical_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


class HostUsage:
    """CPU and memory sampled every ``loadBalancerHostUsageCheckIntervalMinutes``; bandwidth
    and direct memory computed from the broker's own counters at report time."""

    def __init__(self, nic_speed_gbps: float | None) -> None:
        self._nic_override_gbps = nic_speed_gbps
        self.nic_speed_gbps = nic_speed_gbps or DEFAULT_NIC_SPEED_GBPS
        self.cpu = ResourceUsage(0.0, 100.0 * cpu_count())
        self.memory = ResourceUsage(0.0, physical_memory_bytes() / MB)
        self._last_cpu_s = self._process_cpu_s()
        self._last_wall_s = time.monotonic()

    async def start(self) -> None:
        if self._nic_override_gbps is None:
            detected = await asyncio.to_thread(physical_nic_speed_gbps)
            self.nic_speed_gbps = detected or DEFAULT_NIC_SPEED_GBPS
        await self.sample()

    @staticmethod
    def _process_cpu_s() -> float:
        times = os.times()
        return times.user + times.system

    async def sample(self) -> None:
        """Refresh CPU (since the previous sample) and memory."""
        rss = await asyncio.to_thread(resident_memory_bytes)
        now_cpu, now_wall = self._process_cpu_s(), time.monotonic()
        elapsed = now_wall - self._last_wall_s
        if elapsed > 0:
            self.cpu = ResourceUsage(100.0 * (now_cpu - self._last_cpu_s) / elapsed, self.cpu.limit)
        self._last_cpu_s, self._last_wall_s = now_cpu, now_wall
        self.memory = ResourceUsage(rss / MB, self.memory.limit)

    def bandwidth(self, bytes_per_s: float) -> ResourceUsage:
        """``bytes_per_s`` as kbit/s against the NIC capacity."""
        return ResourceUsage(bytes_per_s * 8 / 1000, self.nic_speed_gbps * KBITS_PER_GBIT)

    @staticmethod
    def direct_memory(used_bytes: int, limit_bytes: int) -> ResourceUsage:
        return ResourceUsage(used_bytes / MB, max(limit_bytes, 0) / MB)
