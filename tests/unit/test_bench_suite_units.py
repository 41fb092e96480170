"""Goal: the pure parts of the benchmark suite do what the reports rely on — the SIMULATED disk
model's spec and timing (bookie/disk_model.py), the peers' RESP parser, the window rule, and
the headline figures the summary quotes, and the bench's temp dirs.

Method: direct calls; timing checks are lower bounds only (a sleep never returns early).
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from bench.common import bench_dirs
from bench.peers.resp import RedisError, encode, parse
from bench.suite import report
from bench.suite.profiles import PROFILES
from minipulsar.bookie import disk_model
from minipulsar.bookie.disk_model import DiskModel, DiskModelSpec
from minipulsar.errors import ConfigError


def test_disk_model_spec_takes_a_preset_and_overrides_and_refuses_the_rest() -> None:
    assert DiskModelSpec.parse("hdd") == DiskModelSpec("hdd", 8.0, 120.0, False)
    assert DiskModelSpec.parse("hdd:fsync_ms=2.5,mb_s=0,same_device=1") == DiskModelSpec("hdd", 2.5, 0.0, True)
    assert "SIMULATED" in DiskModelSpec.parse("ssd").describe()
    for bad in ("tape", "hdd:seek_ms=3", "hdd:fsync_ms=-1", "hdd:mb_s=fast", "hdd:fsync_ms"):
        with pytest.raises(ConfigError):
            DiskModelSpec.parse(bad)


def test_disk_model_install_is_off_by_default_and_on_when_named() -> None:
    try:
        assert disk_model.install(None) is None and disk_model.MODEL is None
        assert disk_model.install("") is None
        model = disk_model.install("hdd:fsync_ms=1")
        assert disk_model.MODEL is model and model.spec.fsync_ms == 1
    finally:
        disk_model.install(None)


def test_disk_model_charges_fsync_latency_and_bandwidth() -> None:
    model = DiskModel(DiskModelSpec("hdd", fsync_ms=10, mb_s=100))
    started = time.monotonic()
    model.wrote("/journal", 2_000_000, synced=True)  # 10 ms + 2 MB / 100 MB/s = 30 ms
    assert time.monotonic() - started >= 0.030
    started = time.monotonic()
    model.wrote("/journal", 0, synced=False)  # nothing written, nothing synced: free
    assert time.monotonic() - started < 0.030


def test_one_modelled_device_serves_one_writer_at_a_time() -> None:
    model = DiskModel(DiskModelSpec("hdd", fsync_ms=20, mb_s=0, same_device=True))
    threads = [threading.Thread(target=model.wrote, args=(path, 0, True)) for path in ("/journal", "/ledgers")]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert time.monotonic() - started >= 0.040, "same_device: the second sync waits for the first"
    separate = DiskModel(DiskModelSpec("hdd", fsync_ms=1, mb_s=0))
    separate.wrote("/journal", 0, True)
    separate.wrote("/ledgers", 0, True)
    assert len(separate._devices) == 2, "by default each directory is its own device"


def test_resp_parser_reads_whole_replies_only() -> None:
    assert encode("XADD", "s", "*", "d", b"xy") == b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n$1\r\nd\r\n$2\r\nxy\r\n"
    assert parse(b"$3\r\n1-0\r\n+OK\r\n") == (b"1-0", 9)
    assert parse(b"$3\r\n1-0\r\n+OK\r\n", 9) == (b"OK", 14)
    nested = b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nd\r\n$1\r\nx\r\n"
    assert parse(nested) == ([[b"s", [[b"1-0", [b"d", b"x"]]]]], len(nested))
    for cut in range(1, len(nested)):
        assert parse(nested[:cut]) is None, "an incomplete reply is left for the next read"
    error, _ = parse(b"-ERR wrong\r\n")
    assert isinstance(error, RedisError) and "wrong" in str(error)
    assert parse(b"$-1\r\n") == (None, 5)


def test_window_caps_bytes_in_flight() -> None:
    quick = PROFILES["quick"]
    assert quick.window(1024) == quick.max_outstanding
    assert quick.window(64 * 1024) == quick.window_bytes_max // (64 * 1024)
    assert quick.window(10**9) == 1


def test_headline_quotes_the_issue_figures_and_only_real_peers() -> None:
    results = {
        "size": {
            "rows": [
                {"size_bytes": 1024, "batching": False, "msg_per_s": 10.0, "mb_per_s": 0.01},
                {"size_bytes": 1024, "batching": True, "msg_per_s": 50_000.0, "mb_per_s": 51.2},
            ]
        },
        "latency": {
            "rows": [
                {"target_rate": 1_000, "msg_per_s": 1_000, "latency": {"p99_ms": 2.0}},
                {
                    "target_rate": 10_000,
                    "msg_per_s": 9_990,
                    "latency": {"p99_ms": 7.5, "max_ms": 9.0},
                    "intended_latency": {"p99_ms": 8.5, "max_ms": 12.0},
                },
            ]
        },
        "disks": {"ratio_64k_to_journal_seq": 0.25, "mb_per_s_64k": 250.0, "journal_seq_write_mb_per_s": 1000.0},
        "peers": {
            "reference": "minipulsar, batched",
            "rows": [
                {"system": "minipulsar, batched", "minipulsar_ratio": 1.0},
                {"system": "minipulsar, unbatched", "minipulsar_ratio": 5.0},
                {"system": "redis streams, appendfsync always", "minipulsar_ratio": 2.0},
                {"system": "nats jetstream, sync always", "skipped": "not installed"},
            ],
        },
    }
    h = report.headline(results)
    assert h["batched_1k_msg_per_s"] == 50_000.0
    assert h["p99_ms_at_10k"] == 8.5 and h["max_ms_at_10k"] == 12.0  # coordinated omission corrected
    assert h["ratio_64k_to_journal_seq"] == 0.25
    assert h["peer_ratios"] == {"redis streams, appendfsync always": 2.0}
    assert not h["simulated"]
    lines = report.headline_lines(results)
    assert any("50,000 msg/s" in line for line in lines) and any("8.50 ms, max 12.00 ms" in line for line in lines)


def test_a_missing_peer_server_gives_a_reason_to_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.peers import nats_jetstream, redis_benchmark, redis_streams

    monkeypatch.setattr(redis_streams.shutil, "which", lambda _name: None)
    assert "redis-server not found" in redis_streams.unavailable_reason()
    monkeypatch.setattr(redis_benchmark.shutil, "which", lambda name: None if name == "redis-benchmark" else name)
    assert "redis-tools" in (redis_benchmark.unavailable_reason() or "")
    monkeypatch.setattr(nats_jetstream, "server_binary", lambda: None)
    assert "nats-server not found" in nats_jetstream.unavailable_reason()
    config = nats_jetstream.server_config(4222, Path("/data/js"))
    assert "sync_interval: always" in config and "listen: 127.0.0.1:4222" in config


def test_a_failed_run_keeps_the_servers_logs_and_drops_its_data(tmp_path: Path) -> None:
    with pytest.raises(SystemExit), bench_dirs(str(tmp_path / "j"), str(tmp_path / "l")) as (journal, ledgers, logs):
        (logs / "bookie.log").write_text("why it failed")
        raise SystemExit("the bookie did not answer")
    try:
        assert (logs / "bookie.log").read_text() == "why it failed"
        assert not journal.exists() and not ledgers.exists()
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    with bench_dirs(str(tmp_path / "j"), str(tmp_path / "l")) as (_, _, logs):
        pass
    assert not logs.exists()


def test_the_timeline_pairs_slow_buckets_with_the_events_near_them() -> None:
    from bench.suite import timeline
    from minipulsar.cli.perf.timeline import Bucket

    start = 100.0
    buckets = [Bucket(start + 0.1 * (i + 1), 1000, 4.0, 5.0) for i in range(20)]
    buckets[10] = Bucket(start + 1.1, 1000, 40.0, 45.0)
    events = [
        {"t": start + 1.02, "kind": "checkpoint", "role": "bookie", "duration_ms": 60.0, "bytes": 33_000_000},
        {"t": start + 1.5, "kind": "loop_lag", "role": "perf", "duration_ms": 3.0},
        {"t": start - 5.0, "kind": "gc", "role": "broker", "duration_ms": 1.0, "generation": 2},  # before the run
    ]
    built = timeline.build(buckets, events, start, start + 2.0)
    assert built["buckets"][10] == [1.1, 1000, 40.0, 45.0]
    assert built["event_counts"] == {"bookie:checkpoint": 1, "perf:loop_lag": 1}
    (slow,) = built["slow"]
    assert slow["t"] == 1.1 and slow["near"] == ["bookie:checkpoint 60.0ms 33.0MB"]
    assert timeline.worst(built) == {"worst_bucket_p99_ms": 40.0, "worst_bucket_max_ms": 45.0}


def test_the_redis_c_client_row_xadds_a_literal_value_and_reads_redis_benchmarks_csv() -> None:
    from bench.peers import redis_benchmark

    argv = redis_benchmark.benchmark_argv(6379, 1000, 1024)
    assert argv[:9] == ["redis-benchmark", "-p", "6379", "-P", "100", "-c", "10", "-n", "1000"]
    assert argv[-5:-1] == ["XADD", "bench-stream", "*", "f"] and argv[-1] == "x" * 1024
    csv_text = (
        '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms",'
        '"max_latency_ms"\n"XADD bench-stream * f xx","51921.38","4.292","0.4","2.407","12.399","21.823","87.679"\n'
    )
    figures = redis_benchmark.parse_csv(csv_text)
    assert figures["rps"] == 51921.38 and figures["p99_latency_ms"] == 21.823
    with pytest.raises(RuntimeError):
        redis_benchmark.parse_csv(csv_text.splitlines()[0])
