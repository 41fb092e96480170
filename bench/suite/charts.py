"""PNG charts of a run (matplotlib, the ``bench`` extra): throughput vs message size, latency
percentiles vs rate, the latency timeline of each rate (p99/max per 100 ms with the stall
events), p99 vs topic count, and the peers side by side. Without matplotlib the
charts are skipped with a line saying so; the JSON and Markdown do not need it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

PERCENTILE_LINES = (("p50_ms", "p50"), ("p95_ms", "p95"), ("p99_ms", "p99"), ("p999_ms", "p99.9"))


def write_charts(run_dir: Path, results: dict[str, dict[str, Any]], simulated: dict[str, Any] | None) -> list[Path]:
    """Every chart whose scenario is in ``results``; returns the files written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("charts skipped: matplotlib is not installed (pip install -e '.[bench]')", file=sys.stderr)
        return []
    suffix = f"\nSIMULATED disk: {simulated['label']}" if simulated else ""
    written = []
    for name, draw in (("size", _size), ("latency", _latency), ("topics", _topics), ("peers", _peers)):
        result = results.get(name)
        if not result or not result.get("rows"):
            continue
        figure, axes = plt.subplots(figsize=(7.5, 4.5), dpi=110)
        draw(axes, result)
        axes.set_title(axes.get_title() + suffix, fontsize=10)
        axes.grid(True, which="both", alpha=0.3)
        figure.tight_layout()
        path = run_dir / f"{name}.png"
        figure.savefig(path)
        plt.close(figure)
        written.append(path)
    latency_rows = (results.get("latency") or {}).get("rows", [])
    timeline_rows = [r for r in latency_rows if (r.get("timeline") or {}).get("buckets")]
    if timeline_rows:
        figure, panels = plt.subplots(
            len(timeline_rows), 1, figsize=(10, 3.2 * len(timeline_rows)), dpi=110, squeeze=False
        )
        for axes, row in zip(panels[:, 0], timeline_rows):
            _timeline(axes, row)
            axes.grid(True, which="both", alpha=0.3)
        panels[0, 0].set_title(panels[0, 0].get_title() + suffix, fontsize=10)
        figure.tight_layout()
        path = run_dir / "timeline.png"
        figure.savefig(path)
        plt.close(figure)
        written.append(path)
    return written


EVENT_STYLES = {
    "checkpoint": ("tab:red", "v"),
    "dir_flush": ("tab:orange", "v"),
    "last_mark": ("tab:brown", "1"),
    "journal_roll": ("tab:purple", "D"),
    "journal_slow_sync": ("tab:pink", "s"),
    "entry_log_roll": ("tab:olive", "D"),
    "ledger_rollover": ("tab:cyan", "P"),
    "metadata_write": ("tab:gray", "x"),
    "gc": ("tab:green", "o"),
    "loop_lag": ("black", "|"),
}
"""Marker colour and shape per event kind; the roles are rows of markers under the curves."""
ROLES = ("perf", "broker", "bookie")


def _timeline(axes: Any, row: dict[str, Any]) -> None:
    timeline = row["timeline"]
    buckets = [b for b in timeline["buckets"] if b[1] > 0]
    times = [b[0] for b in buckets]
    axes.plot(times, [b[3] for b in buckets], "-", color="tab:red", lw=0.8, label="max per 100 ms")
    axes.plot(times, [b[2] for b in buckets], "-", color="tab:blue", lw=1.0, label="p99 per 100 ms")
    axes.set_yscale("log")
    top = max([b[3] for b in buckets] + [1.0])
    axes.set_ylim(0.3, top * 40)
    seen: set[str] = set()
    for event in timeline["events"]:
        kind = event["kind"]
        if kind not in EVENT_STYLES or (kind == "gc" and event.get("generation", 0) == 0):
            continue
        color, marker = EVENT_STYLES[kind]
        role = event.get("role", "")
        level = top * (2.0 * 2.2 ** (ROLES.index(role) if role in ROLES else len(ROLES)))
        duration_s = (event.get("duration_ms") or 0.0) / 1000
        label = kind if kind not in seen else None
        seen.add(kind)
        if duration_s >= 0.005:
            axes.hlines(level, event["t"], event["t"] + duration_s, colors=color, lw=3, label=label)
        else:
            axes.plot([event["t"]], [level], marker, color=color, ms=5, label=label, lw=0)
    for index, role in enumerate(ROLES):
        axes.annotate(role, (0.005, top * 2.0 * 2.2**index), xycoords=("axes fraction", "data"), fontsize=7)
    axes.set_xlabel("s since the start of the run (receipt time; event markers by process: perf, broker, bookies)")
    axes.set_ylabel("publish latency (ms)")
    axes.set_title(
        f"Latency timeline at {row['target_rate']:,} msg/s: p99 {row['latency']['p99_ms']:.1f} ms, "
        f"max {row['latency']['max_ms']:.1f} ms"
    )
    axes.legend(fontsize=6, ncol=4, loc="upper right")


