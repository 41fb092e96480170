"""latency: publish latency percentiles at fixed rates — the latency/throughput curve."""

from __future__ import annotations

from typing import Any

from bench.suite.context import Context
from bench.suite.perf_adapter import ProduceSpec, produce

NAME = "latency"
TITLE = "Publish latency vs rate"
WHAT = (
    "One producer, 1 KiB messages, batching on, paced at each fixed rate; latency is send → "
    "broker receipt. A rate the cluster cannot sustain is marked *saturated*: its latency "
    "is then mostly queueing."
)
SIZE_BYTES = 1024
SATURATED_BELOW = 0.95
"""A run that achieved less than this fraction of its target rate is saturated."""


async def run(ctx: Context) -> dict[str, Any]:
    profile, rows = ctx.profile, []
    async with ctx.cluster() as cluster:
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
            )
            figures = await ctx.measure(cluster, produce(cluster.service_url, spec, ctx.emit))
            rows.append(
                {
                    "target_rate": rate,
                    "size_bytes": SIZE_BYTES,
                    "saturated": figures["msg_per_s"] < SATURATED_BELOW * rate,
                    **figures,
                }
            )
    return {"rows": rows}
