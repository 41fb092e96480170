"""HTTP to a test server's web port: admin REST calls, topic stats, and /metrics samples.

- Every call blocks, with a timeout (``asyncio.to_thread`` keeps a test's loop turning); GET
  follows redirects, as the admin CLI does.
- :func:`http_request` answers ``(status, JSON body)`` for every status, so a test asserts on
  refusals too; the GET helpers raise ``urllib.error.HTTPError`` on one.
- /metrics text is read with prometheus_client's own parser (:func:`sample_value`).
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.support.cluster import ProcessCluster
from tests.support.process import ServerProcess

WEB_TIMEOUT_S = 10.0
"""How long one HTTP call to a test server may take."""


def web_url(process: ServerProcess) -> str:
    """``http://host:port`` of a server's web (admin and /metrics) port."""
    return f"http://{process.host}:{process.http_port}"


def broker_web_url(cluster: ProcessCluster, index: int = 0) -> str:
    """The web URL of broker ``index`` of a cluster."""
    return web_url(cluster.brokers[index])


def http_get(url: str, timeout_s: float = WEB_TIMEOUT_S) -> str:
    """The body of ``GET url`` as text."""
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        text: str = response.read().decode()
        return text


def get_json(url: str, timeout_s: float = WEB_TIMEOUT_S) -> Any:
    """The JSON body of ``GET url``."""
    return json.loads(http_get(url, timeout_s))


def http_request(method: str, url: str, body: object = None, timeout_s: float = WEB_TIMEOUT_S) -> tuple[int, Any]:
    """``method url`` with ``body`` as JSON: the status and the JSON answer (None when empty)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def put_partitions(cluster: ProcessCluster, local_name: str, partitions: int) -> None:
    """Create ``public/default/<local_name>`` as a partitioned topic through the admin REST API."""
    url = f"{broker_web_url(cluster)}/admin/v2/persistent/public/default/{local_name}/partitions"
    status, answer = http_request("PUT", url, partitions)
    assert status == 204, (status, answer)


def topic_stats(cluster: ProcessCluster, topic: str, kind: str = "stats", *, domain: str = "persistent") -> Any:
    """``/admin/v2/<domain>/public/default/<topic>/<kind>`` (stats, internalStats, …) from the
    cluster's first broker."""
    return get_json(f"{broker_web_url(cluster)}/admin/v2/{domain}/public/default/{topic}/{kind}")


def consumer_stats(cluster: ProcessCluster, topic: str, subscription: str) -> list[dict[str, Any]]:
    """The stats of each consumer of a subscription of a persistent topic."""
    consumers: list[dict[str, Any]] = topic_stats(cluster, topic)["subscriptions"][subscription]["consumers"]
    return consumers


def metrics_text(process: ServerProcess) -> str:
    """What a server's /metrics exports now."""
    return http_get(f"{web_url(process)}/metrics")


def sample_value(text: str, name: str, labels: Mapping[str, str] | None = None, *, exact: bool = False) -> float | None:
    """The value of the first sample ``name`` in /metrics ``text`` that carries ``labels`` (with
    ``exact``: those labels and no other), or None when there is none."""
    wanted = dict(labels or {})
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name != name:
                continue
            if sample.labels == wanted or (not exact and wanted.items() <= sample.labels.items()):
                return float(sample.value)
    return None


def required_sample(text: str, name: str, labels: Mapping[str, str] | None = None) -> float:
    """:func:`sample_value`, failing with the sample's name and labels when there is none."""
    value = sample_value(text, name, labels)
    assert value is not None, f"{name} {dict(labels or {})} has no sample on /metrics"
    return value


async def metric_value(
    process: ServerProcess, name: str, labels: Mapping[str, str] | None = None, *, exact: bool = False
) -> float | None:
    """:func:`sample_value` of what ``process`` exports now (read on a thread)."""
    return sample_value(await asyncio.to_thread(metrics_text, process), name, labels, exact=exact)
