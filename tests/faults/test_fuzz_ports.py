"""Goal: bad input on every port — binary and HTTP — gets a typed answer, never a crash.

Method: one set of real server processes for the module (a metastore alone; a bookie beside
its own metastore; a cluster of metastore, bookie and broker). Hypothesis draws, per example,
one connection's bytes for a binary port (valid, near-valid and garbage frames, random length
prefixes, before or after CONNECT, in fragmented writes: :mod:`tests.support.fuzz`) or one
HTTP request against the routes the server registers. After each example:

- the answers keep the contract (:func:`~tests.support.fuzz.check_answers`: the sync request
  answered, or an ERROR and a close when the handshake was refused, or TooLarge and a close;
  only typed error codes) or, for HTTP, never a 5xx and a 4xx that says why;
- the process still runs and logged no ERROR;
- a normal client on another connection is still served.

CI runs a fixed, derandomized budget (well under 90 s in all on two shared cores);
``MINIPULSAR_FUZZ_EXAMPLES=2000`` runs that many random examples per test.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import pytest
import pytest_asyncio
from hypothesis import event, given
from hypothesis import strategies as st

from minipulsar import Client, Consumer, Producer
from minipulsar.bookie.http_api import BookieHttpApi
from minipulsar.bookie.server_connection import BookieServerConnection
from minipulsar.broker.admin import admin_routes
from minipulsar.broker.admin_bookies import bookie_routes
from minipulsar.broker.admin_namespaces import namespace_routes
from minipulsar.broker.broker_stats import broker_stats_routes
from minipulsar.broker.console.routes import console_routes
from minipulsar.broker.server import BrokerConnection
from minipulsar.metadata import MetadataStore, open_metadata_store
from minipulsar.metadata.server import MetastoreConnection
from minipulsar.net import connect
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.schema import Command
from tests.support.cluster import ProcessCluster
from tests.support.fixtures import cluster_fixture, metastore_fixture
from tests.support.fuzz import (
    SYNC_ID,
    ByteStream,
    HttpRequest,
    byte_streams,
    check_answers,
    check_http_answer,
    exchange,
    expected_outcome,
    fuzz_settings,
    http_exchange,
    http_requests,
    route_paths,
)
from tests.support.process import ServerProcess
from tests.support.raw_client import RawClient, RawPeer, add_entry, read_entries
from tests.support.servers import bookie_beside_metastore
from tests.support.web import http_request, web_url

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

metastore = metastore_fixture(per_module=True)
cluster = cluster_fixture(per_module=True)

HEALTH_LEDGER = 0x3A5E_0000_0001
HEALTH_TOPIC = "persistent://public/default/fuzz-health"
_health_entries = itertools.count()


def served(connection: type[Any], *extra: type[Command]) -> list[type[Command]]:
    """The commands a server connection class handles, plus CONNECT and PING."""
    return sorted({*connection._HANDLERS, *extra, cmd.Connect, cmd.Ping}, key=lambda c: c.TYPE)


METASTORE_COMMANDS = served(MetastoreConnection)
BOOKIE_COMMANDS = served(BookieServerConnection, cmd.AddEntry)
BROKER_COMMANDS = served(BrokerConnection)
_none = cast(Any, None)
BOOKIE_ROUTES = route_paths(BookieHttpApi(_none).routes())
BROKER_ROUTES = route_paths(
    [
        *admin_routes(_none, _none, _none, _none),
        *namespace_routes(_none, _none, "standalone", _none, lambda: None),
        *broker_stats_routes(_none, _none, _none),
        *bookie_routes(_none),
        *console_routes(_none),
    ]
)

METASTORE_VALUES = {"path": ["/", "/fuzz", "/fuzz/a", "/fuzz-health", "/fuzz/"], "session_id": [1, 2, 3]}
BOOKIE_VALUES = {
    "ledger_id": [1, 2, HEALTH_LEDGER + 1],
    "entry_id": [0, 1, 2],
    "first_entry_id": [0, 1],
    "lac": [-1, 0],
}
BROKER_VALUES = {
    "topic": [
        "persistent://public/default/fuzz-a",
        "fuzz-b",
        "non-persistent://public/default/fuzz-c",
        "persistent://public/default/fuzz-p-partition-0",
        "persistent://fuzz/ns/t",
    ],
    "namespace": ["public/default", "fuzz/ns", "public"],
    "subscription": ["s", "fuzz-health"],
    "producer_id": [0, 1],
    "consumer_id": [0, 1],
    "message_ids": [[[0, 0]], [[1, 0], [0, 1]]],
    "start_message_id": [[0, 0], [-1, -1]],
}
METASTORE_SYNC = cmd.MdGet(id=SYNC_ID, path="/")
BOOKIE_SYNC = cmd.BookieInfo(id=SYNC_ID)
BROKER_SYNC = cmd.CloseProducer(producer_id=SYNC_ID, id=SYNC_ID)


async def max_frame_size(server: ServerProcess) -> int:
    peer = await RawPeer.open(server.host, server.port)
    try:
        connected = await peer.handshake()
    finally:
        peer.close()
    assert isinstance(connected, cmd.Connected), connected
    return connected.max_frame_size


async def fuzz_binary(
    server: ServerProcess, stream: ByteStream, healthy: Callable[[], Awaitable[None]], sniffs: bool = False
) -> None:
    """One example on a binary port: its answers, then the process and another client.
    ``sniffs``: the port also speaks Pulsar's protocol (the broker's)."""
    outcome = expected_outcome(stream, await max_frame_size(server), sniffs)
    event(outcome.name)
    answers = await exchange(server.host, server.port, stream, outcome)
    check_answers(answers, outcome)
    await after_example(server, healthy)


async def fuzz_http(
    server: ServerProcess, request: HttpRequest, reason_key: str, healthy: Callable[[], Awaitable[None]]
) -> None:
    answer = await http_exchange(server.host, server.http_port, request)
    event(f"HTTP {answer.status if answer is not None else 'reset'}")
    check_http_answer(request, answer, reason_key)
    await after_example(server, healthy)


async def after_example(server: ServerProcess, healthy: Callable[[], Awaitable[None]]) -> None:
    await healthy()
    assert server.running, server.log_tail()
    errors = server.new_error_records()
    assert not errors, f"{server.role} logged ERROR: {errors}"


# -- metastore ------------------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def metastore_client(metastore: ServerProcess) -> AsyncIterator[MetadataStore]:
    client = await open_metadata_store(metastore.url, session_timeout_ms=5000)
    yield client
    await client.close()


@fuzz_settings(ci_examples=200)
@given(stream=byte_streams(METASTORE_COMMANDS, METASTORE_SYNC, METASTORE_VALUES))
async def test_metastore_port(metastore: ServerProcess, metastore_client: MetadataStore, stream: ByteStream) -> None:
    async def healthy() -> None:
        tag = str(next(_health_entries)).encode()
        await metastore_client.put("/fuzz-health", tag)
        assert (await metastore_client.get("/fuzz-health")).value == tag

    await fuzz_binary(metastore, stream, healthy)


# -- bookie ---------------------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def bookie(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServerProcess]:
    async with bookie_beside_metastore(tmp_path_factory.mktemp("bookie")) as process:
        yield process


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def bookie_client(bookie: ServerProcess) -> AsyncIterator[RawClient]:
    client = await connect(RawClient, bookie.host, bookie.port)
    yield client
    client.close()


async def bookie_serves(bookie: ServerProcess, client: RawClient) -> None:
    """Writable again (an example may have turned it read-only by hand), then an add and its read."""
    readonly_url = f"{web_url(bookie)}/api/v1/bookie/state/readonly"
    status, state = await asyncio.to_thread(http_request, "GET", readonly_url)
    if status == 200 and state["readOnly"]:
        status, state = await asyncio.to_thread(http_request, "PUT", readonly_url, {"readOnly": False})
        assert (status, state) == (200, {"readOnly": False}), state
    entry_id = next(_health_entries)
    payload = f"healthy {entry_id}".encode()
    await add_entry(client, HEALTH_LEDGER, entry_id, payload, lac=entry_id - 1)
    assert await read_entries(client, HEALTH_LEDGER, entry_id) == [(entry_id, payload)]


@fuzz_settings(ci_examples=250)
@given(stream=byte_streams(BOOKIE_COMMANDS, BOOKIE_SYNC, BOOKIE_VALUES))
async def test_bookie_port(bookie: ServerProcess, bookie_client: RawClient, stream: ByteStream) -> None:
    await fuzz_binary(bookie, stream, lambda: bookie_serves(bookie, bookie_client))


@fuzz_settings(ci_examples=300)
@given(request=http_requests(BOOKIE_ROUTES, {}))
async def test_bookie_http_port(bookie: ServerProcess, bookie_client: RawClient, request: HttpRequest) -> None:
    await fuzz_http(bookie, request, "error", lambda: bookie_serves(bookie, bookie_client))


# -- broker ---------------------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def health(cluster: ProcessCluster) -> AsyncIterator[tuple[Producer, Consumer]]:
    async with Client(cluster.service_url) as client:
        consumer = await client.subscribe(HEALTH_TOPIC, "fuzz-health")
        producer = await client.create_producer(HEALTH_TOPIC)
        yield producer, consumer


async def broker_serves(cluster: ProcessCluster, health: tuple[Producer, Consumer]) -> None:
    producer, consumer = health
    payload = f"healthy {next(_health_entries)}".encode()
    await producer.send(payload)
    message = await consumer.receive(timeout_millis=20_000)
    assert message.data() == payload
    await consumer.acknowledge(message)
    assert cluster.broker is not None
    status, _ = await asyncio.to_thread(http_request, "GET", f"{web_url(cluster.broker)}/admin/v2/clusters")
    assert status == 200


@fuzz_settings(ci_examples=250)
@given(stream=byte_streams(BROKER_COMMANDS, BROKER_SYNC, BROKER_VALUES))
async def test_broker_port(cluster: ProcessCluster, health: tuple[Producer, Consumer], stream: ByteStream) -> None:
    assert cluster.broker is not None
    await fuzz_binary(cluster.broker, stream, lambda: broker_serves(cluster, health), sniffs=True)


def broker_values(cluster: ProcessCluster) -> dict[str, list[str]]:
    """Realistic values of the broker routes' placeholders: the paths then reach the handlers."""
    return {
        "domain": ["persistent", "non-persistent"],
        "tenant": ["public", "fuzz"],
        "namespace": ["default", "fuzz-ns"],
        "topic": ["fuzz-topic", "fuzz-partitioned"],
        "bundle": ["0x00000000_0x40000000", "0x00000000_0xffffffff", "0x40000000_0x80000000"],
        "cluster": ["standalone"],
        "broker": [cluster.broker_id(0)],
    }


