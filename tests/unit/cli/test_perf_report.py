"""pulsar-perf's line layout, the JSON result, topic expansion, options and CLI flags."""

from __future__ import annotations

import json

import pytest

from minipulsar.cli.main import build_parser
from minipulsar.cli.perf import ConsumeOptions, ManagedLedgerOptions, PerfResult, ProduceOptions
from minipulsar.cli.perf.report import CONSUME, MANAGED_LEDGER, PRODUCE, interval_line
from minipulsar.cli.perf.stats import IntervalStats, LatencySummary
from minipulsar.cli.perf.topics import expand_subscriptions, expand_topics

LATENCY = LatencySummary(
    count=10,
    mean_ms=3.5123,
    p50_ms=3.521,
    p95_ms=5.695,
    p99_ms=8.167,
    p999_ms=10.879,
    p9999_ms=11.943,
    p99999_ms=12.0,
    max_ms=12.5,
)
WHOLE_MS = LatencySummary(
    count=10, mean_ms=3.244, p50_ms=3, p95_ms=8, p99_ms=14, p999_ms=17, p9999_ms=18, p99999_ms=18, max_ms=19
)


def interval(latency: LatencySummary) -> IntervalStats:
    return IntervalStats(
        elapsed_s=1.0,
        total_messages=3994,
        messages=1997,
        msg_per_s=1998.3,
        mbit_per_s=15.61,
        failures_per_s=0.0,
        acks_per_s=1998.3,
        latency=latency,
    )


def test_produce_line_has_pulsar_perfs_layout() -> None:
    assert interval_line(PRODUCE, interval(LATENCY)) == (
        "Throughput produced:    3994 msg ---   1998.3 msg/s ---     15.6 Mbit/s --- failure      0.0 msg/s"
        " --- Latency: mean:   3.512 ms - med:   3.521 - 95pct:   5.695 - 99pct:   8.167 - 99.9pct:  10.879"
        " - 99.99pct:  11.943 - Max:  12.500"
    )


def test_managed_ledger_line_has_no_failure_rate() -> None:
    assert interval_line(MANAGED_LEDGER, interval(LATENCY)) == (
        "Throughput produced:    3994 msg ---   1998.3 msg/s ---     15.6 Mbit/s"
        " --- Latency: mean:   3.512 ms - med:   3.521 - 95pct:   5.695 - 99pct:   8.167 - 99.9pct:  10.879"
        " - 99.99pct:  11.943 - Max:  12.500"
    )


def test_consume_line_prints_whole_millisecond_percentiles() -> None:
    assert interval_line(CONSUME, interval(WHOLE_MS)) == (
        "Throughput received:    3994 msg --- 1998.300 msg/s --- 15.610 Mbit/s --- Latency: mean: 3.244 ms"
        " - med: 3 - 95pct: 8 - 99pct: 14 - 99.9pct: 17 - 99.99pct: 18 - Max: 19"
    )


def test_aggregate_lines_of_produce_and_consume() -> None:
    produced = PerfResult(mode=PRODUCE, messages=6000, msg_per_s=1995.4485, mbit_per_s=15.5894, latency=LATENCY)
    assert produced.aggregate_lines() == [
        "Aggregated throughput stats --- 6000 records sent --- 1995.448 msg/s --- 15.589 Mbit/s",
        "Aggregated latency stats --- Latency: mean:   3.512 ms - med:   3.521 - 95pct:   5.695 - 99pct:   8.167"
        " - 99.9pct:  10.879 - 99.99pct:  11.943 - 99.999pct:  12.000 - Max:  12.500",
    ]
    received = PerfResult(
        mode=CONSUME,
        messages=5998,
        msg_per_s=1498.735,
        mbit_per_s=11.709,
        ack_per_s=1498.7,
        ack_failures=2,
        latency=WHOLE_MS,
    )
    assert received.aggregate_lines() == [
        "Aggregated throughput stats --- 5998 records received --- 1498.735 msg/s --- 11.709 Mbit/s"
        " --- AckRate: 1498.7 msg/s --- ack failed 2 msg",
        "Aggregated latency stats --- Latency: mean: 3.244 ms - med: 3 - 95pct: 8 - 99pct: 14 - 99.9pct: 17"
        " - 99.99pct: 18 - 99.999pct: 18 - Max: 19",
    ]


def test_json_has_the_figures_in_ms_and_the_intervals() -> None:
    result = PerfResult(
        mode=PRODUCE,
        messages=10,
        bytes=10240,
        failures=1,
        duration_s=2.0,
        msg_per_s=5.0,
        mbit_per_s=0.04,
        mb_per_s=0.005,
        latency=LATENCY,
        intervals=[interval(LATENCY)],
        targets=["persistent://public/default/t"],
        options={"rate_per_s": 5.0},
    )
    data = json.loads(result.dumps())
    assert data["mode"] == "produce" and data["latency_kind"] == "publish"
    assert {k: data[k] for k in ("messages", "bytes", "failures", "duration_s", "msg_per_s", "mbit_per_s")} == {
        "messages": 10,
        "bytes": 10240,
        "failures": 1,
        "duration_s": 2.0,
        "msg_per_s": 5.0,
        "mbit_per_s": 0.04,
    }
    assert data["latency"]["p99_ms"] == 8.167 and data["latency"]["p99999_ms"] == 12.0
    assert data["intervals"][0]["latency"]["max_ms"] == 12.5
    assert data["options"] == {"rate_per_s": 5.0} and data["interrupted"] is False and data["error"] is None


