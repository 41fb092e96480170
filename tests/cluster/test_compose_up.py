"""Both compose files brought up with Docker: the images build from this tree, every service
becomes healthy, clients on the host produce and consume through both brokers (a lookup on one
redirected to the other), and the bookies and both brokers are registered in the variant's
metadata store (the metastore, or ZooKeeper).

Skipped, with the reason, where Docker cannot run (tests.support.docker_compose); the images
are built with the host's network from ``BASE_IMAGE`` / ``ZOOKEEPER_BASE_IMAGE`` (the files'
defaults, or local stand-ins named in the environment). The host reaches the containers only
through the brokers' published ports (on 127.0.0.1, moved to free ports by ComposeProject).
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minipulsar import InitialPosition
from minipulsar.sync import Client
from tests.support.cli import run_admin, run_cli
from tests.support.docker_compose import ComposeProject, build_images, docker_unavailable_reason
from tests.support.web import http_get, sample_value

pytestmark = pytest.mark.timeout(1200)  # a cold build of both images; seconds once cached

SERVING_TIMEOUT_S = 120.0
"""From ``up`` returning (the bookies healthy) to both brokers' health checks answering 200."""
MESSAGES = 10
WHOLE_RANGE = "0x00000000_0xffffffff"
"""The one bundle of a namespace created with one bundle."""


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


def wait_serving(project: ComposeProject, timeout_s: float = SERVING_TIMEOUT_S) -> None:
    """Until every broker's health check answers 200 through its published port."""
    deadline = time.monotonic() + timeout_s
    for broker in project.brokers:
        last: OSError | None = None
        while True:
            try:
                http_get(f"{project.web_url(broker)}/admin/v2/brokers/health", timeout_s=5)
                break
            except OSError as error:  # not up yet: refused, reset, or 503 (an HTTPError)
                last = error
            assert time.monotonic() < deadline, f"{broker} not serving within {timeout_s:g}s ({last!r}):\n" + "\n".join(
                project.logs(broker)[-30:]
            )
            time.sleep(0.5)  # polling for a condition, with a deadline


def compose_admin(project: ComposeProject, *argv: str) -> str:
    """``minipulsar admin ARGV`` from the host against the first broker; its output."""
    code, out, err = run_admin("--admin-url", project.web_url(project.brokers[0]), *argv)
    assert code == 0, (argv, out, err)
    return out.strip()


def place_namespace_on(project: ComposeProject, namespace: str, broker: str) -> None:
    """Create ``namespace`` with one bundle and make ``broker`` its owner by a hand-over from the
    other broker: looked up (the load manager places it), given to the other broker first if it
    went to ``broker``, then unloaded to ``broker`` as its destinationBroker. A hand-over is one
    broker calling the other's advertised web URL (what the shared network namespace is for)."""
    compose_admin(project, "namespaces", "create", namespace, "--bundles", "1")
    topic = f"persistent://{namespace}/placement"
    other = next(name for name in project.brokers if name != broker)
    if compose_admin(project, "topics", "lookup", topic) == project.service_url(broker):
        hand_over(project, topic, other)
    hand_over(project, topic, broker)


def hand_over(project: ComposeProject, topic: str, broker: str) -> None:
    """Unload the bundle of ``topic`` (its namespace's only one) to ``broker``, which then owns it."""
    namespace = topic.removeprefix("persistent://").rsplit("/", 1)[0]
    compose_admin(project, "namespaces", "unload", namespace, "-b", WHOLE_RANGE, "-d", project.broker_id(broker))
    assert compose_admin(project, "topics", "lookup", topic) == project.service_url(broker), (
        f"{broker} did not take {topic}"
    )


def round_trip(service_url: str, topic: str, count: int) -> list[str]:
    """Subscribe, produce ``count`` messages, receive them, on one client of ``service_url``."""
    client = Client(service_url)
    try:
        consumer = client.subscribe(topic, "compose", initial_position=InitialPosition.Earliest)
        producer = client.create_producer(topic)
        for i in range(count):
            producer.send(f"message-{i}".encode())
        received = []
        for _ in range(count):
            message = consumer.receive(timeout_millis=10_000)
            consumer.acknowledge(message)
            received.append(message.data().decode())
        return received
    finally:
        client.close()


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a 307 is raised as an HTTPError


