"""Topic names as Pulsar spells them: ``persistent://tenant/namespace/local-name``."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"
PARTITION_SUFFIX = "-partition-"


@dataclass(frozen=True, slots=True)
class TopicName:
    domain: str
    """persistent | non-persistent"""
    tenant: str
    namespace: str
    local_name: str

    @classmethod
    def parse(cls, topic: str) -> TopicName:
        """Accepts ``name``, ``tenant/ns/name`` and ``domain://tenant/ns/name``.

        Raises:
            ValueError: the name has the wrong number of parts or an unknown domain.
        """
        if not isinstance(topic, str) or not topic:
            raise ValueError("topic name must be a non-empty string")
        domain, sep, rest = topic.partition("://")
        if not sep:
            domain, rest = "persistent", topic
        if domain not in ("persistent", "non-persistent"):
            raise ValueError(f"invalid topic domain {domain!r} in {topic!r}")
        parts = rest.split("/")
        if len(parts) == 1:
            parts = [DEFAULT_TENANT, DEFAULT_NAMESPACE, parts[0]]
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"invalid topic name {topic!r}: expected [domain://]tenant/namespace/name")
        return cls(domain, *parts)

    @property
    def namespace_name(self) -> str:
        return f"{self.tenant}/{self.namespace}"

    @property
    def persistence_path(self) -> str:
        """``tenant/ns/domain/local`` — the managed ledger's name under /managed-ledgers."""
        return f"{self.tenant}/{self.namespace}/{self.domain}/{self.local_name}"

    @property
    def is_persistent(self) -> bool:
        return self.domain == "persistent"

    def partition(self, index: int) -> TopicName:
        return TopicName(self.domain, self.tenant, self.namespace, f"{self.local_name}{PARTITION_SUFFIX}{index}")

    def __str__(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local_name}"
