"""A real Prometheus server (Debian's ``prometheus`` package) scraping a test cluster.

The configuration is the one the compose file ships (docker/prometheus/prometheus.yml) with only
each job's targets replaced, so what the tests check is what an operator runs. The server listens
on a free port on 127.0.0.1, keeps its TSDB under the test's tmp dir, and is stopped (TERM, then
KILL) by :meth:`PrometheusServer.stop` whatever happened.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.apt import apt_install
from tests.support.net import free_ports

REPO = Path(__file__).resolve().parents[2]
SHIPPED_CONFIG = REPO / "docker" / "prometheus" / "prometheus.yml"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
HTTP_TIMEOUT_S = 5.0


def prometheus_unavailable_reason() -> str | None:
    """None when ``prometheus`` and ``promtool`` run here (installed with apt-get first where root
    and Debian's package lists allow), else why not."""

    def installed() -> bool:
        return shutil.which("prometheus") is not None and shutil.which("promtool") is not None

    if not installed():
        apt_install(["prometheus"], installed, recommends=False)
    if not installed():
        return "prometheus/promtool not found and not installable (Debian's prometheus package needs root and apt-get)"
    return None


def skip_unless_prometheus() -> None:
    reason = prometheus_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


def promtool_check_config(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["promtool", "check", "config", str(path)], capture_output=True, text=True, timeout=30, check=False
    )


def config_with_targets(targets: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """The shipped configuration with each job's ``static_configs`` targets replaced by
    ``targets[job]``; every job of the file must be given, and no other."""
    config: dict[str, Any] = yaml.safe_load(SHIPPED_CONFIG.read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == set(targets), f"jobs in {SHIPPED_CONFIG.name}: {sorted(jobs)}, given: {sorted(targets)}"
    for name, job in jobs.items():
        job["static_configs"] = [{"targets": list(targets[name])}]
    return config


class PrometheusServer:
    def __init__(self, root: Path, config: Mapping[str, Any]) -> None:
        self.root = root
        self.config_path = root / "prometheus.yml"
        self.log_path = root / "prometheus.log"
        self._config = config
        self._proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(dict(self._config), sort_keys=False))
        [self.port] = free_ports(1)
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [
                    "prometheus",
                    f"--config.file={self.config_path}",
                    f"--storage.tsdb.path={self.root / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._ready():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"prometheus did not become ready; its log:\n{self.log_tail()}")
            time.sleep(0.1)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=HTTP_TIMEOUT_S) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def stop(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def api(self, path: str, **params: str) -> dict[str, Any]:
        """GET ``/api/v1/<path>``; the JSON answer, also for a 400/422 (Prometheus's errors are JSON)."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as response:
                answer: dict[str, Any] = json.load(response)
        except urllib.error.HTTPError as error:
            answer = json.load(error)
        return answer

    def query(self, expr: str) -> dict[str, Any]:
        """An instant query: ``{"status": "success", "data": {"result": [...]}}`` or an error."""
        return self.api("query", query=expr)

    def targets_up(self) -> dict[str, float]:
        """``job/instance`` → the value of ``up`` for every scrape target."""
        result = self.query("up").get("data", {}).get("result", [])
        return {
            f"{series['metric']['job']}/{series['metric']['instance']}": float(series["value"][1]) for series in result
        }
