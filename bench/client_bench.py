"""Client bench: one producer's throughput with batching on and off, and the client's CPU per message.

Sketch: with batching on, 1 KiB messages in batches of up to 1000 messages / 128 KiB are
~128 messages per entry, so the broker and bookie see ~1/128 of the frames, and the client's
per-message Python work (building the message, the batch, a future, the receipt) is what
bounds the rate — tens of µs of CPU per message give a few 10k msgs/s. With batching off every
message is one entry, one SEND, one bookie add and one receipt, and the broker's and bookie's
per-entry costs bound it to a few thousand msgs/s on 2 cores.

What one run does: start a cluster exactly as the tests do (``tests/support/cluster.py``
``make_cluster``: a metastore, ``--bookies`` bookies, a broker, as processes), then in this
process an asyncio :class:`minipulsar.Client`; for each mode (batching on, off) a producer on a
fresh topic sends ``--warmup-messages`` (not measured), then ``--messages`` messages of
``--size`` bytes as fast as ``send_async`` accepts them (``block_if_queue_full``, at most
``--max-pending`` in flight), and ``flush()``. Measured per mode: messages/s and MB/s from the
first send to the last receipt, publish latency (send_async to its callback) p50/p99, the
client's CPU (``time.process_time()`` of this process — the servers are other processes — over
the measured messages, in µs per message), and the broker's CPU over the same span.

Prints a table, and ends with one JSON line (``--json FILE`` writes it too). Not a test.

    .venv/bin/python bench/client_bench.py
    .venv/bin/python bench/client_bench.py --messages 20000 --modes off --json bench/results/client.json
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    MB,
    LatencyHistogram,
    emit_result,
    environment,
    fmt,
    process_cpu_s,
    progress,
)
from minipulsar import Client
from tests.support.cluster import ProcessCluster, make_cluster

MODES = {"on": True, "off": False}


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


def producer_options(batching: bool, args: argparse.Namespace) -> dict[str, Any]:
    """The create_producer arguments of a mode (those the client's create_producer knows)."""
    wanted = {
        "batching_enabled": batching,
        "batching_max_publish_delay_ms": args.batch_delay_ms,
        "max_pending_messages": args.max_pending,
        "block_if_queue_full": True,
    }
    known = inspect.signature(Client.create_producer).parameters
    missing = [name for name in wanted if name not in known]
    if missing:
        progress(f"note: create_producer has no {', '.join(missing)}; running without")
    return {name: value for name, value in wanted.items() if name in known}


class Sender:
    """send_async as fast as the producer takes it; counts receipts and their latency."""

    def __init__(self, producer: Any, payload: bytes) -> None:
        self.producer, self.payload = producer, payload
        self.latency = LatencyHistogram()
        self.acked = 0
        self.errors = 0
        self.first_error: BaseException | None = None
        self._expected = 0

    async def send(self, count: int, args: argparse.Namespace, label: str) -> None:
        record, now_ns = self.latency.record_us, time.perf_counter_ns
        self._expected += count
        self._all_acked = asyncio.get_running_loop().create_future()
        next_report = time.monotonic() + args.progress_interval
        for _ in range(count):
            sent_ns = now_ns()

            def done(error: BaseException | None, _message_id: Any, sent_ns: int = sent_ns) -> None:
                if error is None:
                    record((now_ns() - sent_ns) // 1000)
                else:
                    self.errors += 1
                    self.first_error = self.first_error or error
                self.acked += 1
                if self.acked >= self._expected and not self._all_acked.done():
                    self._all_acked.set_result(None)

            result = self.producer.send_async(self.payload, done)
            if inspect.isawaitable(result):  # a send_async that waits for queue space
                await result
            if time.monotonic() >= next_report:
                next_report += args.progress_interval
                progress(f"{label}: {self.acked:,} acked of {self._expected:,}")
                await asyncio.sleep(0)  # let receipts in between progress lines
        await self.producer.flush()
        if self.acked < self._expected:
            await self._all_acked


async def run_mode(client: Client, cluster: ProcessCluster, batching: bool, args: argparse.Namespace) -> dict[str, Any]:
    label = f"batching {'on' if batching else 'off'}"
    producer = await client.create_producer(
        f"client-bench-{'batched' if batching else 'unbatched'}-{time.time_ns()}", **producer_options(batching, args)
    )
    sender = Sender(producer, b"x" * args.size)
    if args.warmup_messages:
        await sender.send(args.warmup_messages, args, f"{label} warmup")
    sender.latency = LatencyHistogram()
    acked_before, errors_before = sender.acked, sender.errors
    broker_cpu_before = process_cpu_s(cluster.broker.proc.pid)
    cpu_before, wall_before = time.process_time(), time.perf_counter()
    await sender.send(args.messages, args, label)
    wall_s, cpu_s = time.perf_counter() - wall_before, time.process_time() - cpu_before
    broker_cpu_s = process_cpu_s(cluster.broker.proc.pid) - broker_cpu_before
    await producer.close()
    messages = sender.acked - acked_before
    result = {
        "batching": batching,
        "messages": messages,
        "errors": sender.errors - errors_before,
        "msgs_per_s": messages / wall_s,
        "mb_per_s": messages * args.size / wall_s / MB,
        "seconds": wall_s,
        "client_cpu_us_per_msg": cpu_s / messages * 1e6 if messages else None,
        "client_cpu_util": cpu_s / wall_s,
        "broker_cpu_us_per_msg": broker_cpu_s / messages * 1e6 if messages else None,
        **{f"publish_{k}": v for k, v in sender.latency.summary_ms().items()},
    }
    if sender.first_error is not None:
        result["first_error"] = f"{type(sender.first_error).__name__}: {sender.first_error}"
    progress(
        f"{label}: {fmt(result['msgs_per_s'])} msgs/s, {fmt(result['client_cpu_us_per_msg'], '.1f')} µs client CPU/msg"
    )
    return result


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    settings = dict(item.split("=", 1) for item in args.broker_set)
    with tempfile.TemporaryDirectory(prefix="client-bench-") as root:
        async with make_cluster(Path(root), bookies=args.bookies, broker_settings=settings) as cluster:
            progress(f"cluster up: broker {cluster.broker.address}, {args.bookies} bookie(s)")
            async with Client(cluster.service_url) as client:
                runs = [await run_mode(client, cluster, MODES[mode], args) for mode in args.modes]
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
