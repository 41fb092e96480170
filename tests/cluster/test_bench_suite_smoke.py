"""Goal: ``python -m bench`` runs a scenario end to end — probes, its own cluster (real
processes), a measured run — and writes the JSON, the Markdown summary and (with matplotlib)
the PNG chart; ``--into latest`` adds a scenario to the same run and summary; ``--disk-model``
labels every report SIMULATED; every row is measured by ``minipulsar perf`` (its figures and
periodic intervals), the peers table's minipulsar and peer rows alike.

Method: run the suite as a user would (a subprocess from the project root), with one bookie,
one rate and sub-second runs; check the files and that their figures agree. No timing
assertions: the figures depend on the machine.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bench_run import ROOT, run_bench

TINY = ["--bookies", "1", "--duration", "0.6", "--warmup", "0.2", "--probe-secs", "0.1", "--interval", "0.3"]


def run_suite(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    results = ["--out", str(tmp_path / "results")]
    dirs = ["--journal-dir", str(tmp_path / "journal"), "--ledger-dir", str(tmp_path / "ledgers")]
    return run_bench("-m", "bench", *TINY, *results, *dirs, *args)


def test_one_scenario_writes_json_markdown_and_chart_and_into_adds_to_the_same_run(tmp_path: Path) -> None:
    first = run_suite(tmp_path, "--scenarios", "latency", "--rates", "300", "--disk-model", "hdd:fsync_ms=1,mb_s=0")
    run_dir = (tmp_path / "results" / "latest").resolve()
    assert f"summary: {run_dir / 'summary.md'}" in first.stdout
    assert "[1/1 latency]" in first.stderr, "progress lines name the scenario"

    latency = json.loads((run_dir / "latency.json").read_text())
    assert "error" not in latency
    (row,) = latency["rows"]
    assert row["target_rate"] == 300 and row["messages"] > 0 and row["failures"] == 0
    assert row["latency"]["p99_ms"] > 0 and row["msg_per_s"] > 0
    assert "journal_device_flushes_per_s" in row and row["memory"]["broker_rss_mb"] > 0
    assert latency["simulated_disk_model"]["label"].startswith("SIMULATED hdd")
    timeline = row["timeline"]
    assert sum(bucket[1] for bucket in timeline["buckets"]) == row["latency"]["count"], "every sample, once"
    assert timeline["reporting"] == {"bookie": 1, "broker": 1}, "every server reported its events"
    run_info = json.loads((run_dir / "run.json").read_text())
    assert run_info["probes"]["journal"]["fsyncs_per_s_4k"] > 0
    assert run_info["probes"]["journal"]["seq_write_mb_per_s"] > 0
    assert not list((tmp_path / "journal").iterdir()), "the bookies' dirs are removed from the user's mount"

    summary = (run_dir / "summary.md").read_text()
    assert "SIMULATED DISK" in summary and "## latency" in summary
    assert f"{row['msg_per_s']:,.0f}" in summary, "the table shows the JSON's figure"
    if importlib.util.find_spec("matplotlib") is not None:
        assert (run_dir / "latency.png").stat().st_size > 0
        assert (run_dir / "timeline.png").stat().st_size > 0

    run_suite(tmp_path, "--into", "latest", "--scenarios", "size", "--sizes", "1024")
    assert (tmp_path / "results" / "latest").resolve() == run_dir, "--into adds to the run, not a new one"
    size = json.loads((run_dir / "size.json").read_text())
    assert [(r["size_bytes"], r["batching"]) for r in size["rows"]] == [(1024, True), (1024, False)]
    assert all(r["mode"] == "produce" and r["messages"] > 0 and r["intervals"] for r in size["rows"])
    assert size["engine"].startswith("`minipulsar perf`")
    summary = (run_dir / "summary.md").read_text()
    assert "## latency" in summary and "## size" in summary, "the summary covers both invocations"
    assert "batched single-producer throughput, 1 KiB" in summary


def test_peers_rows_are_measured_alike_with_a_consumer_beside_each_producer(tmp_path: Path) -> None:
    """Goal: the peers table's minipulsar rows run ``perf produce`` with ``perf consume``
    beside it, and every peer that ran has the same figures, from the same measurement.
    Method: ``--scenarios peers`` with one bookie and sub-second runs; peers whose server is
    not installed are skipped rows; the row measured by a server's own client has its own figures."""
    run_suite(tmp_path, "--scenarios", "peers")
    peers = json.loads(((tmp_path / "results" / "latest") / "peers.json").read_text())
    assert "error" not in peers
    ran = [row for row in peers["rows"] if "skipped" not in row and not row.get("own_client")]
    for row in peers["rows"]:  # a server driven by its own client (redis-benchmark): its figures
        if row.get("own_client") and "skipped" not in row:
            assert row["msg_per_s"] > 0 and row["stored_value_bytes"] == peers["size_bytes"], row
    assert [row["system"] for row in ran[:3]] == [
        "minipulsar, batched",
        "minipulsar, unbatched",
        "minipulsar 1 bookie, batched",
    ]
    for row in ran:
        assert row["mode"] == "produce" and row["messages"] > 0 and row["failures"] == 0, row["system"]
        assert 0 < row["latency"]["count"] <= row["messages"] and row["latency"]["p99_ms"] > 0, row["system"]
        assert row["intervals"], "perf's periodic figures"
        assert 0 <= row["received"] <= row["messages"], (row["system"], row["received"], row["messages"])
    for row in ran[:3]:  # a peer's own consumer may start delivering only after a sub-second run
        assert row["received"] > 0 and row["receive_msg_per_s"] > 0, row["system"]
        assert 0 < row["end_to_end_latency"]["count"] <= row["received"], "perf consume's end-to-end latency"


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_leaves_no_process_and_no_directory(tmp_path: Path, signum: int) -> None:
    """Goal: SIGINT or SIGTERM in the middle of a measured run stops every server the bench
    started and removes their data and temp dirs. Method: all the bench's temp dirs under
    ``tmp_path`` (TMPDIR); signal it once perf's first run begins; then no process names
    ``tmp_path`` and no file is left but the (empty) mounts and the results directory."""
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    bench = subprocess.Popen(
        [sys.executable, "-m", "bench", *TINY, "--duration", "30", "--scenarios", "size", "--sizes", "1024"]
        + [
            "--out",
            str(tmp_path / "results"),
            "--journal-dir",
            str(tmp_path / "j"),
            "--ledger-dir",
            str(tmp_path / "l"),
        ],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # a shell's background job (CI started with `&`) hands its children SIGINT ignored, and
        # Python then keeps ignoring it: give the bench the default disposition a terminal has
        preexec_fn=_default_sigint,  # noqa: PLW1509 -- one signal() call between fork and exec, no lock taken
    )
    try:
        assert bench.stderr is not None
        for line in bench.stderr:  # the first measured run has begun
            if "batching on" in line:
                break
        bench.send_signal(signum)
        assert "interrupted" in bench.stderr.read()
        assert bench.wait(60) == 130
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    assert not _pids_naming(tmp_path), "a server outlived the bench"
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if "results" not in p.parts)
    assert left == ["j", "l", "tmp"]


def _pids_naming(path: Path) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(path).encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue  # the process ended meanwhile
    return found


def test_consume_rows_measure_tailing_and_catch_up_with_cpu_per_message(tmp_path: Path) -> None:
    """Goal: the consume scenario's two rows — a consumer beside a producer, then a new
    subscription reading a published backlog — each with msg/s and every process's CPU per
    message. Method: ``--scenarios consume`` with one bookie, sub-second runs, a tiny backlog."""
    run_suite(tmp_path, "--scenarios", "consume", "--consume-backlog", "3000")
    result = json.loads((tmp_path / "results" / "latest" / "consume.json").read_text())
    assert "error" not in result
    tailing, catch_up = result["rows"]
    assert tailing["mode"] == "tailing" and 0 < tailing["consumed"] <= tailing["messages"]
    assert catch_up["mode"] == "catch-up" and catch_up["consumed"] == catch_up["backlog"] == 3000
    for row in (tailing, catch_up):
        assert row["consume_msg_per_s"] > 0 and set(row["cpu_us_per_msg"]) == {"bench", "broker", "bookies"}
    summary = (tmp_path / "results" / "latest" / "summary.md").read_text()
    assert "catch-up consume, 1 KiB" in summary
