"""The namespace service's knobs, taken once from BrokerConfig (each field names its key).

Invariant: a value, fixed for the broker's life.
"""

from __future__ import annotations

from dataclasses import dataclass

from minipulsar.broker.namespace.split import RANGE_EQUALLY_DIVIDE, TOPIC_COUNT_EQUALLY_DIVIDE
from minipulsar.config import BrokerConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceSettings:
    cluster_name: str = "standalone"
    """clusterName: the cluster new namespaces are assigned to, and the metrics' label."""
    default_bundle_count: int = 4
    """defaultNumberOfNamespaceBundles: bundles of a namespace created without a count."""
    default_split_algorithm: str = RANGE_EQUALLY_DIVIDE
    """defaultNamespaceBundleSplitAlgorithm: a split that names none uses it."""
    supported_split_algorithms: tuple[str, ...] = (RANGE_EQUALLY_DIVIDE, TOPIC_COUNT_EQUALLY_DIVIDE)
    """supportedNamespaceBundleSplitAlgorithms."""
    unloading_timeout_s: float = 60.0
    """namespaceBundleUnloadingTimeoutMs: how long closing a bundle's topics may take."""
    max_concurrent_lookups: int = 50_000
    """maxConcurrentLookupRequest: lookups past it fail with TooManyRequests."""

    @classmethod
    def from_config(cls, config: BrokerConfig) -> NamespaceSettings:
        return cls(
            cluster_name=config.cluster_name,
            default_bundle_count=config.default_number_of_namespace_bundles,
            default_split_algorithm=config.default_namespace_bundle_split_algorithm,
            supported_split_algorithms=config.supported_namespace_bundle_split_algorithms,
            unloading_timeout_s=config.namespace_bundle_unloading_timeout_ms / 1000,
            max_concurrent_lookups=config.max_concurrent_lookup_request,
        )
