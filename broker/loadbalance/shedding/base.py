"""What every shedding strategy shares: its output and the bundle pick of the classic shedders.

A strategy is pure: given a :class:`~broker.loadbalance.load_data.LoadData` snapshot and the
time, it answers which bundles to unload from which broker, and why. It may keep history
between calls (ThresholdShedder's moving averages, AvgShedder's hit counts), never I/O.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from minipulsar.broker.loadbalance.load_data import BrokerData, LoadData

OVERLOADED = "Overloaded"
UNDERLOADED = "Underloaded"
BALANCED = "Balanced"
"""Reasons an unload is made (the ``reason`` label of ``pulsar_lb_unload_bundle_total``)."""


class Unload(NamedTuple):
    broker: str
    """The broker that owns the bundle now."""
    bundle: str
    reason: str


class LoadSheddingStrategy(Protocol):
    name: str

    def find_bundles_for_unloading(self, load_data: LoadData, now_s: float) -> list[Unload]:
        """Bundles to unload now, in the order to unload them."""
        ...


def pick_by_throughput(data: BrokerData, load_data: LoadData, need_bytes: float) -> list[str]:
    """OverloadShedder's and ThresholdShedder's pick: the broker's bundles that were not
    unloaded recently, largest short-term throughput first, until at least ``need_bytes`` is
    picked (always at least one)."""
    ranked = sorted(
        (
            (load_data.bundles[b].short_term.msg_throughput, b)
            for b in data.local.bundles
            if b in load_data.bundles and b not in load_data.recently_unloaded
        ),
        key=lambda item: (-item[0], item[1]),
    )
    picked: list[str] = []
    marked = 0.0
    for throughput, bundle in ranked:
        if picked and marked >= need_bytes:
            break
        picked.append(bundle)
        marked += throughput
    return picked
