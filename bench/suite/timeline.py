"""The latency timeline of one run: perf's publish latency per 100 ms of receipt time (p99,
max, count) next to the events that can stall the pipeline, from every process — the bookies'
checkpoints (write-cache flushes: entry-log write + fsync, index commit, lastMark), entry-log
and journal rolls, the broker's ledger rollovers and metadata writes, Python GC collections
and event-loop lag (``minipulsar.diagnostics``; the servers write them to the cluster's
``minipulsarDiagnosticsFile``, the bench process keeps its own, role ``perf``).

Times are CLOCK_MONOTONIC seconds, one clock for every process on the host; the timeline
shows them relative to the run's start (perf's ``begin``). :func:`stalls` pairs each bucket
whose p99 or max is far above the run's p50 with the events that overlap it (or end within
:data:`NEAR_S` before it), which is what the summary quotes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

BUCKET_S = 0.1
NEAR_S = 0.05
"""An event ending this long before a slow bucket still counts as near it (its receipts
arrive after the stall)."""
SLOW_FACTOR = 3.0
"""A bucket is slow when its max is this many times the run's median bucket p99 (and ≥ 5 ms)."""
SLOW_MIN_MS = 5.0
MAX_EVENTS_KEPT = 5_000


def build(buckets: list[Any], events: list[dict[str, Any]], start_s: float, end_s: float) -> dict[str, Any]:
    """The run's timeline as plain data: ``buckets`` ([t, count, p99_ms, max_ms], t the bucket's
    end relative to ``start_s``) and ``events`` (those overlapping [start_s, end_s], with ``t``
    relative too), plus counts per kind, the processes that reported (``start`` events per
    role, whenever they came) and the slow buckets with their suspects."""
    rows = [[round(b.t - start_s, 3), b.count, round(b.p99_ms, 3), round(b.max_ms, 3)] for b in buckets]
    kept = []
    for event in events:
        t, duration_s = event.get("t", 0.0), (event.get("duration_ms") or 0.0) / 1000
        if t + duration_s < start_s or t > end_s:
            continue
        kept.append({**event, "t": round(t - start_s, 4)})
    kept.sort(key=lambda e: e["t"])
    kinds = Counter(f"{e.get('role', '?')}:{e['kind']}" for e in kept)
    reporting = Counter(e.get("role", "?") for e in events if e["kind"] == "start")
    return {
        "bucket_s": BUCKET_S,
        "reporting": dict(sorted(reporting.items())),
        "buckets": rows,
        "events": kept[:MAX_EVENTS_KEPT],
        "events_dropped": max(0, len(kept) - MAX_EVENTS_KEPT),
        "event_counts": dict(sorted(kinds.items())),
        "slow": stalls(rows, kept),
    }


def stalls(rows: list[list[float]], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The slow buckets, each with the events near it (``role:kind duration``)."""
    measured = sorted(r[2] for r in rows if r[1] > 0)
    if not measured:
        return []
    threshold = max(SLOW_MIN_MS, SLOW_FACTOR * measured[len(measured) // 2])
    slow = []
    previous_end = 0.0
    for t_end, count, p99, max_ms in rows:
        t_start, previous_end = previous_end, t_end
        if count == 0 or max_ms < threshold:
            continue
        near = [
            e for e in events if e["t"] <= t_end and e["t"] + (e.get("duration_ms") or 0.0) / 1000 >= t_start - NEAR_S
        ]
        slow.append(
            {
                "t": t_end,
                "p99_ms": p99,
                "max_ms": max_ms,
                "near": [describe(e) for e in near if e["kind"] != "start"][:12],
            }
        )
    return slow


def describe(event: dict[str, Any]) -> str:
    text = f"{event.get('role', '?')}:{event['kind']}"
    if event.get("duration_ms") is not None:
        text += f" {event['duration_ms']:.1f}ms"
    if event["kind"] == "gc":
        text += f" gen{event.get('generation')}"
    elif "bytes" in event:
        text += f" {event['bytes'] / 1e6:.1f}MB"
    return text


def worst(timeline: dict[str, Any]) -> dict[str, float]:
    """The worst bucket's p99 and max (ms), 0 when there are none."""
    rows = [r for r in timeline.get("buckets", []) if r[1] > 0]
    return {
        "worst_bucket_p99_ms": max((r[2] for r in rows), default=0.0),
        "worst_bucket_max_ms": max((r[3] for r in rows), default=0.0),
    }