@fuzz_settings(ci_examples=300)
@given(data=st.data())
async def test_broker_http_port(
    cluster: ProcessCluster, health: tuple[Producer, Consumer], data: st.DataObject
) -> None:
    assert cluster.broker is not None
    request = data.draw(http_requests(BROKER_ROUTES, broker_values(cluster)), label="request")
    await fuzz_http(cluster.broker, request, "reason", lambda: broker_serves(cluster, health))


# -- what the fuzz found ----------------------------------------------------------------------------

DEEP_JSON = b"[" * 100_000 + b"]" * 100_000
"""Valid JSON nested deeper than the parser recurses: ``json`` raises RecursionError, not ValueError."""


@pytest.mark.parametrize("path", ["/api/v1/bookie/gc", "/api/v1/bookie/state/readonly"])
async def test_a_bookie_body_nested_too_deep_is_a_400(bookie: ServerProcess, path: str) -> None:
    """Goal: a JSON body too deep to parse is bad input (it answered 500)."""
    answer = await http_exchange(bookie.host, bookie.http_port, HttpRequest("PUT", path, (), DEEP_JSON))
    assert answer is not None and answer.status == 400, answer
    assert "JSON object" in json.loads(answer.body)["error"]


@pytest.mark.parametrize(
    "path, body",
    [
        ("/admin/v2/tenants/fuzz-deep", DEEP_JSON),
        ("/admin/v2/tenants/fuzz-latin1", b"\x80"),  # not UTF-8
        ("/admin/v2/namespaces/public/fuzz-deep", DEEP_JSON),
        ("/admin/v2/persistent/public/default/fuzz-deep/partitions", DEEP_JSON),
    ],
    ids=["tenant-deep", "tenant-not-utf8", "namespace-deep", "partitions-deep"],
)
async def test_a_broker_body_that_does_not_parse_is_a_400(cluster: ProcessCluster, path: str, body: bytes) -> None:
    """Goal: a body that is not UTF-8, or JSON too deep to parse, is bad input (both answered 500)."""
    assert cluster.broker is not None
    answer = await http_exchange(cluster.broker.host, cluster.broker.http_port, HttpRequest("PUT", path, (), body))
    assert answer is not None and answer.status == 400, answer
    assert json.loads(answer.body)["reason"]
