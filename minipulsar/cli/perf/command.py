"""``minipulsar perf produce | consume | managed-ledger``: pulsar-perf's flags, defaults and lines.

    minipulsar perf produce my-topic -r 10000 -s 1024 -time 20
    minipulsar perf consume my-topic -ss sub -st Shared -n 2
    minipulsar perf managed-ledger -md metastore://127.0.0.1:6680 -e 2 -w 2 -a 2 -r 5000

Every ``-i`` seconds (default 10, as pulsar-perf) a line "Throughput produced: … msg/s …
Latency: mean: … ms - med: … - 99pct: …" (consume: "Throughput received: …"), and at the end
the "Aggregated throughput stats …" and "Aggregated latency stats …" lines; ``--json FILE``
writes the same figures (:class:`minipulsar.cli.perf.PerfResult`) as JSON.

Exit codes: 0 the run completed; 1 it could not start (unreachable cluster, too few bookies,
a refused subscription …: one line on stderr, ``error: …``) or messages failed; 2 bad flags;
130 interrupted — Ctrl-C (or SIGTERM) ends the run, prints the aggregate and writes the JSON;
a second Ctrl-C quits at once. The measuring is in :mod:`minipulsar.cli.perf`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from minipulsar.cli.perf.options import (
    CLIENTS,
    COMPRESSIONS,
    DEFAULT_BATCH_MAX_BYTES,
    DEFAULT_SERVICE_URL,
    DEFAULT_STATS_INTERVAL_S,
    SUBSCRIPTION_POSITIONS,
    SUBSCRIPTION_TYPES,
    ConsumeOptions,
    ManagedLedgerOptions,
    ProduceOptions,
)
from minipulsar.errors import MiniPulsarError

if TYPE_CHECKING:
    from minipulsar.cli.perf.report import PerfResult

Options = ProduceOptions | ConsumeOptions | ManagedLedgerOptions
Number = TypeVar("Number", int, float)
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    perf = subparsers.add_parser(
        "perf",
        help="benchmarks: produce, consume, managed-ledger (as pulsar-perf)",
        description="Throughput and latency benchmarks with pulsar-perf's flags and output.",
    )
    modes = perf.add_subparsers(dest="perf_mode", required=True, metavar="MODE")
    _add_produce(modes)
    _add_consume(modes)
    _add_managed_ledger(modes)


def _mode(modes: argparse._SubParsersAction, name: str, help_text: str) -> argparse.ArgumentParser:
    # allow_abbrev off: pulsar-perf's one-dash flags (-time, -db, -bm …) must match exactly
    return modes.add_parser(
        name,
        help=help_text,
        description=help_text,
        allow_abbrev=False,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )


def _add_produce(modes: argparse._SubParsersAction) -> None:
    p = _mode(modes, "produce", "Publish at a fixed rate and measure publish latency.")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    _service(p)
    p.add_argument(
        "-r",
        "--rate",
        type=_non_negative(float),
        default=100.0,
        help="messages/s across all topics; 0 = as fast as possible",
    )
    p.add_argument("-s", "--size", type=_non_negative(int), default=1024, help="message size (bytes)")
    p.add_argument(
        "-t", "--num-topics", type=_positive(int), default=None, help="with one TOPIC: use TOPIC-0 .. TOPIC-(N-1)"
    )
    p.add_argument("-n", "--num-producers", type=_positive(int), default=1, help="producers per topic")
    _duration(p, "messages to publish in total")
    p.add_argument(
        "--warmup-time", type=_non_negative(float), default=1.0, help="seconds whose latencies are not recorded"
    )
    p.add_argument("-b", "--batch-time-window", type=float, default=1.0, help="batch messages in this window (ms)")
    p.add_argument("-bm", "--batch-max-messages", type=int, default=1000, help="maximum messages per batch")
    p.add_argument(
        "-bb", "--batch-max-bytes", type=int, default=DEFAULT_BATCH_MAX_BYTES, help="maximum bytes per batch"
    )
    p.add_argument("-db", "--disable-batching", action="store_true", help="send every message on its own")
    p.add_argument(
        "-o",
        "--max-outstanding",
        type=_non_negative(int),
        default=1000,
        help="maximum messages in flight per producer (0: bounded by the client's memory limit)",
    )
    p.add_argument("-z", "--compression", type=str.upper, choices=COMPRESSIONS, default="NONE")
    p.add_argument(
        "--client",
        choices=CLIENTS,
        default="minipulsar",
        help="the client to drive: minipulsar's own, or Pulsar's official one (needs pulsar-client)",
    )
    p.add_argument(
        "--send-timeout",
        type=_non_negative(float),
        default=0.0,
        help="seconds a message may wait for its receipt; 0 = forever",
    )
    _reporting(p)
    p.set_defaults(func=run_perf, make_options=_produce_options)


def _add_consume(modes: argparse._SubParsersAction) -> None:
    p = _mode(modes, "consume", "Receive and acknowledge; measure end-to-end latency (publish time to receive).")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    _service(p)
    p.add_argument(
        "-t", "--num-topics", type=_positive(int), default=None, help="with one TOPIC: use TOPIC-0 .. TOPIC-(N-1)"
    )
    p.add_argument("-n", "--num-consumers", type=_positive(int), default=1, help="consumers per subscription")
    p.add_argument(
        "-ns",
        "--num-subscriptions",
        type=_positive(int),
        default=None,
        help="with one subscription name SUB: use SUB-0 .. SUB-(N-1) (default: as given)",
    )
    p.add_argument(
        "-ss",
        "--subscriptions",
        action="append",
        default=None,
        metavar="SUB[,SUB]",
        help="subscription names (repeatable or comma-separated; default: sub)",
    )
    p.add_argument("-st", "--subscription-type", choices=SUBSCRIPTION_TYPES, default="Exclusive")
    p.add_argument("-sp", "--subscription-position", choices=SUBSCRIPTION_POSITIONS, default="Latest")
    p.add_argument(
        "-r",
        "--rate",
        type=_non_negative(float),
        default=0.0,
        help="simulate a slow consumer: messages/s in all; 0 = as they come",
    )
    p.add_argument("-q", "--receiver-queue-size", type=_non_negative(int), default=1000)
    p.add_argument(
        "--acks-delay-millis",
        type=_non_negative(float),
        default=100.0,
        help="acknowledgements are grouped and sent this often",
    )
    _duration(p, "messages to receive in total")
    _reporting(p)
    p.set_defaults(func=run_perf, make_options=_consume_options)


def _add_managed_ledger(modes: argparse._SubParsersAction) -> None:
    p = _mode(modes, "managed-ledger", "Write entries straight to the bookies (no broker); measure add latency.")
    p.add_argument(
        "-md",
        "--metadata-store",
        required=True,
        metavar="URL",
        help="where the bookies are registered, e.g. metastore://127.0.0.1:6680",
    )
    p.add_argument(
        "-r",
        "--rate",
        type=_non_negative(float),
        default=100.0,
        help="entries/s across all ledgers; 0 = as fast as possible",
    )
    p.add_argument("-s", "--size", type=_non_negative(int), default=1024, help="entry size (bytes)")
    p.add_argument(
        "-t",
        "--num-topic",
        "--num-ledgers",
        dest="num_ledgers",
        type=_positive(int),
        default=1,
        help="number of ledgers",
    )
    p.add_argument("-e", "--ensemble-size", type=_positive(int), default=1)
    p.add_argument("-w", "--write-quorum", type=_positive(int), default=1)
    p.add_argument("-a", "--ack-quorum", type=_positive(int), default=1)
    p.add_argument(
        "-o", "--max-outstanding", type=_non_negative(int), default=1000, help="maximum adds in flight (0: unbounded)"
    )
    _duration(p, "entries to write in total")
    p.add_argument(
        "--warmup-time", type=_non_negative(float), default=0.0, help="seconds whose latencies are not recorded"
    )
    p.add_argument(
        "-i",
        "--stats-interval-seconds",
        type=_positive(float),
        default=DEFAULT_STATS_INTERVAL_S,
        help="seconds between periodic lines",
    )
    p.add_argument("--json", metavar="FILE", type=Path, help="also write the figures to FILE as JSON")
    p.set_defaults(func=run_perf, make_options=_managed_ledger_options)


def _service(p: argparse.ArgumentParser) -> None:
    p.add_argument("-u", "--service-url", default=DEFAULT_SERVICE_URL, help="the broker's service URL")


def _duration(p: argparse.ArgumentParser, messages_help: str) -> None:
    p.add_argument("-m", "--num-messages", type=_non_negative(int), default=0, help=f"{messages_help}; 0 = no limit")
    p.add_argument(
        "-time",
        "--test-duration",
        type=_non_negative(float),
        default=0.0,
        help="seconds to run; 0 = until Ctrl-C (or -m)",
    )


def _reporting(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-i",
        "--stats-interval-seconds",
        type=_positive(float),
        default=DEFAULT_STATS_INTERVAL_S,
        help="seconds between periodic lines",
    )
    p.add_argument("--json", metavar="FILE", type=Path, help="also write the figures to FILE as JSON")
    p.add_argument(
        "--operation-timeout",
        type=_positive(float),
        default=30.0,
        metavar="SECONDS",
        help="give up on an unreachable cluster after this long",
    )


# -- flags → options ------------------------------------------------------------------------------


def _produce_options(args: argparse.Namespace) -> ProduceOptions:
    return ProduceOptions(
        topics=args.topics,
        service_url=args.service_url,
        rate_per_s=args.rate,
        size_bytes=args.size,
        num_topics=args.num_topics,
        num_producers=args.num_producers,
        num_messages=args.num_messages,
        duration_s=args.test_duration,
        warmup_s=args.warmup_time,
        batching=not args.disable_batching,
        batch_time_window_ms=args.batch_time_window,
        batch_max_messages=args.batch_max_messages,
        batch_max_bytes=args.batch_max_bytes,
        max_outstanding=args.max_outstanding,
        compression=args.compression,
        send_timeout_s=args.send_timeout,
        stats_interval_s=args.stats_interval_seconds,
        operation_timeout_s=args.operation_timeout,
        client=args.client,
    )


def _consume_options(args: argparse.Namespace) -> ConsumeOptions:
    subscriptions = [name.strip() for item in (args.subscriptions or ["sub"]) for name in item.split(",")]
    return ConsumeOptions(
        topics=args.topics,
        service_url=args.service_url,
        num_topics=args.num_topics,
        num_consumers=args.num_consumers,
        subscriptions=subscriptions,
        num_subscriptions=args.num_subscriptions,
        subscription_type=args.subscription_type,
        subscription_position=args.subscription_position,
        rate_per_s=args.rate,
        receiver_queue_size=args.receiver_queue_size,
        acks_delay_ms=args.acks_delay_millis,
        num_messages=args.num_messages,
        duration_s=args.test_duration,
        stats_interval_s=args.stats_interval_seconds,
        operation_timeout_s=args.operation_timeout,
    )


def _managed_ledger_options(args: argparse.Namespace) -> ManagedLedgerOptions:
    return ManagedLedgerOptions(
        metadata_url=args.metadata_store,
        rate_per_s=args.rate,
        size_bytes=args.size,
        num_ledgers=args.num_ledgers,
        ensemble_size=args.ensemble_size,
        write_quorum=args.write_quorum,
        ack_quorum=args.ack_quorum,
        max_outstanding=args.max_outstanding,
        num_messages=args.num_messages,
        duration_s=args.test_duration,
        warmup_s=args.warmup_time,
        stats_interval_s=args.stats_interval_seconds,
    )


# -- running --------------------------------------------------------------------------------------


def run_perf(args: argparse.Namespace) -> int:
    try:
        options = args.make_options(args)
    except ValueError as error:
        return _fail(str(error), EXIT_USAGE)
    _setup_logging()
    where = options.metadata_url if isinstance(options, ManagedLedgerOptions) else options.service_url
    from minipulsar.cli.perf import PerfInterrupted
    from minipulsar.net.loop import run

    try:
        result = run(_run_until_signal(options))
    except KeyboardInterrupt:  # the second Ctrl-C
        return EXIT_INTERRUPTED
    except PerfInterrupted as error:
        print(f"{error}: no figures", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except MiniPulsarError as error:
        return _fail(f"perf {args.perf_mode} against {where}: {_describe(error)}")
    except (OSError, TimeoutError, ValueError) as error:
        return _fail(f"perf {args.perf_mode} against {where}: {_describe(error)}")
    if args.json is not None:
        try:
            args.json.write_text(result.dumps())
        except OSError as error:
            return _fail(f"cannot write {args.json}: {error.strerror or error}")
    if result.error is not None:
        return _fail(f"the run stopped on an error: {result.error}")
    if result.failures:
        return _fail(f"{result.failures} messages failed")
    return EXIT_INTERRUPTED if result.interrupted else EXIT_OK


async def _run_until_signal(options: Options) -> PerfResult:
    """Run the mode ``options`` are for; the first SIGINT/SIGTERM ends it cleanly, a second
    SIGINT raises KeyboardInterrupt (Python's default handler, put back after the first)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def interrupted() -> None:
        stop.set()
        loop.remove_signal_handler(signal.SIGINT)

    loop.add_signal_handler(signal.SIGINT, interrupted)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        return await _run_mode(options, stop)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(signal.SIGTERM)


async def _run_mode(options: Options, stop: asyncio.Event) -> PerfResult:
    from minipulsar.cli import perf

    if isinstance(options, ProduceOptions):
        return await perf.run_produce(options, stop=stop)
    if isinstance(options, ConsumeOptions):
        return await perf.run_consume(options, stop=stop)
    return await perf.run_managed_ledger(options, stop=stop)


def _setup_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("minipulsar.client").setLevel(logging.ERROR)  # retries are reported once, by the final error


def _non_negative(kind: Callable[[str], Number]) -> Callable[[str], Number]:
    def parse(text: str) -> Number:
        value = kind(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its "invalid int value" message
    return parse


def _positive(kind: Callable[[str], Number]) -> Callable[[str], Number]:
    def parse(text: str) -> Number:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _describe(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _fail(message: str, code: int = EXIT_FAILED) -> int:
    print(f"error: {message}", file=sys.stderr, flush=True)
    return code
