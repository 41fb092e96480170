"""Fixtures shared by the cluster and fault tests (a plugin of tests/conftest.py).

- ``metastore``: a real metastore process per test, ``store`` a client of it; ``cluster``: a
  :func:`make_cluster` cluster (one bookie, one broker) per test; ``official``: Pulsar's own
  client (``pulsar.Client``) of whichever ``cluster`` the module declares, per test.
- A module that needs other settings, or one server for all its tests, declares its own with a
  factory, visible where its tests read it::

      cluster = cluster_fixture(brokers=3, broker_settings={"loadBalancerEnabled": True})
      cluster = cluster_fixture(per_module=True)   # its tests run on the module's event loop
      cluster = cluster_fixture(bookies=2, zookeeper_nodes=3)   # on a ZooKeeper ensemble, no metastore
      client = client_fixture(loop_scope="module")
      bookie = bookie_fixture(settings={"numReadWorkerThreads": 2})   # beside its own metastore

- Every process is stopped (TERM, then KILL) at teardown whatever the test did; a metastore still
  running then must exit cleanly (code 0).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypedDict, Unpack

import pytest
import pytest_asyncio

from minipulsar import Client
from minipulsar.metadata import MetadataStore, open_metadata_store
from tests.support.cluster import ProcessCluster, make_cluster
from tests.support.process import ServerProcess
from tests.support.servers import bookie_beside_metastore, metastore_process

STORE_SESSION_TIMEOUT_MS = 2000


class ClusterSettings(TypedDict, total=False):
    """What a cluster fixture may ask :func:`tests.support.cluster.make_cluster` for (all but its dirs)."""

    bookies: int
    brokers: int
    broker_settings: Mapping[str, object]
    bookie_settings: Mapping[str, object]
    zookeeper_nodes: int
    """On a ZooKeeper ensemble of this many nodes instead of a metastore (``cluster.zookeeper``)."""


def cluster_fixture(*, per_module: bool = False, **settings: Unpack[ClusterSettings]) -> Any:
    """A ``cluster`` fixture: a fresh cluster per test, or with ``per_module`` one for the module
    (its async tests then run on the module's loop: ``pytest.mark.asyncio(loop_scope="module")``)."""
    if per_module:

        @pytest_asyncio.fixture(name="cluster", scope="module", loop_scope="module")
        async def module_cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ProcessCluster]:
            async with make_cluster(tmp_path_factory.mktemp("cluster"), **settings) as cluster:
                yield cluster

        return module_cluster

    @pytest_asyncio.fixture(name="cluster")
    async def per_test_cluster(tmp_path: Path) -> AsyncIterator[ProcessCluster]:
        async with make_cluster(tmp_path, **settings) as cluster:
            yield cluster

    return per_test_cluster


def client_fixture(*, loop_scope: Literal["function", "module"] = "function") -> Any:
    """A ``client`` fixture: a :class:`minipulsar.Client` of the ``cluster`` fixture, per test,
    on the given loop (``"module"`` beside ``cluster_fixture(per_module=True)``)."""

    @pytest_asyncio.fixture(name="client", loop_scope=loop_scope)
    async def cluster_client(cluster: ProcessCluster) -> AsyncIterator[Client]:
        async with Client(cluster.service_url) as client:
            yield client

    return cluster_client


def bookie_fixture(settings: Mapping[str, object] | None = None) -> Any:
    """A ``bookie`` fixture: a bookie process with ``settings`` beside its own metastore, per test."""

    @pytest_asyncio.fixture(name="bookie")
    async def per_test_bookie(tmp_path: Path) -> AsyncIterator[ServerProcess]:
        async with bookie_beside_metastore(tmp_path, settings) as bookie:
            yield bookie

    return per_test_bookie


def metastore_fixture(*, per_module: bool = False, settings: Mapping[str, object] | None = None) -> Any:
    """A ``metastore`` fixture with ``settings`` (metastore.conf keys), per test or per module."""
    if per_module:

        @pytest.fixture(name="metastore", scope="module")
        def module_metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
            yield from _exits_cleanly(metastore_process(tmp_path_factory.mktemp("metastore"), settings=settings))

        return module_metastore

    @pytest.fixture(name="metastore")
    def per_test_metastore(tmp_path: Path) -> Iterator[ServerProcess]:
        yield from _exits_cleanly(metastore_process(tmp_path, settings=settings))

    return per_test_metastore


def _exits_cleanly(process: ServerProcess) -> Iterator[ServerProcess]:
    """Started, then stopped; fails the teardown if a process still running then exits with an error."""
    process.start()
    try:
        yield process
    finally:
        was_running = process.running
        code = process.stop()
    assert not was_running or code == 0, f"{process.role} exited with {code}\n{process.log_tail()}"


cluster = cluster_fixture()
metastore = metastore_fixture()


@pytest_asyncio.fixture
async def store(metastore: ServerProcess) -> AsyncIterator[MetadataStore]:
    """A client of the ``metastore`` fixture (a 2 s session, as the test servers'), closed after the test."""
    client = await open_metadata_store(metastore.url, session_timeout_ms=STORE_SESSION_TIMEOUT_MS)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture(name="official")
def official_cluster_client(cluster: ProcessCluster) -> Iterator[Any]:
    """A ``pulsar.Client`` (the official client) of the ``cluster`` fixture, per test, with
    short timeouts so a broker that never answers fails the test instead of hanging it."""
    import pulsar  # only the official-client tests load it

    client = pulsar.Client(cluster.service_url, operation_timeout_seconds=15, connection_timeout_ms=5_000)
    try:
        yield client
    finally:
        client.close()
