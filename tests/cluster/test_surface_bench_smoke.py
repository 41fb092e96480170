"""Goal: ``bench/client_bench.py`` runs end to end with tiny settings — its own cluster, both
batching modes — and reports every figure the issue names (throughput with batching on and
off, the client's CPU per message) in the table and the JSON. No timing assertions."""

from __future__ import annotations

from pathlib import Path

from tests.support.bench_run import ROOT, bench_result, run_bench

BENCH = ROOT / "bench" / "client_bench.py"


def test_client_bench_reports_both_modes_and_the_clients_cpu_per_message(tmp_path: Path) -> None:
    result_path = tmp_path / "client.json"
    completed = run_bench(str(BENCH), "--messages", "300", "--warmup-messages", "20", "--json", str(result_path))
    result = bench_result(completed, result_path)
    assert "client µs/msg" in completed.stdout, "the table"
    for mode in ("on", "off"):
        assert result[f"msgs_per_s_batching_{mode}"] > 0
        assert result[f"client_cpu_us_per_msg_batching_{mode}"] > 0
    assert [(run["batching"], run["messages"], run["errors"]) for run in result["runs"]] == [
        (True, 300, 0),
        (False, 300, 0),
    ]
