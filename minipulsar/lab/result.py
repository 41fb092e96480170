"""What a scenario measured: time series, charts of them, and the headline figures.

A scenario runs a *baseline* variant (the setting as the report found it) and a *tuned* one
(the setting the report recommends) on the same seeded workload; every chart puts both on
the same axes, and each :class:`Headline` compares them on one figure.

Invariants:

- a :class:`Headline` says which direction is better; :attr:`Headline.gain` is how many times
  better the tuned run is on it (> 1: tuned wins), whatever the direction;
- a scenario's finding counts as reproduced when its *guard* headline's gain reaches the
  scenario's stated margin (:attr:`ScenarioResult.reproduced`); that is what CI asserts;
- everything here is plain data and round-trips through JSON (``result.json``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Better = Literal["lower", "higher"]
BASELINE, TUNED = "baseline", "tuned"


@dataclass(slots=True)
class Series:
    """One line of a chart: ``(seconds since the variant's workload started, value)`` points."""

    label: str
    variant: str
    """``baseline`` or ``tuned``: the chart styles them apart (solid vs dashed, or by colour)."""
    points: list[tuple[float, float]] = field(default_factory=list)

    def add(self, at_s: float, value: float | None) -> None:
        if value is not None and math.isfinite(value):
            self.points.append((round(at_s, 3), value))

    def values(self) -> list[float]:
        return [value for _, value in self.points]


@dataclass(slots=True)
class Chart:
    """A PNG (``<name>.png``) of some series over time (or, with ``kind="bar"``, one bar per series: its last value)."""

    name: str
    title: str
    y_label: str
    series: list[Series]
    x_label: str = "time (s)"
    kind: Literal["line", "bar"] = "line"


@dataclass(frozen=True, slots=True)
class Headline:
    """One figure of the scenario, for the baseline and the tuned run."""

    name: str
    unit: str
    baseline: float
    tuned: float
    better: Better
    report_figure: str = ""
    """What the report measured for the same figure, e.g. ``75 → 40 MB/s`` (empty: the report gives none)."""

    @property
    def gain(self) -> float:
        """How many times better the tuned run is (> 1: tuned better); inf when one side is 0."""
        worse, better = (self.baseline, self.tuned) if self.better == "lower" else (self.tuned, self.baseline)
        if better <= 0:
            return math.inf if worse > 0 else 1.0
        return worse / better


@dataclass(frozen=True, slots=True)
class Guard:
    """The qualitative finding CI holds: ``headline``'s gain is at least ``min_gain``."""

    headline: str
    min_gain: float

    def describe(self) -> str:
        return f"tuned beats baseline on {self.headline!r} by at least {self.min_gain:g}x"


@dataclass(slots=True)
class ScenarioResult:
    scenario: str
    title: str
    source: str
    """The report and the figure this reproduces."""
    finding: str
    """The report's finding, in one sentence."""
    disk: str
    """Which disks it ran on: ``EMULATED-HDD …``, ``SIMULATED-HDD …`` or ``REAL …``."""
    profile: str
    seed: int
    variants: dict[str, str]
    """``baseline``/``tuned`` → what each one set."""
    guard: Guard
    headlines: list[Headline] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    started_at: str = ""
    duration_s: float = 0.0

    def headline(self, name: str) -> Headline:
        for headline in self.headlines:
            if headline.name == name:
                return headline
        raise KeyError(f"{self.scenario} has no headline {name!r} (has {[h.name for h in self.headlines]})")

    @property
    def reproduced(self) -> bool:
        return self.headline(self.guard.headline).gain >= self.guard.min_gain

    def to_json(self) -> dict[str, Any]:
        document = asdict(self)
        document["reproduced"] = self.reproduced
        for headline, raw in zip(self.headlines, document["headlines"]):
            raw["gain"] = None if math.isinf(headline.gain) else round(headline.gain, 3)
        return document


def stdev(values: Iterable[float]) -> float:
    """Population standard deviation (0 for fewer than two values)."""
    values = list(values)
    return statistics.pstdev(values) if len(values) > 1 else 0.0


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile by nearest rank (NaN for no values)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.fmean(values) if values else math.nan
