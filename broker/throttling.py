"""Counts of publish throttling across the broker's connections, for /metrics.

Invariant: ``throttled_connections`` is the number of connections not reading now, for
either reason (``maxPendingPublishRequestsPerConnection`` or the broker-wide publish buffer);
each connection adds one when its first reason starts and removes it when its last one ends.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class ConnectionThrottling:
    throttled_connections: int = 0
    """Connections not read right now (either limit); pulsar_broker_throttled_connections."""
    connection_pauses: int = 0
    """Times a connection stopped reading for maxPendingPublishRequestsPerConnection."""
