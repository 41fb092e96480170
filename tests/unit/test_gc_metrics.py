"""Goal: ``python_gc_collection_seconds`` times each garbage collection from its start phase
to its stop phase, per generation, exports the three generations before any collection, and
is installed once per process.

Method: the ``gc.callbacks`` entry fed phases by hand with a manual clock; then installed on
its own registry and a real full collection run."""

from __future__ import annotations

import gc

from prometheus_client import CollectorRegistry

from minipulsar import gc_metrics
from minipulsar.gc_metrics import GcPauses
from tests.support.clock import ManualClock


def collected(registry_or_pauses: CollectorRegistry | GcPauses) -> dict[tuple[str, str, str | None], float]:
    """(sample name, generation, le) → value."""
    return {
        (s.name, s.labels["generation"], s.labels.get("le")): s.value
        for family in registry_or_pauses.collect()
        for s in family.samples
    }


def test_each_collection_is_timed_from_start_to_stop_by_generation() -> None:
    clock = ManualClock()
    pauses = GcPauses(clock)
    samples = collected(pauses)
    assert {(gen, samples[("python_gc_collection_seconds_count", gen, None)]) for gen in "012"} == {
        ("0", 0.0),
        ("1", 0.0),
        ("2", 0.0),
    }, "every generation is exported before its first collection"
    pauses("start", {"generation": 0})
    clock.advance(0.0003)
    pauses("stop", {"generation": 0, "collected": 5})
    pauses("start", {"generation": 2})
    clock.advance(0.2)
    pauses("stop", {"generation": 2, "collected": 0})
    samples = collected(pauses)
    assert samples[("python_gc_collection_seconds_bucket", "0", "0.0005")] == 1
    assert samples[("python_gc_collection_seconds_bucket", "0", "0.00025")] == 0
    assert samples[("python_gc_collection_seconds_bucket", "2", "0.1")] == 0
    assert samples[("python_gc_collection_seconds_bucket", "2", "0.25")] == 1
    assert samples[("python_gc_collection_seconds_count", "1", None)] == 0
    assert abs(samples[("python_gc_collection_seconds_sum", "2", None)] - 0.2) < 1e-9


def test_installed_once_it_counts_real_collections(monkeypatch) -> None:
    monkeypatch.setattr(gc_metrics, "_INSTALLED", gc_metrics._Installed())
    registry = CollectorRegistry()
    pauses = gc_metrics.install(registry)
    try:
        assert gc_metrics.install(registry) is pauses and gc.callbacks.count(pauses) == 1
        before = collected(registry)[("python_gc_collection_seconds_count", "2", None)]
        gc.collect()
        assert collected(registry)[("python_gc_collection_seconds_count", "2", None)] == before + 1
    finally:
        gc.callbacks.remove(pauses)
