"""Goal: ``bench/metadata_writes.py`` runs end to end with tiny settings — its own cluster, a
producer and an acking consumer with deduplication — and reports the metadata writes of its
window in the table and the JSON; the acks of the window cost no metadata write (a count, not
a timing: the window holds hundreds of acks and at most a load report and a ledger roll)."""

from __future__ import annotations

from pathlib import Path

from tests.support.bench_run import ROOT, bench_result, run_bench

BENCH = ROOT / "bench" / "metadata_writes.py"


def test_metadata_writes_bench_counts_the_writes_of_its_window(tmp_path: Path) -> None:
    result_path = tmp_path / "metadata.json"
    args = ["--secs", "2", "--warmup", "2", "--rate", "300", "--dedup", "--json", str(result_path)]
    completed = run_bench(str(BENCH), *args)
    result = bench_result(completed, result_path)
    assert "md writes/s" in completed.stdout, "the table"
    assert result["errors"] == 0 and result["consumed_msgs_per_s"] > 0
    window = result["ops_in_window"]
    assert window.get("put", 0) + window.get("del", 0) <= 4, window
    assert result["metadata_writes_per_s"] == (window.get("put", 0) + window.get("del", 0)) / 2
