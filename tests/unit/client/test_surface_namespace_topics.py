"""GET_TOPICS_OF_NAMESPACE's answer (broker/topic_list.py), what regex subscriptions match
against: managed ledgers plus every partition of the partitioned topics, one namespace only."""

from __future__ import annotations

import pytest

from minipulsar.broker.partitions import PartitionedTopics
from minipulsar.broker.topic_list import topics_of_namespace
from minipulsar.errors import InvalidCommandError
from minipulsar.metadata.memory import MemoryMetadataStore
from minipulsar.topic_name import TopicName


async def store_with_topics() -> MemoryMetadataStore:
    store = MemoryMetadataStore()
    for path in (
        "public/default/persistent/plain",
        "public/default/persistent/parts-partition-0",
        "public/default/persistent/plain/a-cursor",
        "other/ns/persistent/elsewhere",
    ):
        await store.put(f"/managed-ledgers/{path}", b"{}")
    await PartitionedTopics(store).create(TopicName.parse("parts"), 3)
    return store


async def test_lists_managed_ledgers_and_every_partition_of_partitioned_topics() -> None:
    store = await store_with_topics()
    assert await topics_of_namespace(store, "public/default", "PERSISTENT") == [
        "persistent://public/default/parts-partition-0",
        "persistent://public/default/parts-partition-1",
        "persistent://public/default/parts-partition-2",
        "persistent://public/default/plain",
    ]
    assert await topics_of_namespace(store, "other/ns", "ALL") == ["persistent://other/ns/elsewhere"]
    assert await topics_of_namespace(store, "empty/ns", "PERSISTENT") == []


async def test_non_persistent_topics_are_the_loaded_ones() -> None:
    store = await store_with_topics()
    loaded = [
        TopicName.parse("non-persistent://public/default/np"),
        TopicName.parse("persistent://public/default/x"),
        TopicName.parse("non-persistent://other/ns/np2"),
    ]
    assert await topics_of_namespace(store, "public/default", "NON_PERSISTENT", loaded) == [
        "non-persistent://public/default/np"
    ]
    assert "non-persistent://public/default/np" in await topics_of_namespace(store, "public/default", "ALL", loaded)


@pytest.mark.parametrize(
    "namespace, mode", [("public", "PERSISTENT"), ("a/b/c", "PERSISTENT"), ("public/default", "SOME")]
)
async def test_bad_namespaces_and_modes_are_invalid_commands(namespace: str, mode: str) -> None:
    with pytest.raises(InvalidCommandError):
        await topics_of_namespace(MemoryMetadataStore(), namespace, mode)
