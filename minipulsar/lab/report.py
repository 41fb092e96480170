"""A scenario's report: ``report.md`` for a person, ``result.json`` for a program, PNG charts.

Charts (matplotlib, Agg backend) put the baseline and the tuned run on one figure: with one
series per variant on the same axes (baseline solid, tuned dashed); with several per variant
(one line per disk, per broker) side by side on a shared y axis, so the spread of each is
compared at a glance. Every chart's title carries the disk label (EMULATED-HDD, SIMULATED-HDD
or REAL), as every report's header does.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from minipulsar.lab.result import BASELINE, TUNED, Chart, Headline, ScenarioResult

BASELINE_STYLE: dict[str, Any] = {"linestyle": "-", "color": "#1f77b4"}
TUNED_STYLE: dict[str, Any] = {"linestyle": "--", "color": "#d62728"}
FIGURE_SIZE = (8.0, 3.8)
DPI = 90


def write_report(result: ScenarioResult, out_dir: Path) -> list[Path]:
    """Write the report, its JSON and its charts into ``out_dir``; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [write_chart(chart, result.disk, out_dir) for chart in result.charts]
    json_path = out_dir / "result.json"
    json_path.write_text(json.dumps(result.to_json(), indent=1, default=_json_default) + "\n")
    report_path = out_dir / "report.md"
    report_path.write_text(render_markdown(result))
    return [report_path, json_path, *written]


def _json_default(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def render_markdown(result: ScenarioResult) -> str:
    verdict = "reproduced" if result.reproduced else "NOT reproduced"
    guard = result.headline(result.guard.headline)
    lines = [
        f"# {result.title}",
        "",
        f"`minipulsar lab run {result.scenario}` · profile **{result.profile}** · seed {result.seed} ·"
        f" {result.started_at} · {result.duration_s:.0f} s",
        "",
        f"**Source**: {result.source}",
        "",
        f"**The report's finding**: {result.finding}",
        "",
        f"**Disks**: {result.disk}",
        "",
        f"**Baseline**: {result.variants[BASELINE]}  ",
        f"**Tuned**: {result.variants[TUNED]}",
        "",
        f"**Finding {verdict}**: {result.guard.describe()}; measured {_gain(guard)}.",
        "",
        "| figure | baseline | tuned | better | tuned's gain | the report |",
        "|---|---:|---:|---|---:|---|",
    ]
    for headline in result.headlines:
        lines.append(
            f"| {headline.name} | {_number(headline.baseline)} {headline.unit} | {_number(headline.tuned)}"
            f" {headline.unit} | {headline.better} | {_gain(headline)} | {headline.report_figure or '–'} |"
        )
    lines.append("")
    for chart in result.charts:
        lines += [f"## {chart.title}", "", f"![{chart.title}]({chart.name}.png)", ""]
    if result.notes:
        lines += ["## Notes", ""] + [f"- {note}" for note in result.notes] + [""]
    return "\n".join(lines)


def _number(value: float) -> str:
    if not math.isfinite(value):
        return "–"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _gain(headline: Headline) -> str:
    gain = headline.gain
    return "∞" if math.isinf(gain) else f"{gain:.2f}x"


def write_chart(chart: Chart, disk_label: str, out_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_variant = {variant: [s for s in chart.series if s.variant == variant] for variant in (BASELINE, TUNED)}
    panels = chart.kind == "line" and any(len(series) > 1 for series in by_variant.values())
    if panels:
        figure, axes_pair = plt.subplots(1, 2, figsize=FIGURE_SIZE, dpi=DPI, sharey=True)
        for axes, (variant, series_list) in zip(axes_pair, by_variant.items()):
            for series in series_list:
                xs, ys = zip(*series.points) if series.points else ((), ())
                axes.plot(xs, ys, label=series.label, linewidth=1.2)
            axes.set_title(variant, fontsize=9)
            axes.set_xlabel(chart.x_label)
            axes.grid(True, alpha=0.3)
            axes.legend(fontsize=7, loc="upper right")
        axes_pair[0].set_ylabel(chart.y_label)
    else:
        figure, axes = plt.subplots(figsize=FIGURE_SIZE, dpi=DPI)
        if chart.kind == "bar":
            labels = [f"{s.label}\n({s.variant})" for s in chart.series]
            values = [s.points[-1][1] if s.points else 0.0 for s in chart.series]
            colours = [(BASELINE_STYLE if s.variant == BASELINE else TUNED_STYLE)["color"] for s in chart.series]
            axes.bar(labels, values, color=colours)
            axes.tick_params(axis="x", labelsize=7)
        else:
            for series in chart.series:
                xs, ys = zip(*series.points) if series.points else ((), ())
                style = BASELINE_STYLE if series.variant == BASELINE else TUNED_STYLE
                axes.plot(xs, ys, label=series.label, linewidth=1.4, **style)
            axes.set_xlabel(chart.x_label)
            axes.legend(fontsize=8)
        axes.set_ylabel(chart.y_label)
        axes.grid(True, alpha=0.3)
    figure.suptitle(f"{chart.title}\n{disk_label}", fontsize=9)
    figure.tight_layout()
    path = out_dir / f"{chart.name}.png"
    figure.savefig(path)
    plt.close(figure)
    return path
