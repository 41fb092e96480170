"""One shedding cycle, decided (Pulsar's ``doLoadShedding`` minus the admin calls).

1. forget unloads older than ``loadBalancerSheddingGracePeriodMinutes``;
2. nothing with fewer than two brokers;
3. ask the shedder which bundles to unload;
4. choose each bundle's destination now, through the placement pipeline, and skip the unload
   when the destination is the broker it is on (newer Pulsar does this: an unload that lands
   where it started only disconnects clients);
5. preallocate the bundle to its destination at once, so the next decision of the same cycle
   already counts it.

The caller performs the unloads (the load manager through the owner; the simulation by moving
the bundle) and reports each result with :func:`unload_done` — a failed unload gives its
preallocation back.

Invariants:

- pure: the caller performs the unloads;
- no unload whose destination is the broker it is on; a failed unload gives back its
  preallocation.
"""

from __future__ import annotations

from typing import NamedTuple

from minipulsar.broker.loadbalance.load_data import LoadData
from minipulsar.broker.loadbalance.placement.base import PlacementStrategy
from minipulsar.broker.loadbalance.placement.pipeline import select_broker
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings
from minipulsar.broker.loadbalance.shedding.base import LoadSheddingStrategy


class PlannedUnload(NamedTuple):
    broker: str
    bundle: str
    reason: str
    destination: str


def plan_unloads(
    load_data: LoadData,
    shedder: LoadSheddingStrategy,
    placement: PlacementStrategy,
    settings: LoadBalancerSettings,
    now_s: float,
) -> list[PlannedUnload]:
    load_data.prune_recently_unloaded(now_s, settings.grace_period_s)
    if len(load_data.brokers) <= 1:
        return []
    planned: list[PlannedUnload] = []
    seen: set[str] = set()
    for unload in shedder.find_bundles_for_unloading(load_data, now_s):
        if unload.bundle in seen or unload.broker not in load_data.brokers:
            continue
        seen.add(unload.bundle)
        destination = select_broker(unload.bundle, load_data, placement, settings)
        if destination is None or destination == unload.broker:
            continue
        load_data.preallocate(unload.bundle, destination)
        planned.append(PlannedUnload(unload.broker, unload.bundle, unload.reason, destination))
    return planned


def unload_done(load_data: LoadData, unload: PlannedUnload, ok: bool, now_s: float) -> None:
    """Record the outcome: a done unload starts its grace period; a failed one is forgotten."""
    if ok:
        load_data.recently_unloaded[unload.bundle] = now_s
    elif load_data.preallocated.get(unload.bundle) == unload.destination:
        load_data.forget_preallocation(unload.bundle)
