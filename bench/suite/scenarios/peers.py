"""peers: minipulsar and other brokers, the same workload, one table from one run.

Workload (every row): one producer keeping up to ``max_outstanding`` messages of
``peer_size`` bytes in flight as fast as they are acknowledged, one consumer reading the same
stream meanwhile, in the bench process, all measured by ``minipulsar perf``: the minipulsar
rows are ``perf produce`` with ``perf consume`` beside it, the peers' rows their own clients
under perf's publish measurement (:mod:`bench.peers.workload`). Each row states its
durability setting and the journal device's flushes per second during it (/proc/diskstats),
so a "durable" setting that never flushes shows. Peers whose server is missing are skipped
with the reason in the table.

Rows: minipulsar as the other scenarios run it (3 bookies, E/Qw/Qa 2/2/2, journal sync on)
batched and unbatched, and on ONE bookie (1/1/1) batched — the single-copy setting the peers'
single servers compare with; Redis Streams with ``appendfsync always`` and ``everysec``; NATS
JetStream (file storage, ``sync_interval: always``). Those are "Python client to Python
client"; one more row shows a server's own ceiling: Redis ``appendfsync always`` driven by its
C client, ``redis-benchmark -P 100 -c 10`` XADDing 1 KiB values (:mod:`bench.peers.redis_benchmark`;
its own figures, no consumer). Every server's data is on the journal mount (``--journal-dir``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.peers import nats_jetstream, redis_benchmark, redis_streams
from bench.peers.workload import PeerWorkload
from bench.suite.context import Context
from bench.suite.diskstats import FlushWindow
from bench.suite.perf_adapter import ProduceSpec, produce

NAME = "peers"
TITLE = "minipulsar and its peers, same workload"
REDIS_C_CLIENT = "redis streams, appendfsync always, C client (redis-benchmark)"
WHAT = (
    "One producer (at most `max_outstanding` in flight, as fast as acknowledged) and one "
    "consumer at the same time, same message size, each system's durable setting stated; "
    "device flushes/s of the journal mount during each row."
)


async def run(ctx: Context) -> dict[str, Any]:
    profile = ctx.profile
    rows: list[dict[str, Any]] = []
    for label, bookies, batching in (
        ("minipulsar, batched", ctx.cluster_spec.bookies, True),
        ("minipulsar, unbatched", ctx.cluster_spec.bookies, False),
        ("minipulsar 1 bookie, batched", 1, True),
    ):
        async with ctx.cluster(bookies=bookies) as cluster:
            e, w, a = cluster.spec.quorum
            ctx.emit(label)
            spec = ProduceSpec(
                topic=f"bench-peers-{bookies}-{batching}",
                size_bytes=profile.peer_size,
                batching=batching,
                duration_s=profile.duration_s,
                warmup_s=profile.warmup_s,
                max_outstanding=profile.window(profile.peer_size),
                consume=True,
                interval_s=profile.interval_s,
            )
            figures = await ctx.measure(cluster, produce(cluster.service_url, spec, ctx.emit))
            sync = "journalSyncData=true" if cluster.spec.journal_sync else "journalSyncData=false"
            rows.append(
                {
                    "system": label,
                    "durability": f"{bookies} bookie(s), E/Qw/Qa {e}/{w}/{a}, {sync}"
                    + (", SIMULATED disk" if cluster.spec.disk_model else ""),
                    **figures,
                }
            )
    workload = PeerWorkload(
        size_bytes=profile.peer_size,
        duration_s=profile.duration_s,
        warmup_s=profile.warmup_s,
        max_outstanding=profile.window(profile.peer_size),
        interval_s=profile.interval_s,
    )
    parent = ctx.cluster_spec.journal_dir
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="minipulsar-bench-peers-", dir=parent) as root:
        data = Path(root)
        peers: list[tuple[str, str | None, Callable[[], Awaitable[dict[str, Any]]]]] = [
            (
                f"redis streams, appendfsync {mode}",
                redis_streams.unavailable_reason(),
                lambda mode=mode: redis_streams.run(
                    mode, data / f"redis-{mode}", data / f"redis-{mode}.log", workload, ctx.emit
                ),
            )
            for mode in ("always", "everysec")
        ] + [
            (
                REDIS_C_CLIENT,
                redis_benchmark.unavailable_reason(),
                lambda: redis_benchmark.run(data / "redis-c", data / "redis-c.log", workload, ctx.emit),
            ),
            (
                "nats jetstream, sync always",
                nats_jetstream.unavailable_reason(),
                lambda: nats_jetstream.run(data / "nats", data / "nats.log", workload, ctx.emit),
            ),
        ]
        for label, reason, start in peers:
            if reason is not None:
                ctx.emit(f"SKIP {label}: {reason}")
                rows.append({"system": label, "skipped": reason})
                continue
            ctx.emit(label)
            window = FlushWindow(data).start()
            try:
                figures = await start()
            except Exception as exc:  # noqa: BLE001 -- a peer's boundary: a failing peer is a row that says so
                ctx.emit(f"FAILED {label}: {exc}")
                rows.append({"system": label, "skipped": f"failed: {type(exc).__name__}: {exc}"})
                continue
            flushes = window.stop()
            figures["journal_device"] = flushes["device"]
            figures["journal_device_flushes_per_s"] = flushes["device_flushes_per_s"]
            lat = figures["latency"]
            ctx.emit(
                f"  -> {figures['msg_per_s']:,.0f} msg/s, p99 {lat['p99_ms']:.2f} ms, "
                f"{flushes['device_flushes_per_s'] or 0:,.0f} device flushes/s"
            )
            rows.append({"system": label, **figures})
    reference = rows[0].get("msg_per_s")
    for row in rows:
        if row.get("msg_per_s") and reference:
            row["minipulsar_ratio"] = reference / row["msg_per_s"]
    return {
        "rows": rows,
        "size_bytes": profile.peer_size,
        "max_outstanding": profile.window(profile.peer_size),
        "reference": rows[0]["system"],
    }
