"""A lab scenario: one finding of a tuning report, run live as baseline vs tuned.

A scenario module defines one :class:`Scenario`; :mod:`minipulsar.lab.catalog` lists them.
Its ``run`` coroutine gets a :class:`LabContext` and returns the :class:`~minipulsar.lab.result.ScenarioResult`'s
measured parts (:class:`Measured`); the runner (:mod:`minipulsar.lab.runner`) adds the
scenario's description, the disk label, timing, and writes the report.

Invariants a scenario keeps:

- it starts every process it uses (:func:`minipulsar.lab.cluster.lab_cluster`, under
  ``ctx.work_dir``) and stops them before ``run`` returns, on success and on failure;
- its workload is seeded from ``ctx.seed`` (rates, keys, which topic is hot), and so are its
  brokers' random draws (placement, quarantine: :meth:`LabContext.cluster`), so two runs with
  one seed do the same thing; the timing they measure, and so the order of the draws, still
  varies with the machine;
- its length comes from ``ctx.profile`` (:meth:`Profile.pick`): ``--quick`` fits in a couple of
  minutes on 2 cores, the full profile is what the gallery shows;
- it reports progress through ``ctx.progress`` and never prints.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from minipulsar.lab.cluster import BookieSpec, LabCluster, lab_cluster
from minipulsar.lab.disk_api import DiskProvider, DiskSet
from minipulsar.lab.progress import Progress
from minipulsar.lab.result import Chart, Guard, Headline

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    """``quick`` or ``full``."""

    @property
    def quick(self) -> bool:
        return self.name == "quick"

    def pick(self, quick: T, full: T) -> T:
        return quick if self.quick else full


QUICK, FULL = Profile("quick"), Profile("full")


@dataclass
class LabContext:
    """What a scenario gets: where to work, how long, which seed, which disks, where to report."""

    work_dir: Path
    profile: Profile
    seed: int
    disks: DiskProvider
    """How to make the scenario's disks (emulated, simulated or the user's mounts)."""
    progress: Progress

    def rng(self, purpose: str) -> random.Random:
        """A generator seeded by the run's seed and ``purpose`` (independent streams per use)."""
        return random.Random(f"{self.seed}:{purpose}")

    def variant_dir(self, variant: str) -> Path:
        path = self.work_dir / variant
        path.mkdir(parents=True, exist_ok=True)
        return path

    def disk_set(
        self, variant: str, write_mb_s: float | None = None, write_iops: int | None = None
    ) -> contextlib.AbstractAsyncContextManager[DiskSet]:
        """A fresh set of disks for ``variant`` (an async context manager: they are removed after)."""
        return self.disks.disk_set(self.variant_dir(variant) / "disks", variant, write_mb_s, write_iops)

    def cluster(
        self,
        variant: str,
        bookies: Sequence[BookieSpec],
        brokers: Sequence[Mapping[str, object]],
        ensemble: tuple[int, int, int] = (2, 2, 2),
    ) -> contextlib.AbstractAsyncContextManager[LabCluster]:
        """``variant``'s cluster (:func:`~minipulsar.lab.cluster.lab_cluster`) under its work dir,
        its brokers' random draws seeded from the run's seed."""
        return lab_cluster(self.variant_dir(variant), bookies, brokers, ensemble, seed=self.seed)


@dataclass
class Measured:
    """What ``run`` returns: the figures, the charts, and anything a reader should know."""

    headlines: list[Headline]
    charts: list[Chart]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    source: str
    """The report and section this reproduces (``BIGO part 1: broker flow control``)."""
    finding: str
    """The report's finding, one sentence."""
    baseline: str
    """What the baseline run sets (``preciseDispatcherFlowControl=false``)."""
    tuned: str
    guard: Guard
    run: Callable[[LabContext], Awaitable[Measured]]
    summary_chart: str = ""
    """The chart the README's gallery shows (a :attr:`Chart.name`); empty: the first."""
