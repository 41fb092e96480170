"""Goal: the web console works in a real browser on a live cluster of 2 brokers and 3 bookies:
the page loads without a browser console error, lists every broker and every bookie, shows
the topics while producers publish to them, and its charts gain points as it refreshes.

Method: headless Chromium (Debian's, through chromedriver; installed with apt-get where root
allows, else a visible skip) opens ``/console/?refresh=1`` on broker 1 — so it lists the other
broker's topics through the server-side gathering — while ``minipulsar perf produce`` and
``perf consume`` child processes put steady traffic on four topics; every condition is waited
for with a deadline. Then the cluster's JSON endpoints are read over plain HTTP for their
shapes on real processes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import console_errors, headless_chromium, skip_unless_chromium
from tests.support.cluster import ProcessCluster
from tests.support.console_page import CONSOLE_CLUSTER_SETTINGS, PageState, console_url, page_state
from tests.support.fixtures import cluster_fixture
from tests.support.perf_load import perf_load
from tests.support.process import wait_for
from tests.support.web import broker_web_url, get_json

TOPIC = "persistent://public/default/console"
TOPICS = [f"{TOPIC}-{i}" for i in range(4)]
CONDITION_TIMEOUT_S = 30.0

cluster = cluster_fixture(bookies=3, brokers=2, broker_settings=CONSOLE_CLUSTER_SETTINGS)


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium; requested before ``cluster``, so a machine without one skips at once."""
    skip_unless_chromium()
    with headless_chromium() as driver:
        yield driver


def cluster_bookie_ids(cluster: ProcessCluster) -> set[str]:
    return {f"{bookie.host}:{bookie.port}" for bookie in cluster.bookies}


async def state_of(browser: Any) -> PageState:
    return await asyncio.to_thread(page_state, browser)


async def test_the_console_shows_brokers_bookies_topics_and_live_charts(
    browser: Any, cluster: ProcessCluster, tmp_path: Path
) -> None:
    brokers = {cluster.broker_id(i) for i in range(2)}
    with perf_load(cluster.service_url, TOPIC, tmp_path / "perf", topics=len(TOPICS), rate=200):
        await asyncio.to_thread(browser.get, console_url(cluster, index=1, refresh_s=1))

        async def everyone_listed() -> bool:
            state = await state_of(browser)
            listed = set(state.brokers) == brokers and set(state.bookies) == cluster_bookie_ids(cluster)
            return state.status == "live" and listed

        await wait_for(everyone_listed, CONDITION_TIMEOUT_S, 0.2, "the page never listed every broker and bookie")

        async def topics_listed() -> bool:
            return set(TOPICS) <= (await state_of(browser)).topics.keys()

        await wait_for(topics_listed, CONDITION_TIMEOUT_S, 0.2, "the page never listed the producers' topics")
        state = await state_of(browser)
        assert set(state.topics.values()) <= brokers
        before = state.points

        async def charts_grew() -> bool:
            now = (await state_of(browser)).points
            return all(now[chart] >= before[chart] + 2 for chart in now)

        await wait_for(charts_grew, CONDITION_TIMEOUT_S, 0.2, f"the charts did not gain points (from {before})")
    assert await asyncio.to_thread(console_errors, browser) == []


async def test_the_json_endpoints_have_their_shapes_on_real_processes(cluster: ProcessCluster) -> None:
    url = broker_web_url(cluster, 0)
    everyone = await asyncio.to_thread(get_json, f"{url}/admin/v2/bookies/all")
    assert everyone == {"bookies": [{"bookieId": b} for b in sorted(cluster_bookie_ids(cluster))]}
    seen = await asyncio.to_thread(get_json, f"{url}/admin/v2/broker-stats/bookies")
    assert set(seen) == cluster_bookie_ids(cluster)
    for view in seen.values():
        assert view["quarantined"] is False and view["quarantineRemainingSeconds"] is None
        assert isinstance(view["pendingRequests"], int)
    assert await asyncio.to_thread(get_json, f"{url}/admin/v2/broker-stats/topics") == {}

    async def led() -> dict[str, Any] | None:
        doc = await asyncio.to_thread(get_json, f"{url}/console/api/cluster")
        return doc if doc["leader"] is not None else None

    await wait_for(led, CONDITION_TIMEOUT_S, 0.2, "no load-balancer leader was shown")
    doc = await led()
    assert doc is not None
    assert {b["brokerId"] for b in doc["brokers"]} == {cluster.broker_id(i) for i in range(2)}
    assert all(b["reachable"] and b["errors"] == [] for b in doc["brokers"])
    assert sum(b["leader"] for b in doc["brokers"]) == 1 and doc["leader"] in {b["brokerId"] for b in doc["brokers"]}
    assert {b["bookieId"] for b in doc["bookies"]} == cluster_bookie_ids(cluster)
    assert all(b["state"] == "writable" and b["info"]["readOnly"] is False for b in doc["bookies"])
