"""Tenants and namespace policies in the metadata store, at Pulsar's paths.

- ``/admin/policies/{tenant}``       Pulsar's ``TenantInfo`` JSON: ``{"adminRoles": [], "allowedClusters": [...]}``;
- ``/admin/policies/{tenant}/{ns}``  Pulsar's ``Policies`` JSON; minipulsar reads ``bundles``
  (``{"boundaries": ["0x00000000", …, "0xffffffff"], "numBundles": n}``) and keeps every other key as written.

Invariants: creation is create-only (two brokers racing to create ``public/default`` both succeed,
one of them by reading what the other wrote); the boundaries change only by compare-and-set on
the policies' version (a split that lost a race fails with BadVersionError and nothing changes).
"""

from __future__ import annotations

import json
import logging
import re

from minipulsar.broker.namespace.bundles import NamespaceBundles, initial_boundaries
from minipulsar.errors import AlreadyExistsError, InvalidCommandError, NotFoundError
from minipulsar.metadata import MetadataStore

log = logging.getLogger(__name__)

POLICIES_ROOT = "/admin/policies"
DEFAULT_NAMESPACE = "public/default"

_NAME = re.compile(r"^[-=:.\w]+$")
"""Pulsar's ``NamedEntity.checkName``: letters, digits, ``_ - = : .``."""


def check_name(kind: str, name: str) -> str:
    """Return ``name`` when it is a valid tenant or namespace name; else raise InvalidCommandError."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidCommandError(f"invalid {kind} name {name!r}: use letters, digits and _ - = : .")
    return name


def split_namespace(namespace: str) -> tuple[str, str]:
    """``"tenant/ns"`` → ``("tenant", "ns")``; raises InvalidCommandError when malformed."""
    parts = namespace.split("/") if isinstance(namespace, str) else []
    if len(parts) != 2:
        raise InvalidCommandError(f"invalid namespace {namespace!r}: expected tenant/namespace")
    return check_name("tenant", parts[0]), check_name("namespace", parts[1])


def tenant_path(tenant: str) -> str:
    return f"{POLICIES_ROOT}/{tenant}"


def namespace_path(namespace: str) -> str:
    return f"{POLICIES_ROOT}/{namespace}"


class PolicyStore:
    """Pulsar's TenantResources + NamespaceResources over the metadata store."""

    def __init__(self, store: MetadataStore, cluster: str, default_bundle_count: int) -> None:
        self._store = store
        self._cluster = cluster
        self._default_bundle_count = default_bundle_count

    # -- tenants --------------------------------------------------------------------------------

    async def tenants(self) -> list[str]:
        return await self._store.children(POLICIES_ROOT)

    async def tenant(self, tenant: str) -> dict | None:
        found = await self._store.get(tenant_path(check_name("tenant", tenant)))
        return None if found is None else _json(found.value)

    async def create_tenant(self, tenant: str, info: dict | None = None) -> None:
        """Raises AlreadyExistsError, InvalidCommandError."""
        check_name("tenant", tenant)
        info = dict(info or {})
        info.setdefault("adminRoles", [])
        info.setdefault("allowedClusters", [self._cluster])
        await self._store.put(tenant_path(tenant), json.dumps(info).encode(), -1)

    # -- namespaces -----------------------------------------------------------------------------

    async def namespaces(self, tenant: str) -> list[str]:
        """``tenant/ns`` names. Raises NotFoundError when the tenant does not exist."""
        if await self.tenant(tenant) is None:
            raise NotFoundError(f"Tenant {tenant} does not exist")
        return [f"{tenant}/{ns}" for ns in await self._store.children(tenant_path(tenant))]

    async def policies(self, namespace: str) -> tuple[dict, int] | None:
        """(policies, version), or None when the namespace does not exist."""
        split_namespace(namespace)
        found = await self._store.get(namespace_path(namespace))
        return None if found is None else (_json(found.value), found.version)

    async def create_namespace(self, namespace: str, policies: dict | None = None) -> NamespaceBundles:
        """Create ``tenant/ns`` with ``policies["bundles"]["numBundles"]`` (or explicit boundaries, or
        defaultNumberOfNamespaceBundles) bundles.

        Raises:
            NotFoundError: the tenant does not exist.
            AlreadyExistsError: the namespace exists.
            InvalidCommandError: a bad name or bundle spec.
        """
        tenant, _ = split_namespace(namespace)
        if await self.tenant(tenant) is None:
            raise NotFoundError(f"Tenant {tenant} does not exist")
        policies = dict(policies or {})
        bundles = self._initial_bundles(namespace, policies.get("bundles"))
        policies["bundles"] = bundles.to_policy()
        policies.setdefault("replication_clusters", [self._cluster])
        stat = await self._store.put(namespace_path(namespace), json.dumps(policies).encode(), -1)
        log.info("created namespace %s with %d bundles", namespace, len(bundles.ranges))
        return NamespaceBundles(namespace, bundles.boundaries, stat.version)

    def _initial_bundles(self, namespace: str, spec: object) -> NamespaceBundles:
        if spec is None:
            return NamespaceBundles(namespace, initial_boundaries(self._default_bundle_count))
        if not isinstance(spec, dict):
            raise InvalidCommandError('bundles must be an object such as {"numBundles": 4}')
        try:
            if spec.get("boundaries"):
                return NamespaceBundles.from_policy(namespace, spec)
            count = spec.get("numBundles", self._default_bundle_count)
            if isinstance(count, bool) or not isinstance(count, int):
                raise ValueError(f"numBundles must be a number, got {count!r}")
            return NamespaceBundles(namespace, initial_boundaries(count))
        except ValueError as error:
            raise InvalidCommandError(str(error)) from None

    async def ensure_namespace(self, namespace: str) -> NamespaceBundles:
        """The namespace's bundles, creating the tenant and the namespace first if missing.

        Idempotent when several brokers race: a create that finds the key already there reads it.
        """
        tenant, _ = split_namespace(namespace)
        if await self.tenant(tenant) is None:
            try:
                await self.create_tenant(tenant)
                log.info("created tenant %s", tenant)
            except AlreadyExistsError:
                pass
        try:
            return await self.create_namespace(namespace)
        except AlreadyExistsError:
            found = await self.bundles(namespace)
            assert found is not None, f"{namespace} existed a moment ago"  # namespaces are never deleted here
            return found

    async def bundles(self, namespace: str) -> NamespaceBundles | None:
        """The namespace's bundles (with the policies' version), or None when it does not exist."""
        found = await self.policies(namespace)
        if found is None:
            return None
        policies, version = found
        try:
            return NamespaceBundles.from_policy(namespace, policies.get("bundles") or {}, version)
        except ValueError as error:
            raise InvalidCommandError(f"namespace {namespace} has bad policies: {error}") from None

    async def replace_bundles(self, old: NamespaceBundles, boundaries: tuple[int, ...]) -> NamespaceBundles:
        """Write new boundaries if the policies are still at ``old.version``.

        Raises:
            BadVersionError: the policies changed since ``old`` was read (e.g. a concurrent split).
        """
        found = await self.policies(old.namespace)
        if found is None:
            raise NotFoundError(f"Namespace {old.namespace} does not exist")
        policies, _ = found
        new = NamespaceBundles(old.namespace, boundaries)
        policies["bundles"] = new.to_policy()
        stat = await self._store.put(namespace_path(old.namespace), json.dumps(policies).encode(), old.version)
        return NamespaceBundles(old.namespace, boundaries, stat.version)


def _json(value: bytes) -> dict:
    try:
        data = json.loads(value) if value else {}
    except ValueError:
        data = {}
    return data if isinstance(data, dict) else {}
