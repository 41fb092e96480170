"""latency: publish latency percentiles at fixed rates — the latency/throughput curve — and,
per rate, the latency timeline (per 100 ms of receipt time: p99, max) next to every process's
stall events (bench/suite/timeline.py), which ``timeline.png`` draws."""

from __future__ import annotations

import asyncio
from typing import Any

from bench.suite import timeline
from bench.suite.context import Context
from bench.suite.perf_adapter import ProduceSpec, produce
from minipulsar import diagnostics

NAME = "latency"
TITLE = "Publish latency vs rate"
WHAT = (
    "One producer, 1 KiB messages, batching on, paced at each fixed rate; latency is send → "
    "broker receipt. A rate the cluster cannot sustain is marked *saturated*: its latency "
    "is then mostly queueing. *worst 100 ms*: the highest p99 and max of a 100 ms bucket of "
    "receipts (timeline.png: every bucket, with the servers' and perf's stall events)."
)
SIZE_BYTES = 1024
SATURATED_BELOW = 0.95
"""A run that achieved less than this fraction of its target rate is saturated."""
EVENTS_WRITTEN_S = diagnostics.WRITE_EVERY_S + 0.3
"""After a run, the servers have written its events to the diagnostics file within this."""


async def run(ctx: Context) -> dict[str, Any]:
    profile, rows = ctx.profile, []
    async with ctx.cluster(diagnostics=True) as cluster:
        for rate in profile.rates:
            ctx.emit(f"{rate:,} msg/s target")
            spec = ProduceSpec(
                topic=f"bench-latency-{rate}",
                size_bytes=SIZE_BYTES,
                rate=rate,
                duration_s=profile.duration_s,
                warmup_s=profile.warmup_s,
                max_outstanding=max(profile.window(SIZE_BYTES), rate // 10),
                interval_s=profile.interval_s,
                timeline_s=timeline.BUCKET_S,
            )
            figures = await ctx.measure(cluster, produce(cluster.service_url, spec, ctx.emit))
            raw = figures.pop("timeline_raw", None)
            if raw is not None:
                await asyncio.sleep(EVENTS_WRITTEN_S)
                events = raw["events"] + diagnostics.read_events(cluster.diagnostics_file)
                figures["timeline"] = timeline.build(raw["buckets"], events, raw["start_s"], raw["end_s"])
                figures |= timeline.worst(figures["timeline"])
                for slow in figures["timeline"]["slow"][:5]:
                    ctx.emit(
                        f"  slow 100 ms at {slow['t']:.1f} s: p99 {slow['p99_ms']:.1f} max {slow['max_ms']:.1f} ms"
                        f" near {', '.join(slow['near']) or 'no event'}"
                    )
            rows.append(
                {
                    "target_rate": rate,
                    "size_bytes": SIZE_BYTES,
                    "saturated": figures["msg_per_s"] < SATURATED_BELOW * rate,
                    **figures,
                }
            )
    return {"rows": rows}
