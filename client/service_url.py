"""The service URL: one or several brokers to send lookups to, rotating after failures.

``pulsar://h1:6650,h2:6650`` names several brokers (or proxies) that can all answer a lookup;
a host without a port gets 6650. Lookups go to the current host; after a failure to reach
it (refused, timed out, dropped) the next lookup goes to the next host, round-robin — as
Pulsar's ``PulsarServiceNameResolver``, which also picks another host once one is found
unreachable (apache/pulsar#11688: a stuck host behind a VIP must not keep every client).
"""

from __future__ import annotations

DEFAULT_PORT = 6650
SCHEMES = ("pulsar://",)


class ServiceUrl:
    """Invariant: ``hosts`` is non-empty and ``current()`` is one of them."""

    __slots__ = ("_index", "hosts", "url")

    def __init__(self, url: str) -> None:
        self.url = url
        self.hosts = parse_hosts(url)
        self._index = 0

    def current(self) -> tuple[str, int]:
        return self.hosts[self._index]

    def failed(self, address: tuple[str, int]) -> None:
        """``address`` could not be reached: move on, unless another failure already did."""
        if self.hosts[self._index] == address:
            self._index = (self._index + 1) % len(self.hosts)

    def __str__(self) -> str:
        return self.url


def parse_hosts(url: str) -> list[tuple[str, int]]:
    """``pulsar://h1[:p1],h2[:p2]/`` → ``[(h1, p1), (h2, p2)]``.

    Raises:
        ValueError: another scheme (``pulsar+ssl://``, ``http://``: not supported), no host, or
            a port that is not a number.
    """
    scheme, sep, rest = url.partition("://")
    if sep and f"{scheme}://" not in SCHEMES:
        raise ValueError(
            f"service URL {url!r}: only pulsar://host:port[,host:port...] is supported "
            f"(binary lookup; no TLS, no HTTP lookup)"
        )
    rest = (rest if sep else url).strip().rstrip("/")
    hosts = []
    for part in rest.split(","):
        host, colon, port = part.strip().rpartition(":")
        if not colon:
            host, port = port, str(DEFAULT_PORT)
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"service URL {url!r}: bad host {part!r} (expected host:port)")
        hosts.append((host, int(port)))
    return hosts