def test_one_topic_with_num_topics_expands_like_pulsar_perf() -> None:
    assert expand_topics(["my-topic"], 3) == [f"persistent://public/default/my-topic-{i}" for i in range(3)]
    assert expand_topics(["a", "t/n/b"]) == ["persistent://public/default/a", "persistent://t/n/b"]
    assert expand_topics(["a"], 1) == ["persistent://public/default/a"]
    with pytest.raises(ValueError, match="2 topics given but --num-topics is 3"):
        expand_topics(["a", "b"], 3)
    assert expand_subscriptions(["sub"], 2) == ["sub-0", "sub-1"]
    assert expand_subscriptions(["x", "y"]) == ["x", "y"]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: ProduceOptions(topics=["t"], rate_per_s=-1), "rate must be >= 0"),
        (lambda: ProduceOptions(topics=["t"], compression="SNAPPY"), "compression must be one of"),
        (lambda: ProduceOptions(topics=["a/b"]), "invalid topic name"),
        (lambda: ProduceOptions(topics=["a", "b"], num_topics=3), "2 topics given"),
        (lambda: ConsumeOptions(topics=["t"], subscriptions=[]), "at least one subscription"),
        (lambda: ConsumeOptions(topics=["t"], num_consumers=2), "Only one consumer is allowed"),
        (lambda: ConsumeOptions(topics=["t"], subscription_type="Bogus"), "subscription type must be one of"),
        (
            lambda: ManagedLedgerOptions(metadata_url="metastore://h:1", ensemble_size=1, write_quorum=2),
            "ensemble >= write quorum >= ack quorum",
        ),
    ],
)
def test_bad_options_are_refused(make, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_batching_is_off_with_db_or_with_neither_window_nor_message_limit() -> None:
    assert ProduceOptions(topics=["t"]).batching_enabled
    assert not ProduceOptions(topics=["t"], batching=False).batching_enabled
    assert not ProduceOptions(topics=["t"], batch_time_window_ms=0, batch_max_messages=0).batching_enabled


def options_of(argv: list[str]):
    args = build_parser().parse_args(argv)
    return args.make_options(args)


def test_produce_flags_map_to_options_with_pulsar_perf_defaults() -> None:
    defaults = options_of(["perf", "produce", "t"])
    assert (
        defaults.rate_per_s,
        defaults.size_bytes,
        defaults.warmup_s,
        defaults.batch_time_window_ms,
        defaults.stats_interval_s,
        defaults.service_url,
    ) == (100.0, 1024, 1.0, 1.0, 10.0, "pulsar://localhost:6650")
    options = options_of(
        [
            "perf",
            "produce",
            "t",
            "-r",
            "2000",
            "-s",
            "512",
            "-t",
            "4",
            "-n",
            "2",
            "-m",
            "9",
            "-time",
            "3",
            "--warmup-time",
            "0.5",
            "-b",
            "5",
            "-bm",
            "50",
            "-bb",
            "65536",
            "-db",
            "-o",
            "77",
            "-z",
            "lz4",
            "-i",
            "1",
            "-u",
            "pulsar://h:1",
        ]
    )
    assert (
        options.rate_per_s,
        options.size_bytes,
        options.num_topics,
        options.num_producers,
        options.num_messages,
        options.duration_s,
        options.warmup_s,
        options.batch_time_window_ms,
        options.batch_max_messages,
        options.batch_max_bytes,
        options.batching,
        options.max_outstanding,
        options.compression,
        options.stats_interval_s,
        options.service_url,
    ) == (2000.0, 512, 4, 2, 9, 3.0, 0.5, 5.0, 50, 65536, False, 77, "LZ4", 1.0, "pulsar://h:1")


def test_consume_and_managed_ledger_flags_map_to_options() -> None:
    consume = options_of(
        [
            "perf",
            "consume",
            "t",
            "-n",
            "3",
            "-st",
            "Shared",
            "-sp",
            "Earliest",
            "-ss",
            "a,b",
            "-q",
            "10",
            "-r",
            "5",
            "-m",
            "100",
            "-time",
            "7",
        ]
    )
    assert (
        consume.num_consumers,
        consume.subscription_type,
        consume.subscription_position,
        consume.subscriptions,
        consume.receiver_queue_size,
        consume.rate_per_s,
        consume.num_messages,
        consume.duration_s,
    ) == (3, "Shared", "Earliest", ["a", "b"], 10, 5.0, 100, 7.0)
    assert options_of(["perf", "consume", "t"]).subscriptions == ["sub"]
    ledger = options_of(
        [
            "perf",
            "managed-ledger",
            "-md",
            "metastore://h:1",
            "-e",
            "3",
            "-w",
            "2",
            "-a",
            "2",
            "-t",
            "4",
            "-o",
            "10",
            "-r",
            "0",
            "-s",
            "100",
            "-time",
            "2",
        ]
    )
    assert (
        ledger.metadata_url,
        ledger.ensemble_size,
        ledger.write_quorum,
        ledger.ack_quorum,
        ledger.num_ledgers,
        ledger.max_outstanding,
        ledger.rate_per_s,
        ledger.size_bytes,
        ledger.duration_s,
    ) == ("metastore://h:1", 3, 2, 2, 4, 10, 0.0, 100, 2.0)
    defaults = options_of(["perf", "managed-ledger", "-md", "metastore://h:1"])
    assert (
        defaults.ensemble_size,
        defaults.write_quorum,
        defaults.ack_quorum,
        defaults.max_outstanding,
        defaults.rate_per_s,
    ) == (1, 1, 1, 1000, 100.0)


def test_negative_rate_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["perf", "produce", "t", "-r", "-1"])
    assert exit_info.value.code == 2
