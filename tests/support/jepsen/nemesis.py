"""The nemesis: a seeded schedule of faults within a profile's limits.

Every ``gap_s`` (drawn from the seed) it may begin one fault: a kind drawn by weight (among
the kinds not used yet, until each was: a short run meets them all), a target drawn among
that kind's targets that no other fault is hitting and whose loss keeps within the profile's
limits; each fault ends ``fault_s`` later. :meth:`Nemesis.heal` ends every fault
still on (a run ends healed). The same seed makes the same choices; the times at which they
land depend on the machine. Every begin and end goes to the history's fault log.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field

from tests.support.jepsen.cluster import JepsenCluster
from tests.support.jepsen.faults import FAULT_KINDS, FaultKind
from tests.support.jepsen.history import History
from tests.support.jepsen.profiles import Profile

__all__ = ["ActiveFault", "Nemesis"]


@dataclass
class ActiveFault:
    kind: FaultKind
    target: str
    ends_at_s: float


@dataclass
class Nemesis:
    cluster: JepsenCluster
    profile: Profile
    seed: int
    history: History
    kinds: dict[str, FaultKind] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    """Kind → why it cannot run here."""
    counts: Counter[str] = field(default_factory=Counter)
    active: list[ActiveFault] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.random = random.Random(self.seed)
        for name in self.profile.kinds:
            kind = FAULT_KINDS[name]()
            if (why := kind.missing()) is not None:
                self.skipped[name] = why
            else:
                self.kinds[name] = kind

    async def run(self, duration_s: float) -> None:
        deadline = time.monotonic() + duration_s
        while time.monotonic() < deadline:
            await asyncio.sleep(self.random.uniform(*self.profile.gap_s))
            await self._end_due()
            if len(self.active) < self.profile.max_faults and time.monotonic() < deadline:
                await self._begin_one()
        await self.heal()

    async def heal(self) -> None:
        while self.active:
            await self._end(self.active[0])

    async def _begin_one(self) -> None:
        names = [n for n in self.kinds if n not in self.counts] or list(self.kinds)  # each kind once first
        name = self.random.choices(names, weights=[self.profile.kinds[n] for n in names])[0]
        kind = self.kinds[name]
        targets = [t for t in kind.targets(self.cluster) if self._allowed(kind, t)]
        if not targets:
            return
        target = self.random.choice(sorted(targets))
        duration_s = self.random.uniform(*self.profile.fault_s)
        self._log(name, f"begin {target}")
        await kind.begin(self.cluster, target)
        self.counts[name] += 1
        self.active.append(ActiveFault(kind, target, time.monotonic() + duration_s))

    async def _end_due(self) -> None:
        now = time.monotonic()
        for fault in [f for f in self.active if f.ends_at_s <= now]:
            await self._end(fault)

    async def _end(self, fault: ActiveFault) -> None:
        self.active.remove(fault)
        self._log(fault.kind.name, f"end {fault.target}")
        await fault.kind.end(self.cluster, fault.target)

    def _allowed(self, kind: FaultKind, target: str) -> bool:
        if any(f.target == target for f in self.active):
            return False
        if "metastore" in {f.target for f in self.active} or (target == "metastore" and self.active):
            return False  # a metastore restart is a fault of its own: nothing overlaps it
        down = [f.target for f in self.active if f.kind.downs != "none"]
        if kind.downs != "none":
            down.append(target)
        bookies = sum(1 for t in down if t.startswith("bookie"))
        brokers = sum(1 for t in down if t.startswith("broker"))
        if bookies > self.profile.max_bookies_down or brokers > self.profile.max_brokers_down:
            return False
        return self.profile.bookie_with_broker or not (bookies and brokers)

    def _log(self, kind: str, what: str) -> None:
        self.history.faults.append((time.monotonic(), kind, what))
