"""Partitioned topics: the partition count in the metadata store, as Pulsar keeps it.

A partitioned topic ``t`` with N partitions is N ordinary topics ``t-partition-0`` …
``t-partition-{N-1}``; only the count is stored, at
``/admin/partitioned-topics/{tenant}/{ns}/{domain}/{topic}`` as ``{"partitions": N}``.
A topic without that key is not partitioned (count 0), and a partition is never itself
partitioned.

Invariants:

- a partition count only grows while the topic stays partitioned;
- a partition (``…-partition-i``) is never partitioned itself, and reads as count 0.
"""

from __future__ import annotations

import json
import re

from minipulsar.errors import InvalidCommandError, NotFoundError
from minipulsar.metadata.store import NOT_EXISTS, MetadataStore
from minipulsar.topic_name import PARTITION_SUFFIX, TopicName

ROOT = "/admin/partitioned-topics"
_PARTITION = re.compile(re.escape(PARTITION_SUFFIX) + r"(\d+)$")


def partition_index(name: TopicName) -> int:
    """``i`` for ``…-partition-i``, else -1."""
    match = _PARTITION.search(name.local_name)
    return int(match.group(1)) if match else -1


def partitioned_topic_path(name: TopicName) -> str:
    return f"{ROOT}/{name.tenant}/{name.namespace}/{name.domain}/{name.local_name}"


class PartitionedTopics:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def partitions(self, name: TopicName) -> int:
        """The partition count; 0 when ``name`` is not partitioned (or is a partition)."""
        if partition_index(name) >= 0:
            return 0
        stored = await self._store.get(partitioned_topic_path(name))
        return json.loads(stored.value)["partitions"] if stored is not None else 0

    async def create(self, name: TopicName, partitions: int) -> None:
        """Raises:
        InvalidCommandError: a bad count, or ``name`` is itself a partition.
        AlreadyExistsError: the topic is partitioned already (from the store's create-only put).
        """
        _check(name, partitions)
        await self._store.put(partitioned_topic_path(name), _encode(partitions), NOT_EXISTS)

    async def update(self, name: TopicName, partitions: int) -> None:
        """Raise the count (Pulsar never lowers it: the existing partitions keep their data)."""
        _check(name, partitions)
        stored = await self._store.get(partitioned_topic_path(name))
        if stored is None:
            raise NotFoundError(f"{name} is not a partitioned topic")
        current = json.loads(stored.value)["partitions"]
        if partitions <= current:
            raise InvalidCommandError(f"{name} has {current} partitions; the count can only grow")
        await self._store.put(partitioned_topic_path(name), _encode(partitions), stored.version)

    async def delete(self, name: TopicName) -> None:
        """Raises NotFoundError when ``name`` is not partitioned. The partitions' own data stays."""
        await self._store.delete(partitioned_topic_path(name))


def _check(name: TopicName, partitions: int) -> None:
    if partition_index(name) >= 0:
        raise InvalidCommandError(f"{name} is a partition; it cannot be partitioned")
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise InvalidCommandError(f"the number of partitions must be a positive integer, got {partitions!r}")


def _encode(partitions: int) -> bytes:
    return json.dumps({"partitions": partitions}).encode()
