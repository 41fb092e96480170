"""The hot-path latency histograms: plain bucket counters exported as prometheus histograms
(cumulative ``_bucket``, ``_count``, ``_sum`` in ms), merged over per-thread counters."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from minipulsar.bookie.metrics import FastHistogram, ledger_dir_usage_name


def _samples(histogram: FastHistogram) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value for family in histogram.collect() for s in family.samples
    }


def test_counts_export_as_cumulative_buckets_in_milliseconds(monkeypatch) -> None:
    monkeypatch.setattr("minipulsar.bookie.metrics.REGISTRY", CollectorRegistry())
    histogram = FastHistogram("test_fast_latency", "test", ("success",), bounds_ms=(1, 10))
    ok = histogram.counts("true")
    ok.record(0.0005)  # 0.5 ms
    ok.record(0.001)  # exactly 1 ms: le="1.0"
    ok.record(0.005, times=3)
    ok.record(0.5)
    samples = _samples(histogram)
    bucket = "test_fast_latency_bucket"
    assert samples[(bucket, (("le", "1.0"), ("success", "true")))] == 2
    assert samples[(bucket, (("le", "10.0"), ("success", "true")))] == 5
    assert samples[(bucket, (("le", "+Inf"), ("success", "true")))] == 6
    assert samples[("test_fast_latency_count", (("success", "true"),))] == 6
    assert abs(samples[("test_fast_latency_sum", (("success", "true"),))] - (0.5 + 1 + 15 + 500)) < 1e-6


def test_counts_of_several_threads_add_up(monkeypatch) -> None:
    monkeypatch.setattr("minipulsar.bookie.metrics.REGISTRY", CollectorRegistry())
    histogram = FastHistogram("test_fast_merged", "test", bounds_ms=(1,))
    first, second = histogram.counts(shared=False), histogram.counts(shared=False)
    assert first is not second and histogram.counts() is histogram.counts()
    first.record(0.0001)
    second.record(0.002, times=2)
    samples = _samples(histogram)
    assert samples[("test_fast_merged_bucket", (("le", "1.0"),))] == 1
    assert samples[("test_fast_merged_count", ())] == 3


def test_a_ledger_dirs_usage_gauge_is_named_as_bookkeeper_names_it() -> None:
    """Every character of the path but ``[a-zA-Z0-9_]`` becomes ``_``, so any path makes a
    valid Prometheus name."""
    assert ledger_dir_usage_name("/data/bookkeeper/ledgers") == "bookie_ledger_dir__data_bookkeeper_ledgers_usage"
    assert ledger_dir_usage_name("data/ledgers-1.d") == "bookie_ledger_dir_data_ledgers_1_d_usage"
    assert ledger_dir_usage_name("/mnt/disk é:2/L_x") == "bookie_ledger_dir__mnt_disk___2_L_x_usage"
