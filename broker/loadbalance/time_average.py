"""Pulsar's ``TimeAverageMessageData``: a bundle's rates averaged over its last samples (§1.4).

``n ← min(n + 1, max_samples); avg ← ((n − 1)·avg + sample) / n``: a plain mean until
``max_samples`` samples were seen, then an exponential average with α = 1/max_samples.
Short-term history keeps 10 samples, long-term 1000. A bundle never sampled starts from
Pulsar's defaults (50 msg/s and 50 000 B/s each way) with n = 0, so its first real sample
replaces them.

Invariant: ``n`` never exceeds ``max_samples``; the first real sample replaces the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minipulsar.broker.loadbalance.load_report import NamespaceBundleStats

SHORT_TERM_SAMPLES = 10
LONG_TERM_SAMPLES = 1000
DEFAULT_MSG_RATE = 50.0
"""msg/s in and out assumed for a bundle with no history (Pulsar's ``defaultMessageRate``)."""
DEFAULT_MSG_THROUGHPUT = 50_000.0
"""B/s in and out assumed for a bundle with no history (Pulsar's ``defaultMessageThroughput``)."""


@dataclass(slots=True)
class TimeAverageMessageData:
    max_samples: int
    num_samples: int = 0
    msg_rate_in: float = DEFAULT_MSG_RATE
    msg_rate_out: float = DEFAULT_MSG_RATE
    msg_throughput_in: float = DEFAULT_MSG_THROUGHPUT
    msg_throughput_out: float = DEFAULT_MSG_THROUGHPUT

    def update(self, stats: NamespaceBundleStats) -> None:
        """Fold one sample in."""
        assert self.max_samples > 0
        n = self.num_samples = min(self.num_samples + 1, self.max_samples)
        self.msg_rate_in = ((n - 1) * self.msg_rate_in + stats.msg_rate_in) / n
        self.msg_rate_out = ((n - 1) * self.msg_rate_out + stats.msg_rate_out) / n
        self.msg_throughput_in = ((n - 1) * self.msg_throughput_in + stats.msg_throughput_in) / n
        self.msg_throughput_out = ((n - 1) * self.msg_throughput_out + stats.msg_throughput_out) / n

    @property
    def msg_rate(self) -> float:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def msg_throughput(self) -> float:
        return self.msg_throughput_in + self.msg_throughput_out

    def to_json(self) -> dict[str, Any]:
        return {
            "maxSamples": self.max_samples,
            "numSamples": self.num_samples,
            "msgRateIn": self.msg_rate_in,
            "msgRateOut": self.msg_rate_out,
            "msgThroughputIn": self.msg_throughput_in,
            "msgThroughputOut": self.msg_throughput_out,
        }

    @classmethod
    def from_json(cls, value: dict[str, Any], max_samples: int) -> TimeAverageMessageData:
        return cls(
            int(value.get("maxSamples", max_samples)) or max_samples,
            int(value.get("numSamples", 0)),
            float(value.get("msgRateIn", DEFAULT_MSG_RATE)),
            float(value.get("msgRateOut", DEFAULT_MSG_RATE)),
            float(value.get("msgThroughputIn", DEFAULT_MSG_THROUGHPUT)),
            float(value.get("msgThroughputOut", DEFAULT_MSG_THROUGHPUT)),
        )
