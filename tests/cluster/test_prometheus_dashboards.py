"""Every query of the Grafana dashboards, run by a real Prometheus against a real cluster.

Debian's Prometheus (2.42) scrapes 2 brokers, 3 bookies and the metastore with the configuration
the compose file ships (docker/prometheus/prometheus.yml, targets replaced) while producers and
consumers run; then each PromQL expression of docker/grafana/dashboards/*.json is evaluated
through the HTTP API. A query that errors, or returns no series, fails the test: a panel that
would stay empty on a live cluster is a wrong metric name, a wrong label or a missing export.
(A series whose value is NaN, such as a quantile of a window without observations, is a
series: the panel shows its gap, not "No data".)

Skipped, with the reason, where Prometheus cannot be installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from minipulsar import Client
from minipulsar.client import Consumer, Producer
from minipulsar.client.exceptions import Timeout
from tests.support.cluster import ProcessCluster, make_cluster
from tests.support.process import wait_for
from tests.support.prometheus import (
    SHIPPED_CONFIG,
    PrometheusServer,
    config_with_targets,
    promtool_check_config,
    skip_unless_prometheus,
)

pytestmark = pytest.mark.timeout(300)

DASHBOARDS = Path(__file__).resolve().parents[2] / "docker" / "grafana" / "dashboards"
GRAFANA_MACROS = {"$__rate_interval": "1m"}
"""Grafana's variables in the queries, as it would expand them for a 5 s scrape interval
(at least four scrapes; one minute leaves room for a slow first scrape)."""
TOPICS = [f"persistent://public/default/dashboards-{i}" for i in range(6)]
SETTINGS = {
    "statsUpdateFrequencyInSecs": 1,
    "defaultNumberOfNamespaceBundles": 4,
    # The shedder's own figures (pulsar_lb_resource_usage{feature="max_ema"}) exist from its first
    # pass, a minute after the leader is elected by default: run it every 3 s.
    "loadBalancerSheddingIntervalMinutes": 0.05,
}
QUERIES_TIMEOUT_S = 120.0


def dashboard_queries() -> Iterator[tuple[str, str, str]]:
    """(dashboard title, panel title, expression) for every target of every dashboard file."""
    for path in sorted(DASHBOARDS.glob("*.json")):
        dashboard = json.loads(path.read_text())
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                expr = target["expr"]
                for macro, value in GRAFANA_MACROS.items():
                    expr = expr.replace(macro, value)
                yield dashboard["title"], panel["title"], expr


def test_the_shipped_prometheus_config_passes_promtool() -> None:
    skip_unless_prometheus()
    checked = promtool_check_config(SHIPPED_CONFIG)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def targets_of(cluster: ProcessCluster) -> dict[str, list[str]]:
    assert cluster.metastore is not None
    return {
        "broker": [f"127.0.0.1:{broker.http_port}" for broker in cluster.brokers],
        "bookie": [f"127.0.0.1:{bookie.http_port}" for bookie in cluster.bookies],
        "metastore": [f"127.0.0.1:{cluster.metastore.http_port}"],
    }


@contextlib.asynccontextmanager
async def traffic(service_url: str) -> AsyncIterator[None]:
    """Producers on every topic, a consumer acking each message on subscription ``live``, and a
    subscription ``idle`` that only accumulates backlog; stopped when the context exits."""
    stop = asyncio.Event()

    async def produce(producer: Producer) -> None:
        while not stop.is_set():
            await producer.send(b"x" * 512)
            await asyncio.sleep(0.01)

    async def consume(consumer: Consumer) -> None:
        while not stop.is_set():
            with contextlib.suppress(Timeout):
                message = await consumer.receive(timeout_millis=200)
                await consumer.acknowledge(message)

    async with Client(service_url) as client:
        idle = [await client.subscribe(topic, "idle") for topic in TOPICS]
        for consumer in idle:
            await consumer.close()
        consumers = [await client.subscribe(topic, "live") for topic in TOPICS]
        producers = [await client.create_producer(topic) for topic in TOPICS]
        tasks = [asyncio.ensure_future(produce(p)) for p in producers]
        tasks += [asyncio.ensure_future(consume(c)) for c in consumers]
        try:
            yield
        finally:
            stop.set()
            await asyncio.gather(*tasks)


async def test_every_dashboard_query_returns_series_from_a_live_cluster(tmp_path: Path) -> None:
    """Goal: no dashboard panel is empty on a live cluster.
    Method: 3 bookies, 2 brokers, topics spread over both brokers with producers and consumers;
    Prometheus scrapes them with the shipped config; every target must be up, then every
    dashboard query must return at least one series (retried until a deadline: rates need two
    scrapes); the failures are listed with their dashboard and panel."""
    skip_unless_prometheus()
    queries = list(dashboard_queries())
    assert len(queries) > 50, "the dashboards were not found"
    async with make_cluster(tmp_path / "cluster", bookies=3, brokers=2, broker_settings=SETTINGS) as cluster:
        config = config_with_targets(targets_of(cluster))
        prometheus = PrometheusServer(tmp_path / "prometheus", config)
        await asyncio.to_thread(prometheus.start)
        try:
            checked = promtool_check_config(prometheus.config_path)
            assert checked.returncode == 0, checked.stdout + checked.stderr
            async with traffic(cluster.service_url):
                expected = len(cluster.brokers) + len(cluster.bookies) + 1
                await wait_for(
                    lambda: _all_up(prometheus, expected),
                    timeout_s=30,
                    interval_s=0.5,
                    message=f"not every target is up: {prometheus.targets_up()}",
                )
                failing: list[str] = []

                async def every_query_answers() -> bool:
                    failing[:] = await asyncio.to_thread(_failing_queries, prometheus, queries)
                    return not failing

                try:
                    await wait_for(every_query_answers, timeout_s=QUERIES_TIMEOUT_S, interval_s=2)
                except AssertionError:
                    pytest.fail(f"{len(failing)} of {len(queries)} dashboard queries fail:\n" + "\n".join(failing))
        except BaseException:
            print(prometheus.log_tail())
            raise
        finally:
            await asyncio.to_thread(prometheus.stop)


def _all_up(prometheus: PrometheusServer, expected: int) -> bool:
    up = prometheus.targets_up()
    return len(up) == expected and all(value == 1.0 for value in up.values())


def _failing_queries(prometheus: PrometheusServer, queries: list[tuple[str, str, str]]) -> list[str]:
    failing = []
    for dashboard, panel, expr in queries:
        answer = prometheus.query(expr)
        if answer.get("status") != "success":
            failing.append(f"{dashboard} / {panel}: {expr}  → error {answer.get('error')}")
        elif not answer["data"]["result"]:
            failing.append(f"{dashboard} / {panel}: {expr}  → no series")
    return failing
