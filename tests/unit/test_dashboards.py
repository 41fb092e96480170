"""The Grafana dashboards and their provisioning, checked as files: the JSON is what
docker/grafana/generate_dashboards.py writes, every panel reads the provisioned data source, and
the queries keep the generator's conventions (tests/cluster/test_prometheus_dashboards.py runs
them against a real Prometheus)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

DOCKER = Path(__file__).resolve().parents[2] / "docker"
GRAFANA = DOCKER / "grafana"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_dashboards", GRAFANA / "generate_dashboards.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def dashboards() -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted((GRAFANA / "dashboards").glob("*.json"))]


def queries() -> list[str]:
    return [target["expr"] for d in dashboards() for p in d["panels"] for target in p.get("targets", [])]


def test_the_committed_json_is_what_the_generator_writes() -> None:
    assert generator().main(["--check"]) == 0, "run: python docker/grafana/generate_dashboards.py"


def test_there_is_a_dashboard_for_each_thing_the_reports_watch() -> None:
    titles = {d["title"] for d in dashboards()}
    assert titles == {
        "minipulsar / Broker",
        "minipulsar / Bookie",
        "minipulsar / BookKeeper client",
        "minipulsar / Load balancer",
        "minipulsar / Metadata store",
    }


def test_every_panel_reads_the_provisioned_data_source() -> None:
    provisioned = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    [source] = provisioned["datasources"]
    assert source["url"] == "http://prometheus:9090"
    for dashboard in dashboards():
        ids = [panel["id"] for panel in dashboard["panels"]]
        assert len(ids) == len(set(ids)), dashboard["title"]
        for panel in dashboard["panels"]:
            if panel["type"] != "row":
                assert panel["datasource"]["uid"] == source["uid"], panel["title"]
                assert panel["targets"], panel["title"]


def test_the_dashboard_provider_reads_the_mounted_folder() -> None:
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "minipulsar.yml").read_text())
    [entry] = provider["providers"]
    assert entry["options"]["path"] == "/var/lib/grafana/dashboards"


@pytest.mark.parametrize("expr", queries())
def test_a_query_keeps_the_conventions(expr: str) -> None:
    # Histograms only through histogram_quantile, over rate() of their buckets.
    for bucket in re.findall(r"\w+_bucket\b", expr):
        assert f"rate({bucket}" in expr and "histogram_quantile(" in expr, expr
    # Counters only through rate() or increase().
    for counter in re.findall(r"\w+_total\b", expr):
        assert re.search(rf"(rate|increase)\({counter}\b", expr), expr
    # Windows are Grafana's $__rate_interval, never a literal.
    assert not re.search(r"\[\d+[smh]\]", expr), expr
