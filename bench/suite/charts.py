"""PNG charts of a run (matplotlib, the ``bench`` extra): throughput vs message size, latency
percentiles vs rate, p99 vs topic count, and the peers side by side. Without matplotlib the
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
    return written


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
