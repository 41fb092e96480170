"""OverloadShedder (Pulsar's original shedder).

A broker whose unweighted max resource usage ``u`` is at or above
``loadBalancerBrokerOverloadedThresholdPercentage`` (85 %) sheds its largest bundles until
``(u − T + 5 %)`` of its throughput is picked. Nothing happens below the threshold, which is
why (BIGO) load piles up on a few brokers under 85 % and a restarted broker stays empty.
"""

from __future__ import annotations

import logging

from minipulsar.broker.loadbalance.load_data import LoadData
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings
from minipulsar.broker.loadbalance.shedding.base import OVERLOADED, Unload, pick_by_throughput

log = logging.getLogger(__name__)

MARGIN = 0.05
"""Shed 5 % more than the excess, so the broker lands below the threshold (Pulsar's margin)."""


class OverloadShedder:
    name = "OverloadShedder"

    def __init__(self, settings: LoadBalancerSettings) -> None:
        self._settings = settings

    def find_bundles_for_unloading(self, load_data: LoadData, now_s: float) -> list[Unload]:
        threshold = self._settings.overload_threshold
        unloads: list[Unload] = []
        for broker, data in sorted(load_data.brokers.items()):
            usage = data.local.max_resource_usage()
            if usage < threshold:
                continue
            if len(data.local.bundles) <= 1:
                log.warning("broker %s is overloaded (%.0f%%) by a sole bundle: nothing to shed", broker, usage * 100)
                continue
            need = data.local.msg_throughput * (usage - threshold + MARGIN)
            unloads.extend(Unload(broker, b, OVERLOADED) for b in pick_by_throughput(data, load_data, need))
        return unloads
