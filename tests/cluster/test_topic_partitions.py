"""Partitioned topics on a real cluster: the partition count in the metadata
store under Pulsar's admin path, the admin REST API on it, PARTITIONED_METADATA, automatic
creation with ``allowAutoTopicCreationType=partitioned``, and partitions as ordinary topics."""

from __future__ import annotations

import asyncio
from pathlib import Path

from minipulsar import Client, InitialPosition
from tests.support.cluster import ProcessCluster, make_cluster
from tests.support.web import broker_web_url, http_request

SETTINGS = {"allowAutoTopicCreationType": "partitioned", "defaultNumPartitions": 3}


async def partitions_admin(cluster: ProcessCluster, method: str, topic: str, body: object = None) -> tuple[int, object]:
    """``method`` on the topic's ``partitions`` admin path: (status, JSON answer)."""
    url = f"{broker_web_url(cluster)}/admin/v2/persistent/public/default/{topic}/partitions"
    return await asyncio.to_thread(http_request, method, url, body)


async def test_partition_metadata_admin_and_auto_creation(tmp_path: Path) -> None:
    async with make_cluster(tmp_path, broker_settings=SETTINGS) as cluster:
        assert await partitions_admin(cluster, "PUT", "orders", 4) == (204, None)
        assert await partitions_admin(cluster, "GET", "orders") == (200, {"partitions": 4})
        status, answer = await partitions_admin(cluster, "PUT", "orders", 2)
        assert status == 409 and "exists" in answer["reason"]
        assert (await partitions_admin(cluster, "PUT", "bad", 0))[0] == 400
        assert (await partitions_admin(cluster, "POST", "orders", 2))[0] == 400, "the count only grows"
        assert await partitions_admin(cluster, "POST", "orders", 6) == (204, None)

        async with Client(cluster.service_url) as client:
            partitions = await client.get_topic_partitions("orders")
            assert partitions == [f"persistent://public/default/orders-partition-{i}" for i in range(6)]
            whole = await client.create_producer("orders")  # a producer over every partition
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
            assert await partitions_admin(cluster, "GET", "fresh") == (200, {"partitions": 3})
            # ... but a topic that exists already stays what it is.
            assert await client.get_topic_partitions(partitions[2]) == [partitions[2]]

        assert await partitions_admin(cluster, "DELETE", "orders") == (204, None)
        assert await partitions_admin(cluster, "GET", "orders") == (200, {"partitions": 0})
        assert (await partitions_admin(cluster, "DELETE", "orders"))[0] == 404
