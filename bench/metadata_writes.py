"""Metadata bench: how many metadata writes per second a consumer's acks cost.

Sketch: a durable cursor keeps its position in a cursor ledger on the bookies (§4.3), so an
ack costs a bookie add and no metadata write; the metadata store sees a cursor only when it
switches ledgers (its first persisted change, a rollover every
``managedLedgerCursorMaxEntriesPerLedger`` entries or
``managedLedgerCursorRolloverTimeInSeconds``, a clean close). What is left at steady state is
the background: a load report a minute, ledger rolls of the topic.

What one run does: start a cluster as the tests do (``tests/support/cluster.py``
``make_cluster``: a metastore — or, with ``--zookeeper``, a one-node ZooKeeper — ``--bookies``
bookies and a broker, as processes); run ``perf consume`` (Exclusive, acks grouped every
``--acks-delay-ms``) and ``perf produce -r --rate -s --size`` on one topic (their library, in
this process), optionally with deduplication (its snapshot is a second cursor). After
``--warmup`` seconds, read every process's ``pulsar_metadata_store_ops_latency_ms_count``
(broker, bookies: each exports its own client's calls), again ``--secs`` later; the
difference of the ``put`` and ``del`` counts is the metadata writes of the window, divided
by the seconds and by the cursors.

Prints a table, and ends with one JSON line (``--json FILE`` writes it too). Not a test.

    .venv/bin/python bench/metadata_writes.py                    # 10k msg/s for 60 s
    .venv/bin/python bench/metadata_writes.py --dedup --zookeeper --secs 120
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import add_common_arguments, emit_result, environment, fmt, progress
from minipulsar.cli.perf import ConsumeOptions, ProduceOptions, run_consume, run_produce
from tests.support.cluster import ProcessCluster, make_cluster
from tests.support.web import metrics_text

TOPIC = "persistent://public/default/metadata-writes"
OPS = "pulsar_metadata_store_ops_latency_ms_count"
WRITES = ("put", "del")
"""Pulsar's ``type`` labels of the writes."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.set_defaults(secs=60.0, warmup=10.0)
    parser.add_argument("--rate", type=float, default=10_000, help="messages/s produced and acked (default 10000)")
    parser.add_argument("--size", type=int, default=100, help="message bytes (default 100)")
    parser.add_argument("--bookies", type=int, default=2, help="bookies (default 2; quorums 2/2/2)")
    parser.add_argument("--acks-delay-ms", type=float, default=100.0, help="consumer ack grouping (default 100)")
    parser.add_argument("--dedup", action="store_true", help="brokerDeduplicationEnabled (a snapshot cursor)")
    parser.add_argument("--zookeeper", action="store_true", help="a one-node ZooKeeper instead of the metastore")
    return parser.parse_args(argv)


def metadata_ops(cluster: ProcessCluster) -> dict[str, float]:
    """``type`` → successful metadata calls so far, summed over the broker and the bookies."""
    totals: dict[str, float] = {}
    for process in [*cluster.brokers, *cluster.bookies]:
        for family in text_string_to_metric_families(metrics_text(process)):
            for sample in family.samples:
                if sample.name == OPS and sample.labels.get("status") == "success":
                    op = sample.labels["type"]
                    totals[op] = totals.get(op, 0.0) + sample.value
    return totals


def difference(after: Mapping[str, float], before: Mapping[str, float]) -> dict[str, float]:
    return {op: after[op] - before.get(op, 0.0) for op in after}


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    settings: dict[str, object] = {"brokerDeduplicationEnabled": args.dedup}
    duration_s = args.warmup + args.secs
    with tempfile.TemporaryDirectory(prefix="metadata-writes-") as root:
        async with make_cluster(
            Path(root), bookies=args.bookies, broker_settings=settings, zookeeper_nodes=1 if args.zookeeper else 0
        ) as cluster:
            progress(f"cluster up: broker {cluster.service_url}, metadata {cluster.metadata_url}")
            consume = ConsumeOptions(
                topics=[TOPIC],
                service_url=cluster.service_url,
                acks_delay_ms=args.acks_delay_ms,
                duration_s=duration_s,
                stats_interval_s=args.progress_interval * 10,
            )
            consuming = asyncio.create_task(run_consume(consume, emit=None))
            produce = ProduceOptions(
                topics=[TOPIC],
                service_url=cluster.service_url,
                rate_per_s=args.rate,
                size_bytes=args.size,
                duration_s=duration_s,
                warmup_s=0,
                stats_interval_s=args.progress_interval * 10,
            )
            producing = asyncio.create_task(run_produce(produce, emit=None))
            await asyncio.sleep(args.warmup)  # a load generator's schedule, not synchronisation
            before = await asyncio.to_thread(metadata_ops, cluster)
            progress(f"measuring {args.secs:.0f} s at {args.rate:,.0f} msg/s")
            await asyncio.sleep(args.secs)
            after = await asyncio.to_thread(metadata_ops, cluster)
            produced, consumed = await producing, await consuming
    window = difference(after, before)
    writes = sum(window.get(op, 0.0) for op in WRITES)
    cursors = 2 if args.dedup else 1
    return {
        "name": "metadata_writes",
        **environment(),
        "parameters": {k: v for k, v in vars(args).items() if k not in ("json", "progress_interval")},
        "produced_msgs_per_s": produced.msg_per_s,
        "consumed_msgs_per_s": consumed.msg_per_s,
        "metadata_writes_per_s": writes / args.secs,
        "metadata_writes_per_min_per_cursor": writes / args.secs * 60 / cursors,
        "metadata_reads_per_s": window.get("get", 0.0) / args.secs,
        "ops_in_window": window,
        "errors": produced.failures
        + consumed.ack_failures
        + (produced.error is not None)
        + (consumed.error is not None),
        "first_error": produced.error or consumed.error,
    }


def table(result: dict[str, Any]) -> str:
    header = f"{'msg/s in':>9} {'msg/s acked':>11} {'md writes/s':>11} {'/min/cursor':>11} {'md reads/s':>10}"
    row = (
        f"{fmt(result['produced_msgs_per_s']):>9} {fmt(result['consumed_msgs_per_s']):>11} "
        f"{fmt(result['metadata_writes_per_s'], '.2f'):>11} "
        f"{fmt(result['metadata_writes_per_min_per_cursor'], '.1f'):>11} "
        f"{fmt(result['metadata_reads_per_s'], '.2f'):>10}"
    )
    return "\n".join([header, "-" * len(header), row])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from minipulsar.net.loop import run

    result = run(bench(args))
    print(table(result), flush=True)
    emit_result(result, args.json)
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
