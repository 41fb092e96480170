"""Goal: the pure parts of reconnection and lookup: the backoff schedule (exponential, capped,
jittered within [d/2, d], reset), and service URLs (several hosts, default port, rotation
only past the host that failed, clear errors for what is not supported)."""

from __future__ import annotations

import random

import pytest

from minipulsar.client.backoff import Backoff
from minipulsar.client.service_url import ServiceUrl, parse_hosts


def test_backoff_doubles_from_100_ms_to_its_cap_with_jitter_below_each_step() -> None:
    backoff = Backoff(0.1, 30.0, random.Random(7))
    steps = [min(0.1 * 2**i, 30.0) for i in range(12)]
    delays = [backoff.next() for _ in steps]
    for step, delay in zip(steps, delays):
        assert step / 2 <= delay <= step
    assert len(set(delays)) == len(delays), "jitter: no two clients in step"
    backoff.reset()
    assert 0.05 <= backoff.next() <= 0.1


def test_backoff_rejects_a_cap_below_its_start() -> None:
    with pytest.raises(ValueError):
        Backoff(1.0, 0.5)


@pytest.mark.parametrize(
    "url, hosts",
    [
        ("pulsar://localhost:6650", [("localhost", 6650)]),
        ("pulsar://h1:6650,h2:6651/", [("h1", 6650), ("h2", 6651)]),
        ("pulsar://h1,h2", [("h1", 6650), ("h2", 6650)]),
        ("127.0.0.1:7000", [("127.0.0.1", 7000)]),
    ],
)
def test_service_urls_list_their_hosts(url: str, hosts: list) -> None:
    assert parse_hosts(url) == hosts


@pytest.mark.parametrize(
    "url", ["http://h:8080", "pulsar+ssl://h:6651", "pulsar://h:port", "pulsar://", "pulsar://h:0"]
)
def test_unsupported_or_malformed_service_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match="service URL"):
        parse_hosts(url)


def test_the_service_url_rotates_past_the_host_that_failed_only() -> None:
    url = ServiceUrl("pulsar://a:1,b:2,c:3")
    assert url.current() == ("a", 1)
    url.failed(("a", 1))
    assert url.current() == ("b", 2)
    url.failed(("a", 1))  # a late report about a host we already left: no second move
    assert url.current() == ("b", 2)
    url.failed(("b", 2))
    url.failed(("c", 3))
    assert url.current() == ("a", 1), "round-robin"
