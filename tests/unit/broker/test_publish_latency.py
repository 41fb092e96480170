"""Goal: ``pulsar_broker_publish_latency`` is Pulsar's summary — quantiles 0.0 … 1.0 of the
last complete stats interval (NaN while it had no sample), ``_count`` and ``_sum`` since start
— in milliseconds, labelled ``cluster``.

Method: samples into a :class:`LatencyWindow` rolled over by hand; its exposition read back
with prometheus-client's own writer and parser."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from minipulsar.broker.publish_latency import QUANTILES, LatencyWindow, summary_metric


class OneSummary:
    def __init__(self, window: LatencyWindow) -> None:
        self.window = window

    def collect(self):
        yield summary_metric("pulsar_broker_publish_latency", "doc", "c1", self.window)


def scraped(window: LatencyWindow) -> dict[tuple[str, str | None], float]:
    """(sample name, quantile label) → value, as a scrape parses it."""
    registry = CollectorRegistry()
    registry.register(OneSummary(window))
    text = generate_latest(registry).decode()
    return {
        (sample.name, sample.labels.get("quantile")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.labels["cluster"] == "c1"
    }


def test_quantiles_are_nan_until_an_interval_with_samples_ended() -> None:
    window = LatencyWindow()
    window.record(2.0)
    assert all(math.isnan(window.quantile(q)) for q in QUANTILES), "the running interval is not reported"
    assert (window.count, window.sum_ms) == (1, 2.0)
    window.rollover()
    assert math.isclose(window.quantile(0.5), 2.0, rel_tol=0.01)
    window.rollover()
    assert math.isnan(window.quantile(0.5)) and window.count == 1, "an idle interval: NaN, the count stays"


def test_quantiles_are_the_last_intervals_within_one_percent() -> None:
    window = LatencyWindow()
    for value_ms in range(1, 1001):  # 1 … 1000 ms
        window.record(float(value_ms))
    window.rollover()
    window.record(5000.0)  # the next interval: not reported yet
    expected = {0.0: 1.0, 0.5: 500.0, 0.95: 950.0, 0.99: 990.0, 0.999: 999.0, 0.9999: 1000.0, 1.0: 1000.0}
    for q, value in expected.items():
        assert math.isclose(window.quantile(q), value, rel_tol=0.01), (q, window.quantile(q))
    assert window.count == 1001 and window.sum_ms == 500_500.0 + 5000.0


def test_the_exposition_is_pulsars_summary() -> None:
    window = LatencyWindow()
    empty = scraped(window)
    assert [q for name, q in empty if name == "pulsar_broker_publish_latency"] == [
        "0.0",
        "0.5",
        "0.95",
        "0.99",
        "0.999",
        "0.9999",
        "1.0",
    ]
    assert math.isnan(empty[("pulsar_broker_publish_latency", "0.5")])
    assert empty[("pulsar_broker_publish_latency_count", None)] == 0.0
    window.record(0.25)
    window.record(0.75)
    window.rollover()
    samples = scraped(window)
    assert math.isclose(samples[("pulsar_broker_publish_latency", "0.0")], 0.25, rel_tol=0.01)
    assert math.isclose(samples[("pulsar_broker_publish_latency", "1.0")], 0.75, rel_tol=0.01)
    assert samples[("pulsar_broker_publish_latency_count", None)] == 2.0
    assert samples[("pulsar_broker_publish_latency_sum", None)] == 1.0
