"""Partitioned topics on a real cluster (issue 5 point 8): the partition count in the metadata
store under Pulsar's admin path, the admin REST API on it, PARTITIONED_METADATA, automatic
creation with ``allowAutoTopicCreationType=partitioned``, and partitions as ordinary topics."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path

from minipulsar import Client, InitialPosition
from tests.support.cluster import ProcessCluster, make_cluster

SETTINGS = {"allowAutoTopicCreationType": "partitioned", "defaultNumPartitions": 3}


def request(cluster: ProcessCluster, method: str, topic: str, body: object = None) -> tuple[int, object]:
    base = f"http://{cluster.broker.host}:{cluster.broker.http_port}"
    url = f"{base}/admin/v2/persistent/public/default/{topic}/partitions"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


async def admin(cluster: ProcessCluster, method: str, topic: str, body: object = None) -> tuple[int, object]:
    return await asyncio.to_thread(request, cluster, method, topic, body)


async def test_partition_metadata_admin_and_auto_creation(tmp_path: Path) -> None:
    async with make_cluster(tmp_path, broker_settings=SETTINGS) as cluster:
        assert await admin(cluster, "PUT", "orders", 4) == (204, None)
        assert await admin(cluster, "GET", "orders") == (200, {"partitions": 4})
        status, answer = await admin(cluster, "PUT", "orders", 2)
        assert status == 409 and "exists" in answer["reason"]
        assert (await admin(cluster, "PUT", "bad", 0))[0] == 400
        assert (await admin(cluster, "POST", "orders", 2))[0] == 400, "the count only grows"
        assert await admin(cluster, "POST", "orders", 6) == (204, None)

        async with Client(cluster.service_url) as client:
            partitions = await client.get_topic_partitions("orders")
            assert partitions == [f"persistent://public/default/orders-partition-{i}" for i in range(6)]
            whole = await client.create_producer("orders")  # a producer over every partition (issue 7)
            routed_to = (await whole.send(b"routed")).partition()
            assert (whole.num_partitions(), routed_to in range(6)) == (6, True)
            await whole.close()
            other = partitions[(routed_to + 1) % 6]  # a partition that holds nothing yet
            producer = await client.create_producer(other)  # a partition is an ordinary topic
            await producer.send(b"to that partition")
            consumer = await client.subscribe(other, "sub", initial_position=InitialPosition.Earliest)
            assert (await consumer.receive(timeout_millis=10_000)).data() == b"to that partition"
            assert await client.get_topic_partitions(other) == [other]

            # allowAutoTopicCreationType=partitioned: a new topic gets defaultNumPartitions ...
            assert len(await client.get_topic_partitions("fresh")) == 3
            assert await admin(cluster, "GET", "fresh") == (200, {"partitions": 3})
            # ... but a topic that exists already stays what it is.
            assert await client.get_topic_partitions(partitions[2]) == [partitions[2]]

        assert await admin(cluster, "DELETE", "orders") == (204, None)
        assert await admin(cluster, "GET", "orders") == (200, {"partitions": 0})
        assert (await admin(cluster, "DELETE", "orders"))[0] == 404
