"""The index of a ``lab run all``: ``OUT/README.md``, one entry per scenario with its summary chart.

Each entry names the scenario, its source, the guard figure baseline → tuned beside the
report's own figure, and whether the finding was reproduced, and links the full report.
"""

from __future__ import annotations

import math
from pathlib import Path

from minipulsar.lab.result import ScenarioResult
from minipulsar.lab.scenario import Scenario


def summary_chart(scenario: Scenario, result: ScenarioResult) -> str:
    names = [chart.name for chart in result.charts]
    return scenario.summary_chart if scenario.summary_chart in names else names[0]


def headline_line(result: ScenarioResult) -> str:
    headline = result.headline(result.guard.headline)
    gain = "∞" if math.isinf(headline.gain) else f"{headline.gain:.2f}x"
    verdict = "reproduced" if result.reproduced else "**not reproduced**"
    report = f" (the report: {headline.report_figure})" if headline.report_figure else ""
    return f"{headline.name}: {headline.baseline:.3g} → {headline.tuned:.3g} {headline.unit}, {gain}{report}; {verdict}"


def write_gallery(out_dir: Path, entries: list[tuple[Scenario, ScenarioResult]]) -> Path:
    lines = ["# The tuning lab's gallery", ""]
    if entries:
        first = entries[0][1]
        lines += [f"Profile **{first.profile}**, seed {first.seed}, disks: {first.disk}.", ""]
    for scenario, result in entries:
        lines += [
            f"## [{scenario.name}]({scenario.name}/report.md): {scenario.title}",
            "",
            f"{scenario.source}. {headline_line(result)}.",
            "",
            f"![{scenario.title}]({scenario.name}/{summary_chart(scenario, result)}.png)",
            "",
        ]
    path = out_dir / "README.md"
    path.write_text("\n".join(lines))
    return path
