"""UniformLoadShedder (Pulsar 2.10): balance message rate and throughput.

Compare the brokers with the highest and lowest message rate (in+out), and those with the
highest and lowest throughput. If ``(maxRate − minRate)/minRate`` exceeds
``loadBalancerMsgRateDifferenceShedderThreshold`` % (50), shed from the top broker
``maxUnloadPercentage`` (0.2) of the difference in message rate, bundle by bundle (largest
first, each taken while it fits the remainder + 1000); otherwise, if ``maxTput/minTput``
exceeds ``loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold`` (4), the same by
throughput. One broker per cycle: slow, but it ignores resource usage entirely.
"""

from __future__ import annotations

from minipulsar.broker.loadbalance.load_data import LoadData
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings
from minipulsar.broker.loadbalance.shedding.base import BALANCED, Unload

EPS = 1e-6
DELTA = 1000.0
"""A bundle is taken while its traffic is at most the remainder plus this (Pulsar's ``delta``)."""


class UniformLoadShedder:
    name = "UniformLoadShedder"

    def __init__(self, settings: LoadBalancerSettings) -> None:
        self._settings = settings

    def find_bundles_for_unloading(self, load_data: LoadData, now_s: float) -> list[Unload]:
        if not load_data.brokers:
            return []
        s = self._settings
        brokers = sorted(load_data.brokers)
        rate = {b: load_data.brokers[b].local.msg_rate for b in brokers}
        tput = {b: load_data.brokers[b].local.msg_throughput for b in brokers}
        rate_max_broker, tput_max_broker = max(brokers, key=rate.__getitem__), max(brokers, key=tput.__getitem__)
        max_rate, min_rate = rate[rate_max_broker], min(rate.values())
        max_tput, min_tput = tput[tput_max_broker], min(tput.values())
        min_rate = 1.0 if abs(min_rate) <= EPS else min_rate
        min_tput = 1.0 if abs(min_tput) <= EPS else min_tput
        rate_exceeded = (
            s.msg_rate_difference_pct > 0 and (max_rate - min_rate) * 100 / min_rate > s.msg_rate_difference_pct
        )
        tput_exceeded = (
            s.msg_throughput_multiplier_difference > 0 and max_tput / min_tput > s.msg_throughput_multiplier_difference
        )
        if rate_exceeded:
            need = int((max_rate - min_rate) * s.max_unload_percentage)
            return self._pick(rate_max_broker, load_data, need, s.min_unload_message, by_rate=True)
        if tput_exceeded:
            need = int((max_tput - min_tput) * s.max_unload_percentage)
            return self._pick(tput_max_broker, load_data, need, s.min_unload_message_throughput, by_rate=False)
        return []

    def _pick(self, broker: str, load_data: LoadData, need: float, minimum: float, by_rate: bool) -> list[Unload]:
        data = load_data.brokers[broker]
        if len(data.local.bundles) <= 1 or need < minimum:
            return []
        ranked = []
        for bundle in data.local.bundles:
            if bundle not in load_data.bundles or bundle in load_data.recently_unloaded:
                continue
            short = load_data.bundles[bundle].short_term
            traffic = short.msg_rate if by_rate else short.msg_throughput
            if traffic > 0:
                ranked.append((traffic, bundle))
        ranked.sort(key=lambda item: (-item[0], item[1]))
        cap = self._settings.max_unload_bundle_num_per_shedding
        picked: list[Unload] = []
        for traffic, bundle in ranked:
            if cap != -1 and len(picked) >= cap:
                break
            if traffic <= need + DELTA:
                need -= traffic
                picked.append(Unload(broker, bundle, BALANCED))
        return picked
