"""Goal: a managed ledger's write-latency buckets count as Pulsar's ``StatsBuckets`` do — a
bound is inclusive, values above the last bound overflow — report the last complete stats
interval only, and are exported under Pulsar's gauge names.

Method: values on and around each bound into a :class:`StatsBuckets`, refreshed by hand."""

from __future__ import annotations

from minipulsar.broker.managed_ledger.stats_buckets import WRITE_LATENCY_BUCKETS_MS, StatsBuckets, bucket_metric_names


def test_a_bound_is_inclusive_and_what_passes_the_last_overflows() -> None:
    buckets = StatsBuckets(WRITE_LATENCY_BUCKETS_MS)
    for value in (0.0, 0.5, 0.50001, 1.0, 4.9, 1000.0, 1000.5, 60_000.0):
        buckets.add_value(value)
    buckets.refresh()
    assert buckets.buckets == (2, 2, 1, 0, 0, 0, 0, 0, 1, 2)
    assert buckets.count == 8 == sum(buckets.buckets)
    assert buckets.sum == 0.5 + 0.50001 + 1.0 + 4.9 + 1000.0 + 1000.5 + 60_000.0


def test_only_the_last_complete_interval_is_reported() -> None:
    buckets = StatsBuckets(WRITE_LATENCY_BUCKETS_MS)
    buckets.add_value(3.0)
    assert (buckets.buckets, buckets.count, buckets.sum) == ((0,) * 10, 0, 0.0), "nothing before the first refresh"
    buckets.refresh()
    buckets.add_value(30.0)
    buckets.add_value(30.0)
    assert (buckets.count, buckets.sum) == (1, 3.0), "values of the running interval are not reported yet"
    buckets.refresh()
    assert (buckets.buckets[5], buckets.count, buckets.sum) == (2, 2, 60.0)
    buckets.refresh()
    assert (buckets.buckets, buckets.count, buckets.sum) == ((0,) * 10, 0, 0.0), "an idle interval reports zeros"


def test_the_gauges_carry_pulsars_names() -> None:
    assert bucket_metric_names("pulsar_storage_write_latency", WRITE_LATENCY_BUCKETS_MS) == (
        "pulsar_storage_write_latency_le_0_5",
        "pulsar_storage_write_latency_le_1",
        "pulsar_storage_write_latency_le_5",
        "pulsar_storage_write_latency_le_10",
        "pulsar_storage_write_latency_le_20",
        "pulsar_storage_write_latency_le_50",
        "pulsar_storage_write_latency_le_100",
        "pulsar_storage_write_latency_le_200",
        "pulsar_storage_write_latency_le_1000",
        "pulsar_storage_write_latency_le_overflow",
    )
