"""Is the broker an ownership key names gone? A TCP probe of its service port.

An ownership key outlives its broker by up to a session timeout (30 s by default), and longer
when the metadata store itself restarted (restored sessions get a full timeout again). A lookup
that would redirect clients to such a broker for that long probes it first: when its port
*refuses* the connection (RST: no process listens there) the owner is gone, and the key may be
taken over. Anything else — accepted, timed out, unreachable network — counts as alive: a slow
or partitioned broker keeps its bundles until its session really expires. Results are cached
for :data:`PROBE_CACHE_S` so a reconnect storm costs one probe per broker.

Invariant: only a refused connection says "gone"; a cached answer is at most
:data:`PROBE_CACHE_S` old.
"""

from __future__ import annotations

import asyncio
import errno
import time

from minipulsar.net import parse_address

PROBE_TIMEOUT_S = 1.0
PROBE_CACHE_S = 1.0


class LivenessProbe:
    def __init__(self) -> None:
        self._results: dict[str, tuple[float, bool]] = {}

    async def is_gone(self, service_url: str) -> bool:
        """True only when ``service_url``'s port refused a TCP connection just now."""
        now = time.monotonic()
        cached = self._results.get(service_url)
        if cached is not None and now - cached[0] < PROBE_CACHE_S:
            return cached[1]
        gone = await _refuses(service_url)
        self._results[service_url] = (time.monotonic(), gone)
        if len(self._results) > 1024:  # brokers come and go: drop stale entries now and then
            self._results = {u: r for u, r in self._results.items() if now - r[0] < PROBE_CACHE_S}
        return gone


async def _refuses(service_url: str) -> bool:
    try:
        host, port = parse_address(service_url, 6650)
    except ValueError:
        return False
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), PROBE_TIMEOUT_S)
    except ConnectionRefusedError:
        return True
    except OSError as error:
        return error.errno == errno.ECONNREFUSED
    except TimeoutError:
        return False
    writer.close()
    return False
