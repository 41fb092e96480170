"""Partitioned topics, multi-topic and regex subscriptions on a real cluster,
and the produce/consume CLI's flags against it.

Method: one cluster for the module (metastore, bookie, broker processes); partitioned topics
made through the admin REST API (``PUT …/partitions``); each test its own topics. Which
partition a message went to is read from its id and from consumers of single partitions.
"""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from pathlib import Path

import pytest

from minipulsar import Client, ConsumerType, HashingScheme, InitialPosition, PartitionsRoutingMode
from minipulsar.client.routing import java_string_hash, murmur3_32_hash
from tests.support.cli import run_cli
from tests.support.cluster import ProcessCluster
from tests.support.fixtures import client_fixture, cluster_fixture
from tests.support.process import wait_for
from tests.support.web import put_partitions

pytestmark = pytest.mark.asyncio(loop_scope="module")

EARLIEST = InitialPosition.Earliest


cluster = cluster_fixture(per_module=True)


client = client_fixture(loop_scope="module")


async def partitioned(cluster: ProcessCluster, local_name: str, partitions: int) -> str:
    await asyncio.to_thread(put_partitions, cluster, local_name, partitions)
    return f"persistent://public/default/{local_name}"


async def receive_all(consumer, count: int, timeout_millis: int = 10_000) -> list:
    messages = []
    for _ in range(count):
        message = await consumer.receive(timeout_millis)
        await consumer.acknowledge(message)
        messages.append(message)
    return messages


@pytest.mark.parametrize(
    "scheme, hash_of",
    [(HashingScheme.JavaStringHash, java_string_hash), (HashingScheme.Murmur3_32Hash, murmur3_32_hash)],
)
async def test_keyed_messages_land_on_their_hash_partition_in_order(
    client: Client, cluster: ProcessCluster, scheme, hash_of
) -> None:
    topic = await partitioned(cluster, f"keyed-{scheme.value.lower()}", 4)
    producer = await client.create_producer(topic, hashing_scheme=scheme)
    keys = [f"user-{i}" for i in range(8)]
    ids = await asyncio.gather(
        *(producer.send(f"{key}:{n}".encode(), partition_key=key) for n in range(5) for key in keys)
    )
    for key, message_id in zip([k for _ in range(5) for k in keys], ids):
        assert message_id.partition() == hash_of(key) % 4, (key, message_id)
    # Read each partition on its own: the key's messages are there, in send order.
    for index in range(4):
        consumer = await client.subscribe(f"{topic}-partition-{index}", "check", initial_position=EARLIEST)
        expected = [f"{k}:{n}" for n in range(5) for k in keys if hash_of(k) % 4 == index]
        got = [m.data().decode() for m in await receive_all(consumer, len(expected))]
        by_key = defaultdict(list)
        for text in got:
            key, n = text.split(":")
            by_key[key].append(int(n))
        assert sorted(got) == sorted(expected) and all(ns == sorted(ns) for ns in by_key.values())
        await consumer.close()
    await producer.close()


async def test_round_robin_without_batching_spreads_evenly_and_single_partition_does_not(
    client: Client, cluster: ProcessCluster
) -> None:
    topic = await partitioned(cluster, "spread", 3)
    round_robin = await client.create_producer(topic, batching_enabled=False)
    partitions = [(await round_robin.send(b"rr")).partition() for _ in range(9)]
    assert sorted(partitions) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    single = await client.create_producer(topic, message_routing_mode=PartitionsRoutingMode.UseSinglePartition)
    assert len({(await single.send(b"one")).partition() for _ in range(6)}) == 1
    custom = await client.create_producer(topic, message_router=lambda message, n: int(message.properties()["p"]))
    assert (await custom.send(b"c", properties={"p": "2"})).partition() == 2
    for producer in (round_robin, single, custom):
        await producer.close()


