"""e2e-vs-bookie: the same entries written through the broker and straight to the bookies.

End to end: one producer, batching OFF, so each message is one entry (one SEND, one
managed-ledger add, ``Qw`` bookie adds, one receipt). Managed-ledger mode (pulsar-perf's
``managed-ledger``): a BookKeeper client in the bench process adds the same entries to one
ledger with the cluster's E/Qw/Qa — no broker. Same size, same window. What the broker hop
costs: the throughput ratio at full speed (where latency is mostly the window queueing, by
Little's law), and the latency difference at a paced :data:`PACED_RATE` entries/s of the
first size, where neither side queues.
"""

from __future__ import annotations

from typing import Any

from bench.suite.context import Context
from bench.suite.perf_adapter import LedgerSpec, ProduceSpec, managed_ledger, produce

NAME = "e2e-vs-bookie"
TITLE = "End to end vs straight to the bookies"
WHAT = (
    "Per entry size: one producer with batching off (one message = one entry) through the "
    "broker, then a BookKeeper client adding the same entries to one ledger (same E/Qw/Qa, "
    "same window), no broker; at full speed, and paced at 1,000 entries/s for the latency."
)
PACED_RATE = 1_000


async def run(ctx: Context) -> dict[str, Any]:
    profile, rows = ctx.profile, []
    ensemble, write_quorum, ack_quorum = ctx.cluster_spec.quorum
    points = [(size, 0) for size in profile.e2e_sizes] + [(profile.e2e_sizes[0], PACED_RATE)]
    async with ctx.cluster() as cluster:
        for size, rate in points:
            pace = f"paced at {rate:,}/s" if rate else "full speed"
            ctx.emit(f"{size} B end to end (batching off), {pace}")
            e2e = await ctx.measure(
                cluster,
                produce(
                    cluster.service_url,
                    ProduceSpec(
                        topic=f"bench-e2e-{size}-{rate}",
                        size_bytes=size,
                        rate=rate,
                        batching=False,
                        duration_s=profile.duration_s,
                        warmup_s=profile.warmup_s,
                        max_outstanding=profile.window(size),
                        interval_s=profile.interval_s,
                    ),
                    ctx.emit,
                ),
            )
            ctx.emit(f"{size} B managed-ledger (no broker), {pace}")
            bookie = await ctx.measure(
                cluster,
                managed_ledger(
                    cluster.metadata_url,
                    LedgerSpec(
                        size_bytes=size,
                        rate=rate,
                        duration_s=profile.duration_s,
                        warmup_s=profile.warmup_s,
                        ensemble=ensemble,
                        write_quorum=write_quorum,
                        ack_quorum=ack_quorum,
                        max_outstanding=profile.window(size),
                        interval_s=profile.interval_s,
                    ),
                    ctx.emit,
                ),
            )
            e2e_lat, bookie_lat = e2e["latency"], bookie["latency"]
            rows.append(
                {
                    "size_bytes": size,
                    "rate": rate,
                    "e2e": e2e,
                    "managed_ledger": bookie,
                    "throughput_ratio": e2e["msg_per_s"] / bookie["msg_per_s"] if bookie["msg_per_s"] else None,
                    "p50_added_ms": _minus(e2e_lat.get("p50_ms"), bookie_lat.get("p50_ms")),
                    "p99_added_ms": _minus(e2e_lat.get("p99_ms"), bookie_lat.get("p99_ms")),
                }
            )
    return {"rows": rows}


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b
