"""AvgShedder as a placement strategy: the same object as the shedder (see
:mod:`broker.loadbalance.shedding.avg`), so the destinations planned at shed time are honoured."""

from minipulsar.broker.loadbalance.shedding.avg import AvgShedder

__all__ = ["AvgShedder"]