async def test_a_partitioned_subscription_receives_every_partition_and_acks_by_id(
    client: Client, cluster: ProcessCluster
) -> None:
    topic = await partitioned(cluster, "multi", 3)
    producer = await client.create_producer(topic, batching_enabled=False)
    sent = {f"m{i}" for i in range(12)}
    for text in sorted(sent):
        await producer.send(text.encode())
    consumer = await client.subscribe(topic, "all", consumer_type=ConsumerType.Shared, initial_position=EARLIEST)
    messages = await receive_all(consumer, 12)
    assert {m.data().decode() for m in messages} == sent
    assert {m.message_id().partition() for m in messages} == {0, 1, 2}
    assert all(m.message_id().topic_name() == f"{topic}-partition-{m.message_id().partition()}" for m in messages)
    await consumer.close()
    # Acknowledged on every partition: a new consumer of the subscription gets nothing old.
    again = await client.subscribe(topic, "all", consumer_type=ConsumerType.Shared)
    await producer.send(b"fresh")
    assert (await again.receive(10_000)).data() == b"fresh"
    await again.close()
    await producer.close()


async def test_a_list_of_topics_and_a_regex_are_one_subscription_with_rediscovery(
    client: Client, cluster: ProcessCluster
) -> None:
    plain = "persistent://public/default/rx-plain"
    parts = await partitioned(cluster, "rx-parts", 2)
    for topic in (plain, parts):
        producer = await client.create_producer(topic)
        await producer.send(f"from {topic.rsplit('/', 1)[1]}".encode())
        await producer.close()

    listed = await client.subscribe([plain, parts], "list", initial_position=EARLIEST)
    assert sorted(m.data() for m in await receive_all(listed, 2)) == [b"from rx-parts", b"from rx-plain"]
    await listed.close()

    pattern = await client.subscribe(
        re.compile("persistent://public/default/rx-.*"),
        "regex",
        initial_position=EARLIEST,
        pattern_auto_discovery_period=0.5,
    )
    assert sorted(pattern.topics()) == [f"{parts}-partition-0", f"{parts}-partition-1", plain]
    assert sorted(m.data() for m in await receive_all(pattern, 2)) == [b"from rx-parts", b"from rx-plain"]
    late = await client.create_producer("rx-late")  # a new matching topic: rediscovered
    await wait_for(
        lambda: "persistent://public/default/rx-late" in pattern.topics(),
        timeout_s=15,
        message="rx-late was not discovered",
    )
    await late.send(b"late")
    assert (await pattern.receive(10_000)).data() == b"late"
    await late.close()
    await pattern.close()


async def test_cli_produce_and_consume_with_key_properties_files_and_hex(
    cluster: ProcessCluster, tmp_path: Path
) -> None:
    topic = await partitioned(cluster, "cli", 2)
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\x00\xffbin")
    url = ["--url", cluster.service_url]
    produced = await asyncio.to_thread(
        run_cli,
        "produce",
        topic,
        "-m",
        "a,b",
        "-f",
        str(blob),
        "-n",
        "2",
        "-k",
        "the-key",
        "-p",
        "x=1,y=2",
        "-r",
        "200",
        *url,
    )
    assert produced.returncode == 0, produced.stderr
    assert produced.stdout.strip().endswith("6 messages successfully produced")
    consumed = await asyncio.to_thread(
        run_cli, "consume", topic, "-s", "cli-sub", "-n", "6", "--hex", "-t", "Shared", "--timeout", "20", *url
    )
    assert consumed.returncode == 0, consumed.stderr
    out = consumed.stdout
    assert out.count("----- got message -----") == 6 and "6 messages successfully consumed" in out
    assert out.count("key:[the-key], properties:[x=1, y=2], content:") == 6
    assert "00000000  61" in out and "|..bin|" in out, "hex dumps of 'a' and of the file"

    regex = await asyncio.to_thread(
        run_cli,
        "consume",
        "persistent://public/default/cl.*",
        "--regex",
        "-s",
        "peek",
        "-m",
        "NonDurable",
        "-n",
        "6",
        "--hide-content",
        "--timeout",
        "20",
        *url,
    )
    assert regex.returncode == 0, regex.stderr
    assert regex.stdout.count("key:[the-key], properties:[x=1, y=2]\n") == 6
    assert "content:" not in regex.stdout
