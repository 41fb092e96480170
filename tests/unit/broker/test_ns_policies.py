"""Goal: tenants and namespace policies live at Pulsar's paths with Pulsar's JSON, creation is
idempotent when brokers race, and bundle boundaries change only by compare-and-set.
Method: PolicyStore on in-process metadata stores sharing one tree (one store per "broker")."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from minipulsar.broker.namespace.bundles import initial_boundaries
from minipulsar.broker.namespace.policies import PolicyStore, split_namespace
from minipulsar.broker.namespace.split import split_boundaries
from minipulsar.errors import AlreadyExistsError, BadVersionError, InvalidCommandError, NotFoundError
from minipulsar.metadata import MemoryMetadataStore
from minipulsar.metadata.memory import SharedTree


@pytest_asyncio.fixture
async def stores() -> AsyncIterator[list[MemoryMetadataStore]]:
    tree = SharedTree()
    opened = [MemoryMetadataStore(tree) for _ in range(3)]
    yield opened
    for store in opened:
        await store.close()


async def test_public_default_created_by_racing_brokers_is_one_namespace(stores) -> None:
    policies = [PolicyStore(store, "standalone", 4) for store in stores]
    results = await asyncio.gather(*(p.ensure_namespace("public/default") for p in policies))
    assert {r.boundaries for r in results} == {initial_boundaries(4)}
    raw = json.loads((await stores[0].get("/admin/policies/public/default")).value)
    assert raw["bundles"] == {
        "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"],
        "numBundles": 4,
    }
    tenant = json.loads((await stores[0].get("/admin/policies/public")).value)
    assert tenant == {"adminRoles": [], "allowedClusters": ["standalone"]}
    assert await policies[1].tenants() == ["public"]
    assert await policies[2].namespaces("public") == ["public/default"]


async def test_namespace_gets_the_requested_bundle_count(stores) -> None:
    policies = PolicyStore(stores[0], "c1", 4)
    await policies.create_tenant("acme")
    created = await policies.create_namespace("acme/orders", {"bundles": {"numBundles": 8}, "retention": "keep"})
    assert len(created.ranges) == 8
    raw, _ = await policies.policies("acme/orders")
    assert raw["retention"] == "keep" and raw["bundles"]["numBundles"] == 8  # other keys are kept
    assert len((await policies.create_namespace("acme/default-count")).ranges) == 4


async def test_creating_twice_or_under_a_missing_tenant_fails_clearly(stores) -> None:
    policies = PolicyStore(stores[0], "c1", 4)
    with pytest.raises(NotFoundError, match="Tenant nobody does not exist"):
        await policies.create_namespace("nobody/ns")
    await policies.create_tenant("t")
    with pytest.raises(AlreadyExistsError):
        await policies.create_tenant("t")
    await policies.create_namespace("t/ns")
    with pytest.raises(AlreadyExistsError):
        await policies.create_namespace("t/ns")
    with pytest.raises(NotFoundError):
        await policies.namespaces("nobody")


@pytest.mark.parametrize("bad", ["", "a b", "x/y", "né?", "../etc"])
async def test_bad_names_are_refused(stores, bad: str) -> None:
    policies = PolicyStore(stores[0], "c1", 4)
    with pytest.raises(InvalidCommandError):
        await policies.create_tenant(bad)


async def test_bad_bundle_specs_are_refused(stores) -> None:
    policies = PolicyStore(stores[0], "c1", 4)
    await policies.create_tenant("t")
    for spec in ({"numBundles": 0}, {"numBundles": "four"}, {"boundaries": ["0x00000000", "0x10"]}, "x"):
        with pytest.raises(InvalidCommandError):
            await policies.create_namespace("t/ns", {"bundles": spec})
    with pytest.raises(InvalidCommandError):
        split_namespace("only-tenant")


async def test_boundaries_change_only_from_the_version_read(stores) -> None:
    a, b = PolicyStore(stores[0], "c1", 4), PolicyStore(stores[1], "c1", 4)
    bundles = await a.ensure_namespace("public/default")
    first = bundles.ranges[0]
    seen_by_b = await b.bundles("public/default")
    updated = await a.replace_bundles(bundles, split_boundaries(bundles.boundaries, first, 0x20000000))
    assert len(updated.ranges) == 5 and updated.version == bundles.version + 1
    with pytest.raises(BadVersionError):  # b's concurrent split read the old version
        await b.replace_bundles(seen_by_b, split_boundaries(seen_by_b.boundaries, first, 0x10000000))
    assert (await b.bundles("public/default")).boundaries == updated.boundaries
