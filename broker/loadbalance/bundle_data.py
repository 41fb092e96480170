"""A bundle's history (Pulsar's ``BundleData``) and a broker's sums of them (``TimeAverageBrokerData``).

The leader folds every report's ``lastStats`` into the bundles' short- and long-term averages
(:func:`update_bundle_data` in :mod:`.load_data`) and writes them, every
``loadBalancerResourceQuotaUpdateIntervalMinutes``, to ``/loadbalance/bundle-data/{ns}/{range}``
so a new leader starts from the same history.

Invariant: a bundle's history changes only by folding in a sample (or by being forgotten when
it splits).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from minipulsar.broker.loadbalance.load_report import NamespaceBundleStats
from minipulsar.broker.loadbalance.time_average import LONG_TERM_SAMPLES, SHORT_TERM_SAMPLES, TimeAverageMessageData

BUNDLE_DATA_PATH = "/loadbalance/bundle-data"
BROKER_TIME_AVERAGE_PATH = "/loadbalance/broker-time-average"


@dataclass(slots=True)
class BundleData:
    short_term: TimeAverageMessageData = field(default_factory=lambda: TimeAverageMessageData(SHORT_TERM_SAMPLES))
    long_term: TimeAverageMessageData = field(default_factory=lambda: TimeAverageMessageData(LONG_TERM_SAMPLES))
    topics: int = 0

    def update(self, stats: NamespaceBundleStats) -> None:
        self.short_term.update(stats)
        self.long_term.update(stats)
        self.topics = stats.topics

    def to_bytes(self) -> bytes:
        value = {
            "shortTermData": self.short_term.to_json(),
            "longTermData": self.long_term.to_json(),
            "topics": self.topics,
        }
        return json.dumps(value, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> BundleData:
        """Raises ValueError (json.JSONDecodeError is one) on malformed bytes."""
        value = json.loads(raw.decode())
        if not isinstance(value, dict):
            raise ValueError("bundle data must be a JSON object")
        return cls(
            TimeAverageMessageData.from_json(value.get("shortTermData") or {}, SHORT_TERM_SAMPLES),
            TimeAverageMessageData.from_json(value.get("longTermData") or {}, LONG_TERM_SAMPLES),
            int(value.get("topics", 0)),
        )


def bundle_data_path(bundle: str) -> str:
    """``/loadbalance/bundle-data/{tenant}/{ns}/{range}`` for ``tenant/ns/range``."""
    return f"{BUNDLE_DATA_PATH}/{bundle}"


@dataclass(frozen=True, slots=True)
class TimeAverageBrokerData:
    """Sums of a broker's bundles' short- and long-term averages."""

    short_term_msg_rate_in: float = 0.0
    short_term_msg_rate_out: float = 0.0
    short_term_msg_throughput_in: float = 0.0
    short_term_msg_throughput_out: float = 0.0
    long_term_msg_rate_in: float = 0.0
    long_term_msg_rate_out: float = 0.0
    long_term_msg_throughput_in: float = 0.0
    long_term_msg_throughput_out: float = 0.0

    @classmethod
    def of(cls, bundles: Iterable[str], bundle_data: Mapping[str, BundleData]) -> TimeAverageBrokerData:
        """The sums over ``bundles``; a bundle with no history counts with the defaults."""
        values = [0.0] * 8
        for bundle in bundles:
            data = bundle_data.get(bundle) or BundleData()
            for index, window in enumerate((data.short_term, data.long_term)):
                values[4 * index] += window.msg_rate_in
                values[4 * index + 1] += window.msg_rate_out
                values[4 * index + 2] += window.msg_throughput_in
                values[4 * index + 3] += window.msg_throughput_out
        return cls(*values)

    @property
    def long_term_msg_rate(self) -> float:
        return self.long_term_msg_rate_in + self.long_term_msg_rate_out

    def to_json(self) -> dict[str, Any]:
        return {
            "shortTermMsgRateIn": self.short_term_msg_rate_in,
            "shortTermMsgRateOut": self.short_term_msg_rate_out,
            "shortTermMsgThroughputIn": self.short_term_msg_throughput_in,
            "shortTermMsgThroughputOut": self.short_term_msg_throughput_out,
            "longTermMsgRateIn": self.long_term_msg_rate_in,
            "longTermMsgRateOut": self.long_term_msg_rate_out,
            "longTermMsgThroughputIn": self.long_term_msg_throughput_in,
            "longTermMsgThroughputOut": self.long_term_msg_throughput_out,
        }
