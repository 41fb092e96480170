"""Strategy names (``loadBalancerLoadSheddingStrategy`` / ``…PlacementStrategy``) → objects.

AvgShedder configured for both roles is ONE object, so the destinations it plans while
shedding are the ones placement answers (Pulsar does the same).

Invariant: every name :class:`~.settings.LoadBalancerSettings` accepts has a strategy here.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from minipulsar.broker.loadbalance.placement.base import PlacementStrategy
from minipulsar.broker.loadbalance.placement.least_long_term_message_rate import LeastLongTermMessageRate
from minipulsar.broker.loadbalance.placement.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings
from minipulsar.broker.loadbalance.shedding.avg import AvgShedder
from minipulsar.broker.loadbalance.shedding.base import LoadSheddingStrategy
from minipulsar.broker.loadbalance.shedding.overload import OverloadShedder
from minipulsar.broker.loadbalance.shedding.threshold import ThresholdShedder
from minipulsar.broker.loadbalance.shedding.uniform import UniformLoadShedder


def create_strategies(
    settings: LoadBalancerSettings, rng: random.Random | None = None
) -> tuple[LoadSheddingStrategy, PlacementStrategy]:
    """The configured shedder and placement strategy (``rng`` seeds their random choices)."""
    rng = rng or random.Random()
    shedders: dict[str, Callable[[], LoadSheddingStrategy]] = {
        "OverloadShedder": lambda: OverloadShedder(settings),
        "ThresholdShedder": lambda: ThresholdShedder(settings),
        "UniformLoadShedder": lambda: UniformLoadShedder(settings),
        "AvgShedder": lambda: AvgShedder(settings, rng),
    }
    shedder = shedders[settings.shedding_strategy]()
    placement: PlacementStrategy
    if settings.placement_strategy == "AvgShedder":
        placement = shedder if isinstance(shedder, AvgShedder) else AvgShedder(settings, rng)
    elif settings.placement_strategy == "LeastResourceUsageWithWeight":
        placement = LeastResourceUsageWithWeight(settings, rng)
    else:
        placement = LeastLongTermMessageRate(settings, rng)
    return shedder, placement
