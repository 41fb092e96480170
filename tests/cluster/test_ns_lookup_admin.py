"""Namespaces, bundles, ownership and lookup on a real 3-broker cluster, through the binary
protocol, the HTTP lookup and the ``minipulsar admin`` CLI.

Method: one cluster (metastore, 1 bookie, 3 brokers, the load manager as configured by default)
for the whole module; raw protocol connections for LOOKUP and PRODUCER; the admin CLI run
in-process on a thread (and once as a real command) against one broker or another. Bundle
operations use namespaces of their own so the tests do not disturb each other.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from minipulsar.errors import NotOwnerError
from minipulsar.net import connect, parse_address
from minipulsar.protocol import commands as cmd
from tests.support.cli import run_admin
from tests.support.cluster import ProcessCluster
from tests.support.fixtures import cluster_fixture
from tests.support.process import ServerProcess, wait_for
from tests.support.raw_client import RawClient
from tests.support.web import get_json, metrics_text, sample_value, web_url

pytestmark = pytest.mark.asyncio(loop_scope="module")

TOPICS = [f"persistent://public/default/lookup-{i}" for i in range(8)]
LOOKUP_TIMEOUT_S = 20.0
"""An HTTP lookup or admin GET, following the 307s to the owner."""


cluster = cluster_fixture(per_module=True, brokers=3)


async def lookup_once(address: tuple[str, int], topic: str, authoritative: bool) -> cmd.LookupResponse:
    connection = await connect(RawClient, *address)
    try:
        return await connection.request(cmd.Lookup, topic=topic, authoritative=authoritative)
    finally:
        connection.close()


async def owner_via(broker: ServerProcess, topic: str) -> str:
    """Follow LOOKUP redirects from ``broker`` to the answer ``connect`` (retrying a transient
    ``failed``, e.g. while the load manager elects its leader)."""
    found: list[str] = []

    async def resolved() -> bool:
        address, authoritative = (broker.host, broker.port), False
        for _ in range(20):
            answer = await lookup_once(address, topic, authoritative)
            if answer.kind == "connect":
                found.append(answer.broker_url)
                return True
            if answer.kind == "failed":
                assert answer.error in ("ServiceNotReady", "TooManyRequests"), answer
                return False
            address, authoritative = parse_address(answer.broker_url, 6650), answer.authoritative
        raise AssertionError(f"{topic}: more than 20 redirects")

    await wait_for(resolved, 20, message=f"no broker took {topic}")
    return found[-1]


async def admin(*argv: str) -> tuple[int, str, str]:
    """``minipulsar admin ARGV`` in-process (on a thread): (exit code, stdout, stderr)."""
    return await asyncio.to_thread(run_admin, *argv)


def broker_of(cluster: ProcessCluster, service_url: str) -> ServerProcess:
    return next(b for b in cluster.brokers if f"pulsar://{b.address}" == service_url)


async def owned_bundles(broker: ServerProcess) -> dict:
    url = f"{web_url(broker)}/admin/v2/brokers/standalone/{broker.host}:{broker.http_port}/ownedNamespaces"
    return await asyncio.to_thread(get_json, url, LOOKUP_TIMEOUT_S)


async def test_lookups_from_any_broker_agree_on_the_owner(cluster: ProcessCluster) -> None:
    for topic in TOPICS:
        owners = {await owner_via(broker, topic) for broker in cluster.brokers}
        assert len(owners) == 1, (topic, owners)
        owner = owners.pop()
        for broker in cluster.brokers:  # HTTP lookup on each broker agrees (307s followed)
            local = topic.rsplit("/", 1)[1]
            url = f"{web_url(broker)}/lookup/v2/topic/persistent/public/default/{local}"
            data = await asyncio.to_thread(get_json, url, LOOKUP_TIMEOUT_S)
            assert data["brokerUrl"] == owner
    owned = {name for broker in cluster.brokers for name in await owned_bundles(broker)}
    assert owned and all(name.startswith("public/default/0x") for name in owned)


async def test_producer_on_a_broker_that_does_not_own_the_bundle_gets_not_owner(cluster: ProcessCluster) -> None:
    topic = TOPICS[0]
    owner = await owner_via(cluster.broker, topic)
    other = next(b for b in cluster.brokers if f"pulsar://{b.address}" != owner)
    connection = await connect(RawClient, other.host, other.port)
    try:
        with pytest.raises(NotOwnerError):
            await connection.request(cmd.Producer, topic=topic, producer_id=1)
    finally:
        connection.close()
    owner_broker = broker_of(cluster, owner)
    connection = await connect(RawClient, owner_broker.host, owner_broker.port)
    try:
        created = await connection.request(cmd.Producer, topic=topic, producer_id=1)
        assert isinstance(created, cmd.ProducerSuccess)
    finally:
        connection.close()


async def test_admin_lists_brokers_and_creates_tenants_and_namespaces(cluster: ProcessCluster) -> None:
    url = ["--admin-url", web_url(cluster.brokers[1])]
    code, out, _ = await admin(*url, "brokers", "list")
    assert code == 0 and sorted(out.split()) == sorted(f"{b.host}:{b.http_port}" for b in cluster.brokers)
    assert (await admin(*url, "tenants", "create", "acme"))[0] == 0
    assert (await admin(*url, "namespaces", "create", "acme/orders", "--bundles", "8"))[0] == 0
    code, out, _ = await admin(*url, "namespaces", "bundles", "acme/orders")
    assert code == 0 and json.loads(out)["numBundles"] == 8 and json.loads(out)["boundaries"][-1] == "0xffffffff"
    code, out, _ = await admin("--admin-url", web_url(cluster.brokers[2]), "namespaces", "list", "acme")
    assert (code, out.split()) == (0, ["acme/orders"])
    code, out, _ = await admin(*url, "tenants", "list")
    assert {"public", "acme"} <= set(out.split())
    code, _, err = await admin(*url, "namespaces", "create", "acme/orders")
    assert code == 1 and "409" in err and "already exists" in err


async def test_admin_names_bad_input_and_unreachable_brokers_clearly(cluster: ProcessCluster) -> None:
    url = ["--admin-url", web_url(cluster.broker)]
    code, _, err = await admin(*url, "namespaces", "bundles", "no-slash")
    assert code == 2 and "invalid namespace 'no-slash'" in err
    code, _, err = await admin(*url, "namespaces", "unload", "public/default", "--bundle", "0x1_0x2")
    assert code == 2 and "invalid bundle" in err
    code, _, err = await admin(*url, "namespaces", "bundles", "nobody/none")
    assert code == 1 and "404" in err and "does not exist" in err
    code, _, err = await admin("--admin-url", "http://127.0.0.1:1", "brokers", "list")
    assert code == 1 and "cannot reach the broker at http://127.0.0.1:1" in err


async def test_topics_lookup_cli_agrees_with_the_binary_lookup(cluster: ProcessCluster) -> None:
    topic = TOPICS[1]
    owner = await owner_via(cluster.brokers[2], topic)
    result = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "minipulsar",
            "admin",
            "--admin-url",
            web_url(cluster.brokers[0]),
            "topics",
            "lookup",
            topic,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == owner


async def test_unloading_a_bundle_through_any_broker_releases_it(cluster: ProcessCluster) -> None:
    topic = "persistent://public/default/unload-me"
    owner = broker_of(cluster, await owner_via(cluster.broker, topic))
    bundle = next(name for name in await owned_bundles(owner) if _contains(name, topic))
    other = next(b for b in cluster.brokers if b is not owner)  # forwarded to the owner by a 307
    code, _, err = await admin(
        "--admin-url", web_url(other), "namespaces", "unload", "public/default", "--bundle", bundle.rsplit("/", 1)[1]
    )
    assert code == 0, err
    assert bundle not in await owned_bundles(owner)
    assert await owner_via(cluster.brokers[2], topic)  # placed again on the next lookup


async def test_split_bundle_owns_both_halves_on_the_same_broker(cluster: ProcessCluster) -> None:
    url = ["--admin-url", web_url(cluster.brokers[0])]
    await admin(*url, "tenants", "create", "split")
    assert (await admin(*url, "namespaces", "create", "split/ns", "--bundles", "2"))[0] == 0
    topic = "persistent://split/ns/t"
    owner = broker_of(cluster, await owner_via(cluster.brokers[1], topic))
    bundle = next(name for name in await owned_bundles(owner) if _contains(name, topic)).rsplit("/", 1)[1]
    code, out, err = await admin(
        "--admin-url",
        web_url(cluster.brokers[2]),
        "namespaces",
        "split-bundle",
        "split/ns",
        "--bundle",
        bundle,
        "--algorithm",
        "range_equally_divide",
    )
    assert code == 0, err
    halves = out.split()
    assert len(halves) == 2
    code, out, _ = await admin(*url, "namespaces", "bundles", "split/ns")
    assert json.loads(out)["numBundles"] == 3
    owned = await owned_bundles(owner)
    assert {f"split/ns/{h}" for h in halves} <= set(owned) and f"split/ns/{bundle}" not in owned
    assert await owner_via(cluster.brokers[2], topic) == f"pulsar://{owner.address}"
    code, _, err = await admin(
        *url,
        "namespaces",
        "split-bundle",
        "split/ns",
        "--bundle",
        halves[0],
        "--algorithm",
        "topic_count_equally_divide",
    )
    assert code == 1 and "cannot be split" in err  # at most one topic in that half


async def test_metrics_count_owned_bundles_and_lookups(cluster: ProcessCluster) -> None:
    owner = broker_of(cluster, await owner_via(cluster.broker, TOPICS[2]))
    text = await asyncio.to_thread(metrics_text, owner)
    assert sample_value(text, "pulsar_broker_bundles_count") >= 1
    assert sample_value(text, "pulsar_broker_lookup_answers_total") >= 1
    for name in (
        "pulsar_broker_lookup_redirects_total",
        "pulsar_broker_lookup_failures_total",
        "pulsar_broker_lookup_count",
        "pulsar_broker_lookup_pending_requests",
        "pulsar_broker_topic_load_pending_requests",
        "pulsar_topic_load_times_count",
    ):
        assert sample_value(text, name) is not None, name


def _contains(bundle_name: str, topic: str) -> bool:
    from minipulsar.broker.namespace.bundles import NamespaceBundle, topic_hash  # test-only: the same hash

    bundle = NamespaceBundle.parse(bundle_name)
    return bundle.namespace == "/".join(topic.split("://")[1].split("/")[:2]) and bundle.range.contains(
        topic_hash(topic)
    )


async def test_a_missing_namespace_in_a_lookup_is_created_with_the_default_bundles(
    cluster: ProcessCluster, tmp_path: Path
) -> None:
    await owner_via(cluster.brokers[1], "persistent://fresh-tenant/fresh-ns/t")
    code, out, _ = await admin(
        "--admin-url", web_url(cluster.brokers[0]), "namespaces", "bundles", "fresh-tenant/fresh-ns"
    )
    assert code == 0 and json.loads(out)["numBundles"] == 4


async def test_unload_with_a_destination_hands_the_bundle_to_that_broker(cluster: ProcessCluster) -> None:
    topic = "persistent://public/default/hand-over"
    owner = broker_of(cluster, await owner_via(cluster.broker, topic))
    bundle = next(name for name in await owned_bundles(owner) if _contains(name, topic))
    destination = next(b for b in cluster.brokers if b is not owner)
    code, _, err = await admin(
        "--admin-url",
        web_url(cluster.brokers[2]),
        "namespaces",
        "unload",
        "public/default",
        "--bundle",
        bundle.rsplit("/", 1)[1],
        "--destination-broker",
        f"{destination.host}:{destination.http_port}",
    )
    assert code == 0, err
    assert bundle in await owned_bundles(destination)
    for broker in cluster.brokers:
        assert await owner_via(broker, topic) == f"pulsar://{destination.address}"