def served_stats(web_url: str, topic: str) -> dict[str, Any]:
    """The topic's stats from the broker at ``web_url`` itself: it fails if that broker answers
    307 (another broker serves the topic)."""
    url = f"{web_url}/admin/v2/{topic.replace('://', '/')}/stats"
    with urllib.request.build_opener(_NoRedirects).open(url, timeout=10) as response:
        stats: dict[str, Any] = json.loads(response.read())
    return stats


def lookup_redirects(project: ComposeProject, broker: str) -> float:
    text = http_get(f"{project.web_url(broker)}/metrics")
    return sample_value(text, "pulsar_broker_lookup_redirects_total") or 0.0


def test_compose_cluster_serves_through_both_brokers_with_every_server_registered(project: ComposeProject) -> None:
    """Goal: from the host, each broker serves the topics it owns, and a client given the other
    broker's address is redirected to it (at an address the host reaches).
    Method: one namespace (one bundle) handed over to each broker; per namespace, a client of the
    other broker subscribes, produces and consumes; the other broker counted a redirect, and the
    owner's own stats (no 307 followed) count every message in and out."""
    wait_serving(project)
    first, second = project.brokers
    assert sorted(compose_admin(project, "brokers", "list").split()) == sorted(
        [project.broker_id(first), project.broker_id(second)]
    )

    for owner, other in ((first, second), (second, first)):
        namespace = f"public/compose-{owner}"
        place_namespace_on(project, namespace, owner)
        topic = f"persistent://{namespace}/round-trip"
        redirects = lookup_redirects(project, other)
        received = round_trip(project.service_url(other), topic, MESSAGES)
        assert received == [f"message-{i}" for i in range(MESSAGES)]
        assert lookup_redirects(project, other) > redirects
        stats = served_stats(project.web_url(owner), topic)
        assert (stats["msgInCounter"], stats["msgOutCounter"]) == (MESSAGES, MESSAGES), (owner, stats)

    [bookie_url] = project.bookie_metadata_urls()
    bookies = project.minipulsar("admin", "bookies", "--metadata-url", bookie_url, "list")
    assert bookies.returncode == 0, bookies.stderr
    assert all(f"bookie-{i}:3181" in bookies.stdout for i in (1, 2, 3)), bookies.stdout
    assert project.error_lines() == []


SESSION_LOST = re.compile(r"ZooKeeper session \S+ lost$")
"""minipulsar.metadata.zookeeper's line when a session expired (or was given up as expired)."""
RECONNECTED = re.compile(r"reconnected to ZooKeeper .* \(Reconnected\)$")
"""Its line when a connection came back within the session."""
SERVERS = ("broker-1", "broker-2", "bookie-1", "bookie-2", "bookie-3")
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
    wait_serving(project)
    service_url = ("--service-url", project.service_url(project.brokers[0]))
    before = run_cli("produce", "leader-topic", "-m", "before", "-n", "10", *service_url)
    assert before.returncode == 0, before.stderr
    nodes = [name for name in project.services if name.startswith("zookeeper-")]
    [leader] = [node for node in nodes if project.zookeeper_mode(node) == "leader"]
    seen = {server: len(project.logs(server)) for server in SERVERS}
    assert project.compose("kill", leader).returncode == 0

    after = run_cli("produce", "leader-topic", "-m", "after", "-n", "10", *service_url)
    outcomes = wait_for_reconnections(project, seen)
    assert after.returncode == 0 and set(outcomes.values()) == {"reconnected"}, (after.stderr, outcomes)
    consumed = run_cli("consume", "leader-topic", "-s", "sub", "-n", "20", *service_url)
    assert consumed.stdout.count("content:before") == consumed.stdout.count("content:after") == 10
