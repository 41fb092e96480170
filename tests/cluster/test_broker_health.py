"""``GET /admin/v2/brokers/health`` is a readiness probe: ``ok`` while the broker serves, 503
from the moment it starts to stop (the compose files' health check of the brokers).

Method: a real cluster; the probe once the broker printed READY, then again while it stops with
its metastore paused (SIGSTOP): its shutdown (releasing the bundle it owns: metadata writes)
then takes over a second before the web port closes, long enough to be probed. Then the
metastore is resumed and the broker must exit cleanly.
"""

from __future__ import annotations

import asyncio
import signal
import urllib.error
import urllib.request

from tests.support.cluster import ProcessCluster
from tests.support.fixtures import cluster_fixture
from tests.support.process import wait_for
from tests.support.web import http_request, web_url

HEALTH = "/admin/v2/brokers/health"
STOP_TIMEOUT_S = 30.0

cluster = cluster_fixture()


async def health_check(url: str) -> tuple[int, str]:
    """The status and body of the health check (``ok`` is not JSON: read as text)."""
    return await asyncio.to_thread(_get, url + HEALTH)


def _get(url: str) -> tuple[int, str]:
    """(status, body); (0, the reason) when nothing answered (the port closed)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except urllib.error.URLError as error:
        return 0, str(error.reason)


async def test_health_is_ok_while_the_broker_serves_and_503_once_it_stops(cluster: ProcessCluster) -> None:
    broker, metastore = cluster.broker, cluster.metastore
    assert broker is not None and broker.proc is not None and metastore is not None
    url = web_url(broker)
    assert await health_check(url) == (200, "ok")
    # a bundle owned, so that stopping has metadata to write (releasing it)
    status, _ = await asyncio.to_thread(http_request, "GET", f"{url}/lookup/v2/topic/persistent/public/default/t")
    assert status == 200

    metastore.pause()
    try:
        broker.proc.send_signal(signal.SIGTERM)
        answers: list[tuple[int, str]] = []

        async def refused() -> bool:
            answers.append(await health_check(url))
            assert answers[-1][0] != 0, f"the web port closed before health answered 503: {answers}"
            return answers[-1][0] == 503

        await wait_for(refused, 10, message=f"health kept answering {answers[-1:]} while the broker stopped")
        assert "the broker is not serving" in answers[-1][1]
    finally:
        metastore.resume()
    assert await asyncio.to_thread(broker.proc.wait, STOP_TIMEOUT_S) == 0
