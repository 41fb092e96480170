"""Which disks a lab run uses: the user's mounts, emulated HDDs, or the in-process model.

``auto`` takes EMULATED-HDD where this machine allows it (root, cgroup v1 blkio, losetup)
and otherwise falls back to SIMULATED-HDD, saying why; ``--journal-dir``/``--ledger-dir``
make it REAL. The label names the choice in every report and chart.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from minipulsar.errors import ConfigError
from minipulsar.lab.disk_api import DiskProvider
from minipulsar.lab.emulated_disks import EmulatedDisks, unavailable_reason
from minipulsar.lab.plain_disks import RealDisks
from minipulsar.lab.simulated_disks import SimulatedDisks


@dataclass(frozen=True)
class DiskChoice:
    provider: DiskProvider
    label: str


def choose_disks(mode: str, journal_dir: Path | None, ledger_dir: Path | None) -> DiskChoice:
    """REAL with both mounts; else ``mode``: ``emulated``, ``simulated`` or ``auto``.

    Raises:
        ConfigError: ``emulated`` where it cannot run (the message says why).
    """
    if journal_dir is not None and ledger_dir is not None:
        real = RealDisks(journal_dir, ledger_dir)
        return DiskChoice(real, real.label)
    reason = unavailable_reason() if mode in ("auto", "emulated") else "asked for"
    if reason is None:
        emulated = EmulatedDisks()
        return DiskChoice(emulated, emulated.label)
    if mode == "emulated":
        raise ConfigError(f"--disks emulated: cannot emulate HDDs here: {reason}")
    simulated = SimulatedDisks()
    label = simulated.label if mode == "simulated" else f"{simulated.label}; EMULATED-HDD unavailable: {reason}"
    return DiskChoice(simulated, label)
