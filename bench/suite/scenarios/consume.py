"""consume: how fast messages come out — tailing (from the broker's entry cache) and catch-up
(from the bookies), with every process's CPU per message.

Both rows use one topic, 1 KiB messages batched as the producer batches them (1 ms window),
one Exclusive consumer (``perf consume``: receive, acknowledge grouped every 100 ms), in
the bench process:

- **tailing** — ``perf produce`` as fast as acknowledged with ``perf consume`` beside it
  (subscribed before the first message): each entry is dispatched from the broker's entry
  cache right after it is written. The figure is what the consumer received per second while
  keeping up; the producer bounds it (the bench process also runs the producer, so its CPU
  per message is both clients').
- **catch-up** — first ``consume_backlog`` messages are published (~1 GB for the quick
  profile, 16× the broker's 64 MB entry cache, whose entries are also evicted after 1 s),
  then a new subscription reads them all from Earliest: the broker reads them from the
  bookies (cache cold). The bench process runs only the consumer here, so its CPU per message
  is the consumer's.

CPU per message: each process's user + system time (/proc/<pid>/stat) during the row ÷ the
messages the consumer received.
"""

from __future__ import annotations

import os
from typing import Any

from bench.common import process_cpu_s
from bench.suite.cluster import BenchCluster
from bench.suite.context import Context
from bench.suite.perf_adapter import ProduceSpec, consume, produce, publish_backlog

NAME = "consume"
TITLE = "Consume: tailing and catch-up"
WHAT = (
    "1 KiB batched messages, one topic, one consumer. Tailing: the consumer beside a producer "
    "going as fast as acknowledged (entries from the broker's cache). Catch-up: a backlog "
    "published first, then read by a new subscription from Earliest (entries from the "
    "bookies). CPU µs per message received of the bench process (the clients), the broker "
    "and the bookies."
)
SIZE_BYTES = 1024
CATCH_UP_TIMEOUT_S = 300.0


async def run(ctx: Context) -> dict[str, Any]:
    profile = ctx.profile
    rows = []
    async with ctx.cluster() as cluster:
        ctx.emit("tailing: perf produce as fast as acknowledged, perf consume beside it")
        spec = _spec(ctx, "bench-consume-tail", consume_beside=True)
        cpu = _CpuWindow(cluster)
        figures = await ctx.measure(cluster, produce(cluster.service_url, spec, ctx.emit))
        rows.append(
            figures
            | {
                "mode": "tailing",
                "consume_msg_per_s": figures["receive_msg_per_s"],
                "consumed": figures["received"],
                "produce_msg_per_s": figures["msg_per_s"],
                "kept_up": figures["received"] >= 0.95 * figures["messages"],
                "cpu_us_per_msg": cpu.per_message(figures["received"]),
                "perf_mode": figures["mode"],
            }
        )
        backlog = profile.consume_backlog
        ctx.emit(f"catch-up: publishing a backlog of {backlog:,} messages")
        topic = "bench-consume-backlog"
        published = await publish_backlog(cluster.service_url, _spec(ctx, topic), backlog, ctx.emit)
        ctx.emit(f"catch-up: a new subscription reads {published['messages']:,} messages from Earliest")
        cpu = _CpuWindow(cluster)
        figures = await ctx.measure(
            cluster,
            consume(
                cluster.service_url,
                topic,
                "bench-catch-up",
                published["messages"],
                CATCH_UP_TIMEOUT_S,
                profile.interval_s,
                ctx.emit,
            ),
        )
        rows.append(
            figures
            | {
                "mode": "catch-up",
                "consume_msg_per_s": figures["msg_per_s"],
                "consumed": figures["messages"],
                "backlog": published["messages"],
                "backlog_publish_msg_per_s": published["msg_per_s"],
                "cpu_us_per_msg": cpu.per_message(figures["messages"]),
                "perf_mode": figures["mode"],
            }
        )
        ctx.emit(
            f"  -> catch-up {figures['msg_per_s']:,.0f} msg/s; "
            + ", ".join(f"{k} {v:.2f}" for k, v in rows[-1]["cpu_us_per_msg"].items())
            + " µs/msg"
        )
    return {"rows": rows, "size_bytes": SIZE_BYTES}


def _spec(ctx: Context, topic: str, consume_beside: bool = False) -> ProduceSpec:
    profile = ctx.profile
    return ProduceSpec(
        topic=topic,
        size_bytes=SIZE_BYTES,
        batching=True,
        duration_s=profile.duration_s if consume_beside else CATCH_UP_TIMEOUT_S,
        warmup_s=profile.warmup_s,
        max_outstanding=profile.window(SIZE_BYTES),
        consume=consume_beside,
        interval_s=profile.interval_s,
    )


class _CpuWindow:
    """CPU seconds of the bench process and of every server from now until :meth:`per_message`."""

    def __init__(self, cluster: BenchCluster) -> None:
        self._pids = {"bench": os.getpid()} | cluster.pids()
        self._before = {name: process_cpu_s(pid) for name, pid in self._pids.items()}

    def per_message(self, messages: int) -> dict[str, float]:
        """µs of CPU per message, per process (``bookies``: their sum)."""
        spent = {name: process_cpu_s(pid) - self._before[name] for name, pid in self._pids.items()}
        figures = {name: s / max(messages, 1) * 1e6 for name, s in spent.items() if not name.startswith("bookie-")}
        figures.pop("metastore", None)
        figures["bookies"] = sum(s for n, s in spent.items() if n.startswith("bookie-")) / max(messages, 1) * 1e6
        return figures