def _size(axes: Any, result: dict[str, Any]) -> None:
    for batching, style in ((True, "o-"), (False, "s--")):
        rows = [r for r in result["rows"] if r["batching"] is batching and "mb_per_s" in r]
        axes.plot(
            [r["size_bytes"] for r in rows],
            [r["mb_per_s"] for r in rows],
            style,
            label=f"batching {'on' if batching else 'off'}",
        )
        for r in rows:
            axes.annotate(
                f"{r['msg_per_s']:,.0f}/s",
                (r["size_bytes"], r["mb_per_s"]),
                fontsize=7,
                textcoords="offset points",
                xytext=(4, 4),
            )
    axes.set_xscale("log", base=2)
    axes.set_xlabel("message size (bytes)")
    axes.set_ylabel("MB/s acknowledged (labels: msg/s)")
    axes.set_title("Throughput vs message size, one producer")
    axes.legend()


def _latency(axes: Any, result: dict[str, Any]) -> None:
    rows = [r for r in result["rows"] if r.get("latency")]
    for key, label in PERCENTILE_LINES:
        axes.plot([r["msg_per_s"] for r in rows], [r["latency"][key] for r in rows], "o-", label=label)
    for r in rows:
        if r.get("saturated"):
            axes.annotate(
                "saturated",
                (r["msg_per_s"], r["latency"]["p99_ms"]),
                fontsize=7,
                textcoords="offset points",
                xytext=(4, 4),
            )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("achieved msg/s (1 KiB, batched)")
    axes.set_ylabel("publish latency (ms)")
    axes.set_title("Publish latency percentiles vs rate")
    axes.legend()


def _topics(axes: Any, result: dict[str, Any]) -> None:
    rows = [r for r in result["rows"] if r.get("latency")]
    counts = [r["topics"] for r in rows]
    axes.plot(counts, [r["latency"]["p99_ms"] for r in rows], "o-", label="p99 publish latency (ms)")
    axes.plot(counts, [r["latency"]["p50_ms"] for r in rows], "s--", label="p50 publish latency (ms)")
    axes.set_xscale("log")
    axes.set_xlabel(f"topics (same total rate: {result['rows'][0]['target_rate']:,} msg/s)")
    axes.set_ylabel("ms")
    twin = axes.twinx()
    twin.plot(
        counts,
        [(r.get("memory") or {}).get("broker_rss_mb") or 0 for r in rows],
        "^:",
        color="grey",
        label="broker RSS (MB)",
    )
    twin.set_ylabel("broker RSS (MB)")
    axes.set_title("p99 vs topic count")
    lines, labels = axes.get_legend_handles_labels()
    more, more_labels = twin.get_legend_handles_labels()
    axes.legend(lines + more, labels + more_labels, fontsize=8)


def _peers(axes: Any, result: dict[str, Any]) -> None:
    rows = [r for r in result["rows"] if not r.get("skipped")]
    names = [r["system"].replace(", ", "\n").replace("streams\nappendfsync ", "\nfsync ") for r in rows]
    bars = axes.bar(range(len(rows)), [r["msg_per_s"] for r in rows], color="tab:blue")
    for bar, r in zip(bars, rows):
        axes.annotate(
            f"{r.get('journal_device_flushes_per_s') or 0:,.0f} fl/s",
            (bar.get_x(), bar.get_height()),
            fontsize=7,
            textcoords="offset points",
            xytext=(2, 3),
        )
    axes.set_xticks(range(len(rows)), names, fontsize=7)
    axes.set_ylabel("produce msg/s (labels: device flushes/s)")
    axes.set_title(f"Same workload, {result['size_bytes']} B messages, one producer")
