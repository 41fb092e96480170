"""The broker's publish latency: Pulsar's ``pulsar_broker_publish_latency`` summary.

A sample is the time from the broker reading a SEND to it writing the SEND_RECEIPT, in
milliseconds, for persistent and non-persistent topics alike (a SEND answered with an error
is not a sample, as in Pulsar, which records it on the publish's completion).

prometheus-client's ``Summary`` has no quantiles, so :class:`LatencyWindow` keeps them: the
samples go into the *current* window, an HdrHistogram (microseconds, 2 significant digits:
1 % resolution, as Pulsar's sketch), and every stats round (``statsUpdateFrequencyInSecs``)
:meth:`LatencyWindow.rollover` makes it the *reported* window and starts an empty one — Pulsar
rotates its summary's collection the same way. So the quantiles 0.0, 0.5, 0.95, 0.99, 0.999,
0.9999 and 1.0 are those of the last complete interval, NaN when it had no sample (what
Pulsar prints then); ``_count`` and ``_sum`` count every sample since start.

Cost: one ``record_value`` per receipt (pure Python, ~0.8 µs here), on the loop, spread over
the sends — never a batch of them at once, which would stall every publish in flight.

Invariants:

- written by the event loop only; a scrape reads the reported window, which only a rollover
  replaces;
- a sample is clamped into [1 µs, :data:`HIGHEST_US`]; ``_sum`` adds the unclamped value.
"""

from __future__ import annotations

import math

from hdrh.histogram import HdrHistogram
from prometheus_client.core import Metric

QUANTILES = (0.0, 0.5, 0.95, 0.99, 0.999, 0.9999, 1.0)
"""Pulsar's quantiles of ``pulsar_broker_publish_latency``."""
HIGHEST_US = 600_000_000
"""Ten minutes: a slower publish is counted as this slow (a broken write, not a slow one)."""
SIGNIFICANT_DIGITS = 2


class LatencyWindow:
    """Samples in ms; quantiles of the last complete window, count and sum since start."""

    __slots__ = ("_current", "_reported", "count", "sum_ms")

    def __init__(self) -> None:
        self._current = HdrHistogram(1, HIGHEST_US, SIGNIFICANT_DIGITS)
        self._reported = HdrHistogram(1, HIGHEST_US, SIGNIFICANT_DIGITS)
        self.count = 0
        self.sum_ms = 0.0

    def record(self, latency_ms: float) -> None:
        self._current.record_value(min(max(int(latency_ms * 1000), 1), HIGHEST_US))
        self.count += 1
        self.sum_ms += latency_ms

    def rollover(self) -> None:
        """End the window: its samples become the reported ones; the next window starts empty."""
        self._reported, self._current = self._current, self._reported
        self._current.reset()

    def quantile(self, q: float) -> float:
        """The reported window's ``q`` quantile in ms (0.0: its minimum, 1.0: its maximum); NaN
        when it is empty."""
        reported = self._reported
        if reported.get_total_count() == 0:
            return math.nan
        if q <= 0.0:
            value = reported.get_min_value()
        elif q >= 1.0:
            value = reported.get_max_value()
        else:
            value = reported.get_value_at_percentile(q * 100)
        return float(value) / 1000


def summary_metric(name: str, documentation: str, cluster: str, window: LatencyWindow) -> Metric:
    """``name`` as a Prometheus summary: one sample per quantile (label ``quantile`` as Pulsar
    writes it, ``0.0`` … ``1.0``), then ``_count`` and ``_sum``, each labelled ``cluster``."""
    metric = Metric(name, documentation, "summary")
    for q in QUANTILES:
        metric.add_sample(name, {"cluster": cluster, "quantile": repr(q)}, window.quantile(q))
    metric.add_sample(f"{name}_count", {"cluster": cluster}, float(window.count))
    metric.add_sample(f"{name}_sum", {"cluster": cluster}, window.sum_ms)
    return metric
