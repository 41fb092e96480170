"""The topics of a namespace, for GET_TOPICS_OF_NAMESPACE (regex subscriptions).

As Pulsar's ``NamespaceService.getListOfTopics``: persistent topics are those with a managed
ledger in the metadata store (``/managed-ledgers/{tenant}/{ns}/persistent/{topic}``) plus every
partition of the partitioned topics (``/admin/partitioned-topics/…``), created or not yet;
non-persistent topics exist only while loaded, so only this broker's loaded ones are listed.
Names are full (``persistent://tenant/ns/topic``), sorted, without duplicates.

Invariant: the answer is sorted, without duplicates, and lists only topics of the namespace and mode asked for.
"""

from __future__ import annotations

from collections.abc import Iterable

from minipulsar.broker.managed_ledger.info import ROOT as MANAGED_LEDGERS_ROOT
from minipulsar.broker.partitions import ROOT as PARTITIONED_TOPICS_ROOT
from minipulsar.broker.partitions import PartitionedTopics
from minipulsar.errors import InvalidCommandError
from minipulsar.metadata.store import MetadataStore
from minipulsar.topic_name import TopicName

MODES = {"PERSISTENT": ("persistent",), "NON_PERSISTENT": ("non-persistent",), "ALL": ("persistent", "non-persistent")}


def parse_namespace(namespace: str) -> tuple[str, str]:
    """``tenant/ns`` → (tenant, ns). Raises InvalidCommandError for anything else."""
    parts = namespace.split("/") if isinstance(namespace, str) else []
    if len(parts) != 2 or not all(parts):
        raise InvalidCommandError(f"invalid namespace {namespace!r}: expected tenant/namespace")
    return parts[0], parts[1]


async def topics_of_namespace(
    store: MetadataStore, namespace: str, mode: str, loaded: Iterable[TopicName] = ()
) -> list[str]:
    """The full names of the topics of ``namespace`` in ``mode`` (PERSISTENT, NON_PERSISTENT, ALL).

    ``loaded``: the topics loaded on this broker (the only non-persistent ones that exist).
    """
    tenant, ns = parse_namespace(namespace)
    domains = MODES.get(mode)
    if domains is None:
        raise InvalidCommandError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    partitioned = PartitionedTopics(store)
    names: set[str] = set()
    for domain in domains:
        if domain == "persistent":
            local_names = await store.children(f"{MANAGED_LEDGERS_ROOT}/{tenant}/{ns}/{domain}")
            names.update(str(TopicName(domain, tenant, ns, local)) for local in local_names)
        for local in await store.children(f"{PARTITIONED_TOPICS_ROOT}/{tenant}/{ns}/{domain}"):
            topic = TopicName(domain, tenant, ns, local)
            names.update(str(topic.partition(i)) for i in range(await partitioned.partitions(topic)))
    names.update(
        str(t)
        for t in loaded
        if t.domain in domains and not t.is_persistent and (t.tenant, t.namespace) == (tenant, ns)
    )
    return sorted(names)
