"""topics: the same total rate over 1 … 10 000 topics — throughput, p99 and server memory.

BookKeeper's promise is that a bookie serves any number of ledgers without turning its
sequential journal writes random; the broker pays per topic (a managed ledger, a cursor
set, a producer). Each topic count gets a fresh cluster, so the memory figures are that
count's alone: RSS right after start (``*_start``) and after the run.
"""

from __future__ import annotations

from typing import Any

from bench.suite.context import Context
from bench.suite.perf_adapter import ProduceSpec, produce

NAME = "topics"
TITLE = "Scale in topics"
WHAT = (
    "The same total rate (1 KiB messages, batching on) spread evenly over N topics, one "
    "producer each, all in one client; a fresh cluster per N. Memory: resident set (VmRSS) "
    "of the broker and of the largest bookie, after the run; broker KB/topic: the broker's "
    "growth over the run ÷ the topic count (each topic with its producer, ledger and handle)."
)
SIZE_BYTES = 1024
SESSION_TIMEOUT_MS = 30_000
"""The broker's ``metadataStoreSessionTimeoutMillis`` here: Pulsar's default, not the test
clusters' 2 s. Creating 10,000 producers at once on 2 shared cores can hold the broker's
loop long enough to miss a 2 s session's keep-alives, and a lost session unloads every
bundle — a failure of the harness, not a figure."""


async def run(ctx: Context) -> dict[str, Any]:
    profile, rows = ctx.profile, []
    for count in profile.topic_counts:
        ctx.emit(f"{count:,} topic(s) at {profile.topics_total_rate:,} msg/s in all")
        broker_settings = {**ctx.cluster_spec.broker_settings, "metadataStoreSessionTimeoutMillis": SESSION_TIMEOUT_MS}
        async with ctx.cluster(broker_settings=broker_settings) as cluster:
            at_start = cluster.memory_mb()
            spec = ProduceSpec(
                topic=f"bench-topics-{count}",
                num_topics=count,
                size_bytes=SIZE_BYTES,
                rate=profile.topics_total_rate,
                duration_s=profile.duration_s,
                warmup_s=profile.warmup_s,
                max_outstanding=profile.window(SIZE_BYTES),
                interval_s=profile.interval_s,
            )
            figures = await ctx.measure(cluster, produce(cluster.service_url, spec, ctx.emit))
            after_mb = (figures.get("memory") or {}).get("broker_rss_mb")
            rows.append(
                {
                    "topics": count,
                    "target_rate": profile.topics_total_rate,
                    "size_bytes": SIZE_BYTES,
                    "broker_rss_mb_start": at_start["broker_rss_mb"],
                    "bookie_rss_mb_start": at_start["bookie_rss_mb_max"],
                    "broker_kb_per_topic": (
                        (after_mb - at_start["broker_rss_mb"]) * 1024 / count if after_mb is not None else None
                    ),
                    **figures,
                }
            )
    return {"rows": rows}
