"""The web console's page as a test reads it: its URL, and what it shows now.

- :data:`CONSOLE_CLUSTER_SETTINGS`: broker settings under which the console's figures move
  within seconds (rates every second, host usage every 3 s, load reports checked every second);
- :func:`console_url`: ``/console/`` of a broker, with its refresh period;
- :func:`page_state`: the status, the listed brokers, bookies and topics, and each chart's
  point count, read in one script (the page replaces its rows at every refresh, so elements
  found in one call may be gone in the next).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tests.support.cluster import ProcessCluster
from tests.support.web import broker_web_url

CONSOLE_CLUSTER_SETTINGS: dict[str, object] = {
    "statsUpdateFrequencyInSecs": 1,
    "loadBalancerReportUpdateMinIntervalMillis": 1000,
    "loadBalancerHostUsageCheckIntervalMinutes": 0.05,
}
CHARTS = ("chart-msgs", "chart-bytes", "chart-journal")

_STATE_SCRIPT = """
const ids = (selector, key) => [...document.querySelectorAll(selector)].map((row) => row.dataset[key]);
return {
  status: document.getElementById("status").textContent,
  brokers: ids("#brokers tbody tr[data-broker-id]", "brokerId"),
  bookies: ids("#bookies tbody tr[data-bookie-id]", "bookieId"),
  topics: [...document.querySelectorAll("#topics tbody tr[data-topic]")].map(
    (row) => [row.dataset.topic, row.cells[1].textContent]),
  points: Object.fromEntries(CHARTS.map((id) => [id, Number(document.getElementById(id).dataset.points || 0)])),
};
""".replace("CHARTS", json.dumps(list(CHARTS)))


@dataclass(frozen=True, slots=True)
class PageState:
    status: str
    """The status pill: ``live``, ``stale``, ``unreachable`` or ``connecting…``."""
    brokers: list[str]
    bookies: list[str]
    topics: dict[str, str]
    """Topic → the broker listed for it."""
    points: dict[str, int]
    """Chart id → points it holds."""


def console_url(cluster: ProcessCluster, index: int = 0, refresh_s: float = 2) -> str:
    """The console page of broker ``index``, refreshing every ``refresh_s`` seconds."""
    return f"{broker_web_url(cluster, index)}/console/?refresh={refresh_s:g}"


def page_state(driver: Any) -> PageState:
    """What the page shows now (blocking: a Selenium call)."""
    state = driver.execute_script(_STATE_SCRIPT)
    return PageState(
        status=state["status"],
        brokers=list(state["brokers"]),
        bookies=list(state["bookies"]),
        topics=dict(state["topics"]),
        points={name: int(n) for name, n in state["points"].items()},
    )
