"""BrokerIdentity: who this broker is to the cluster, fixed once its ports are bound.

Invariants:

- it is immutable, and built only after both listeners are bound, so its ports are the real
  ones (a port of 0 in the config means "any free port");
- ``broker_id`` is ``host:webport``, Pulsar's broker id: the key under ``/loadbalance/brokers``
  and the name the load manager and the admin REST use for this broker.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    broker_id: str
    """``host:webport``."""
    service_url: str
    """``pulsar://host:port``: where clients connect (the binary protocol)."""
    web_service_url: str
    """``http://host:webport``: admin REST, HTTP lookup and /metrics."""

    @classmethod
    def of(cls, host: str, port: int, http_port: int) -> BrokerIdentity:
        """The identity of a broker advertised as ``host`` with these bound ports."""
        return cls(f"{host}:{http_port}", f"pulsar://{host}:{port}", f"http://{host}:{http_port}")
