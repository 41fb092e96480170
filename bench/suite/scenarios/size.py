"""size: throughput against message size, batching on and off, one producer."""

from __future__ import annotations

from typing import Any

from bench.suite.context import Context
from bench.suite.perf_adapter import ProduceSpec, produce

NAME = "size"
TITLE = "Throughput vs message size"
WHAT = (
    "One producer on one topic sends as fast as acknowledged (at most `max_outstanding` in "
    "flight), for each message size, with batching on (1 ms window, ≤1000 messages / ≤128 KiB "
    "per batch) and off."
)


async def run(ctx: Context) -> dict[str, Any]:
    profile, rows = ctx.profile, []
    for batching in (True, False):  # a cluster each: the disk holds one mode's data at a time
        async with ctx.cluster() as cluster:
            for size in profile.sizes:
                ctx.emit(f"{size} B, batching {'on' if batching else 'off'}")
                spec = ProduceSpec(
                    topic=f"bench-size-{size}-{'batched' if batching else 'unbatched'}",
                    size_bytes=size,
                    batching=batching,
                    duration_s=profile.duration_s,
                    warmup_s=profile.warmup_s,
                    max_outstanding=profile.window(size),
                    interval_s=profile.interval_s,
                )
                figures = await ctx.measure(cluster, produce(cluster.service_url, spec, ctx.emit))
                rows.append({"size_bytes": size, "batching": batching, **figures})
    return {"rows": rows}
