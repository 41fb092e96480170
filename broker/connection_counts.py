"""Counts of the broker's client connections by protocol, for /metrics.

Pulsar's names (``pulsar_active_connections``, ``pulsar_connection_created_total_count``,
``pulsar_connection_closed_total_count``), with a ``protocol`` label Pulsar's broker has no
need of: ``minipulsar`` for our own clients, ``pulsar`` for the official ones.

Invariant: a connection is counted created once its first bytes have said which protocol it
speaks (a connection refused for speaking neither is never counted), and closed once when it
ends; active is their difference.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minipulsar.binary_protocol.detect import Protocol

PROTOCOLS: tuple[Protocol, ...] = ("minipulsar", "pulsar")


@dataclass(slots=True)
class ConnectionCounts:
    created: dict[Protocol, int] = field(default_factory=lambda: dict.fromkeys(PROTOCOLS, 0))
    closed: dict[Protocol, int] = field(default_factory=lambda: dict.fromkeys(PROTOCOLS, 0))

    def opened(self, protocol: Protocol) -> None:
        self.created[protocol] += 1

    def ended(self, protocol: Protocol) -> None:
        self.closed[protocol] += 1

    def active(self, protocol: Protocol) -> int:
        return self.created[protocol] - self.closed[protocol]
