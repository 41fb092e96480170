"""Goal: partition counts live at Pulsar's metadata path; partitions are recognised by name."""

from __future__ import annotations

import pytest

from minipulsar.broker.partitions import PartitionedTopics, partition_index, partitioned_topic_path
from minipulsar.errors import AlreadyExistsError, InvalidCommandError, NotFoundError
from minipulsar.metadata import MemoryMetadataStore
from minipulsar.topic_name import TopicName


def test_partition_names() -> None:
    assert partition_index(TopicName.parse("t-partition-3")) == 3
    assert partition_index(TopicName.parse("t")) == -1
    assert partition_index(TopicName.parse("t-partition-x")) == -1
    assert partitioned_topic_path(TopicName.parse("persistent://a/b/t")) == "/admin/partitioned-topics/a/b/persistent/t"


async def test_create_read_grow_delete() -> None:
    store = MemoryMetadataStore()
    topics, name = PartitionedTopics(store), TopicName.parse("orders")
    assert await topics.partitions(name) == 0
    await topics.create(name, 4)
    assert await topics.partitions(name) == 4
    assert await topics.partitions(name.partition(1)) == 0, "a partition is an ordinary topic"
    with pytest.raises(AlreadyExistsError):
        await topics.create(name, 2)
    with pytest.raises(InvalidCommandError):
        await topics.update(name, 3)
    await topics.update(name, 6)
    assert await topics.partitions(name) == 6
    with pytest.raises(InvalidCommandError):
        await topics.create(name.partition(0), 2)
    with pytest.raises(InvalidCommandError):
        await topics.create(TopicName.parse("other"), 0)
    await topics.delete(name)
    assert await topics.partitions(name) == 0
    with pytest.raises(NotFoundError):
        await topics.delete(name)
    await store.close()
