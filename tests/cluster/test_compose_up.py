"""Both compose files brought up with Docker: the images build from this tree, every service
becomes healthy, a produce/consume round trip goes through the broker, and the bookies and
the broker are registered in the variant's metadata store (the metastore, or ZooKeeper).

Skipped, with the reason, where Docker cannot run (tests.support.docker_compose); the images
are built with the host's network from ``BASE_IMAGE`` / ``ZOOKEEPER_BASE_IMAGE`` (the files'
defaults, or local stand-ins named in the environment).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.docker_compose import ComposeProject, build_images, docker_unavailable_reason

pytestmark = pytest.mark.timeout(1200)  # a cold build of both images; seconds once cached


@pytest.fixture(scope="module")
def images() -> None:
    reason = docker_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    build_images()


def project_up(variant: str, root: Path) -> Iterator[ComposeProject]:
    project = ComposeProject(variant, root)
    try:
        project.up()
        yield project
    finally:
        project.down()


@pytest.fixture(params=["metastore", "zookeeper"])
def project(request: pytest.FixtureRequest, images: None, tmp_path: Path) -> Iterator[ComposeProject]:
    yield from project_up(request.param, tmp_path)


@pytest.fixture
def zookeeper_project(images: None, tmp_path: Path) -> Iterator[ComposeProject]:
    yield from project_up("zookeeper", tmp_path)


def test_compose_cluster_serves_a_round_trip_with_every_server_registered(project: ComposeProject) -> None:
    project.wait_logged("broker", "READY broker")
    service_url = ("--service-url", "pulsar://broker:6650")
    produced = project.minipulsar("produce", "compose-topic", "-m", "hello", "-n", "10", *service_url)
    assert produced.returncode == 0, produced.stderr
    consumed = project.minipulsar("consume", "compose-topic", "-s", "sub", "-n", "10", *service_url)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.count("content:hello") == 10, consumed.stdout

    [bookie_url] = project.bookie_metadata_urls()
    bookies = project.minipulsar("admin", "bookies", "--metadata-url", bookie_url, "list")
    assert bookies.returncode == 0, bookies.stderr
    assert all(f"bookie-{i}:3181" in bookies.stdout for i in (1, 2, 3)), bookies.stdout
    brokers = project.minipulsar("admin", "--admin-url", "http://broker:8080", "brokers", "list")
    assert brokers.returncode == 0 and "broker:8080" in brokers.stdout, (brokers.stdout, brokers.stderr)
    assert project.error_lines() == []


SESSION_LOST = re.compile(r"ZooKeeper session \S+ lost$")
"""minipulsar.metadata.zookeeper's line when a session expired (or was given up as expired)."""
RECONNECTED = re.compile(r"reconnected to ZooKeeper .* \(Reconnected\)$")
"""Its line when a connection came back within the session."""
SERVERS = ("broker", "bookie-1", "bookie-2", "bookie-3")
SESSION_TIMEOUT_S = 30.0
"""zkTimeout and metadataStoreSessionTimeoutMillis, the compose file's servers' defaults."""


def wait_for_reconnections(project: ComposeProject, seen: dict[str, int]) -> dict[str, str]:
    """Server → ``reconnected`` or ``session lost``, from the lines each logged after the first
    ``seen[server]``, once every server logged one (a session outlives its timeout by no more
    than one connection attempt, itself bounded by the timeout)."""
    deadline = time.monotonic() + 3 * SESSION_TIMEOUT_S
    while True:
        outcomes = {}
        for server in SERVERS:
            new = project.logs(server)[seen[server] :]
            if any(SESSION_LOST.search(line) for line in new):
                outcomes[server] = "session lost"
            elif any(RECONNECTED.search(line) for line in new):
                outcomes[server] = "reconnected"
        if len(outcomes) == len(SERVERS):
            return outcomes
        assert time.monotonic() < deadline, f"no reconnection nor session loss logged: {outcomes}"
        time.sleep(0.5)  # polling the logs for a condition, with a deadline


def test_zookeeper_leader_sigkilled_in_docker_is_a_connection_loss_not_a_session_loss(
    zookeeper_project: ComposeProject,
) -> None:
    """Goal: the ensemble's leader dying costs the servers their connection, not their sessions:
    two nodes elect a leader within seconds, well inside the 30 s sessions, so the broker keeps its
    bundles, the bookies their registrations, and a producer is served.
    Method: SIGKILL the leader's container (unlike a local process, whose port refuses at once, its
    address then swallows connection attempts), produce again, read the servers' logs. (A
    connection attempt to the dead address gives up after session ÷ servers, as ZooKeeper's Java
    client; kazoo's own whole-session connect timeout expired the sessions in 2 of 3 runs.)"""
    project = zookeeper_project
    project.wait_logged("broker", "READY broker")
    service_url = ("--service-url", "pulsar://broker:6650")
    before = project.minipulsar("produce", "leader-topic", "-m", "before", "-n", "10", *service_url)
    assert before.returncode == 0, before.stderr
    nodes = [name for name in project.services if name.startswith("zookeeper-")]
    [leader] = [node for node in nodes if project.zookeeper_mode(node) == "leader"]
    seen = {server: len(project.logs(server)) for server in SERVERS}
    assert project.compose("kill", leader).returncode == 0

    after = project.minipulsar("produce", "leader-topic", "-m", "after", "-n", "10", *service_url)
    outcomes = wait_for_reconnections(project, seen)
    assert after.returncode == 0 and set(outcomes.values()) == {"reconnected"}, (after.stderr, outcomes)
    consumed = project.minipulsar("consume", "leader-topic", "-s", "sub", "-n", "20", *service_url)
    assert consumed.stdout.count("content:before") == consumed.stdout.count("content:after") == 10
