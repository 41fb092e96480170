"""Client bench: one producer's throughput with batching on and off, and the client's CPU per message.

Sketch: with batching on, 1 KiB messages in batches of up to 1000 messages / 128 KiB are
~128 messages per entry, so the broker and bookie see ~1/128 of the frames, and the client's
per-message Python work (building the message, the batch, a future, the receipt) is what
bounds the rate — tens of µs of CPU per message give a few 10k msgs/s. With batching off every
message is one entry, one SEND, one bookie add and one receipt, and the broker's and bookie's
per-entry costs bound it to a few thousand msgs/s on 2 cores.

What one run does: start a cluster exactly as the tests do (``tests/support/cluster.py``
``make_cluster``: a metastore, ``--bookies`` bookies, a broker, as processes); the load is
``minipulsar perf produce`` (its library, ``minipulsar.cli.perf.run_produce``, in this
process). For each mode (batching on, off), on a fresh topic: a warm-up run of
``--warmup-messages`` (``-m``; not measured), then the measured run of ``--messages`` messages
of ``--size`` bytes as fast as the producer takes them (``-r 0``, ``--warmup-time 0``, at most
``--max-pending`` in flight: ``-o``, batch window ``--batch-delay-ms``: ``-b``). Measured per
mode: perf's figures (messages/s and MB/s from the first send to the last receipt, publish
latency p50/p99/p99.9/max), the client's CPU (``time.process_time()`` of this process — the
servers are other processes — over the measured run, in µs per message; the run's connect,
lookup and producer creation are a few ms of it), and the broker's CPU over the same span.

Prints a table, and ends with one JSON line (``--json FILE`` writes it too). Not a test.

    .venv/bin/python bench/client_bench.py
    .venv/bin/python bench/client_bench.py --messages 20000 --modes off --json bench/results/client.json
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import MB, emit_result, environment, fmt, process_cpu_s, progress
from minipulsar.cli.perf import ProduceOptions, run_produce
from tests.support.cluster import ProcessCluster, make_cluster

MODES = {"on": True, "off": False}
CLIENT_BATCH_MAX_BYTES = 128 * 1024
"""The client's ``batching_max_allowed_size_in_bytes`` default (perf's ``-bb`` default is 4 MiB)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="measured messages per mode (default 100000)")
    parser.add_argument("--warmup-messages", type=int, default=2_000, help="unmeasured messages first (default 2000)")
    parser.add_argument("--size", type=int, default=1024, help="message bytes (default 1024)")
    parser.add_argument("--modes", default="on,off", help="batching modes to run: on,off (default both)")
    parser.add_argument(
        "--max-pending", type=int, default=10_000, help="max_pending_messages of the producer (default 10000)"
    )
    parser.add_argument(
        "--batch-delay-ms",
        type=float,
        default=10,
        help="batching_max_publish_delay_ms (default 10, the client's default)",
    )
    parser.add_argument("--bookies", type=int, default=1, help="bookies in the cluster (default 1)")
    parser.add_argument(
        "--broker-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker.conf key for the cluster (repeatable)",
    )
    parser.add_argument(
        "--progress-interval", type=float, default=1.0, metavar="S", help="seconds between progress lines (default 1)"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the result object to FILE")
    args = parser.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.modes or any(m not in MODES for m in args.modes):
        parser.error("--modes takes on, off or on,off")
    return args


def produce_options(batching: bool, service_url: str, args: argparse.Namespace) -> ProduceOptions:
    """The measured run of a mode, as ``perf produce`` flags."""
    topic = f"client-bench-{'batched' if batching else 'unbatched'}-{time.time_ns()}"
    return ProduceOptions(
        topics=[topic],
        service_url=service_url,
        rate_per_s=0,
        size_bytes=args.size,
        num_messages=args.messages,
        warmup_s=0,
        batching=batching,
        batch_time_window_ms=args.batch_delay_ms,
        batch_max_bytes=max(CLIENT_BATCH_MAX_BYTES, args.size),
        max_outstanding=args.max_pending,
        stats_interval_s=args.progress_interval,
    )


async def run_mode(cluster: ProcessCluster, batching: bool, args: argparse.Namespace) -> dict[str, Any]:
    label = f"batching {'on' if batching else 'off'}"
    options = produce_options(batching, cluster.service_url, args)
    if args.warmup_messages:
        progress(f"{label}: {args.warmup_messages:,} warm-up messages")
        await run_produce(replace(options, num_messages=args.warmup_messages), emit=None)
    broker_pid = broker_process_id(cluster)
    broker_cpu_before = process_cpu_s(broker_pid)
    cpu_before, wall_before = time.process_time(), time.perf_counter()
    result = await run_produce(options, emit=lambda line: progress(f"{label}: {line}"))
    wall_s, cpu_s = time.perf_counter() - wall_before, time.process_time() - cpu_before
    broker_cpu_s = process_cpu_s(broker_pid) - broker_cpu_before
    messages, latency = result.messages, result.latency
    run: dict[str, Any] = {
        "batching": batching,
        "messages": messages,
        "errors": result.failures,
        "msgs_per_s": result.msg_per_s,
        "mb_per_s": result.bytes / result.duration_s / MB if result.duration_s else 0.0,
        "seconds": result.duration_s,
        "client_cpu_us_per_msg": cpu_s / messages * 1e6 if messages else None,
        "client_cpu_util": cpu_s / wall_s,
        "broker_cpu_us_per_msg": broker_cpu_s / messages * 1e6 if messages else None,
        "publish_p50_ms": latency.p50_ms,
        "publish_p99_ms": latency.p99_ms,
        "publish_p999_ms": latency.p999_ms,
        "publish_max_ms": latency.max_ms,
    }
    if result.error is not None:
        run["first_error"] = result.error
    progress(f"{label}: {fmt(run['msgs_per_s'])} msgs/s, {fmt(run['client_cpu_us_per_msg'], '.1f')} µs client CPU/msg")
    return run


def broker_process_id(cluster: ProcessCluster) -> int:
    broker = cluster.broker
    assert broker is not None and broker.proc is not None, "the cluster has a running broker"
    return broker.proc.pid


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    settings = dict(item.split("=", 1) for item in args.broker_set)
    with tempfile.TemporaryDirectory(prefix="client-bench-") as root:
        async with make_cluster(Path(root), bookies=args.bookies, broker_settings=settings) as cluster:
            progress(f"cluster up: broker {cluster.service_url}, {args.bookies} bookie(s)")
            runs = [await run_mode(cluster, MODES[mode], args) for mode in args.modes]
    by_mode = {("on" if run["batching"] else "off"): run for run in runs}
    return {
        "name": "client_bench",
        **environment(),
        "parameters": {k: v for k, v in vars(args).items() if k not in ("json", "progress_interval")},
        "msgs_per_s_batching_on": by_mode.get("on", {}).get("msgs_per_s"),
        "msgs_per_s_batching_off": by_mode.get("off", {}).get("msgs_per_s"),
        "client_cpu_us_per_msg_batching_on": by_mode.get("on", {}).get("client_cpu_us_per_msg"),
        "client_cpu_us_per_msg_batching_off": by_mode.get("off", {}).get("client_cpu_us_per_msg"),
        "runs": runs,
    }


def table(result: dict[str, Any]) -> str:
    header = (
        f"{'batching':<9} {'messages':>9} {'msgs/s':>9} {'MB/s':>7} {'client µs/msg':>14} "
        f"{'client CPU':>10} {'broker µs/msg':>14} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6}"
    )
    rows = [header, "-" * len(header)]
    for run in result["runs"]:
        rows.append(
            f"{'on' if run['batching'] else 'off':<9} {run['messages']:>9,} {fmt(run['msgs_per_s']):>9} "
            f"{fmt(run['mb_per_s'], '.1f'):>7} {fmt(run['client_cpu_us_per_msg'], '.1f'):>14} "
            f"{fmt(run['client_cpu_util'] * 100, '.0f') + ' %':>10} "
            f"{fmt(run['broker_cpu_us_per_msg'], '.1f'):>14} {fmt(run['publish_p50_ms'], '.2f'):>7} "
            f"{fmt(run['publish_p99_ms'], '.2f'):>7} {run['errors']:>6}"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from minipulsar.net.loop import run

    result = run(bench(args))
    print(table(result), flush=True)
    emit_result(result, args.json)
    return 0 if all(run["errors"] == 0 for run in result["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
