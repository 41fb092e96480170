"""Both compose files brought up with Docker: the images build from this tree, every service
becomes healthy, a produce/consume round trip goes through the broker, and the bookies and
the broker are registered in the variant's metadata store (the metastore, or ZooKeeper).

Skipped, with the reason, where Docker cannot run (tests.support.docker_compose); the images
are built with the host's network from ``BASE_IMAGE`` / ``ZOOKEEPER_BASE_IMAGE`` (the files'
defaults, or local stand-ins named in the environment).
"""

from __future__ import annotations

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


@pytest.fixture(params=["metastore", "zookeeper"])
def project(request: pytest.FixtureRequest, images: None, tmp_path: Path) -> Iterator[ComposeProject]:
    project = ComposeProject(request.param, tmp_path)
    try:
        project.up()
        yield project
    finally:
        project.down()


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
