"""The bookie registry's cached view of ``/ledgers/available`` and ``/bookies``, and the add
byte budget (pure logic; the registry runs on the in-memory metadata store)."""

from __future__ import annotations

import json
import uuid

from minipulsar.bookkeeper.add_budget import AddBudget
from minipulsar.bookkeeper.bookie_registry import BookieRegistry, parse_rack_mapping
from minipulsar.metadata import open_metadata_store
from tests.support.process import wait_for


async def _writable_is(registry: BookieRegistry, expected: set[str]) -> bool:
    return (await registry.bookies()).writable == expected


async def test_registry_sees_registrations_read_only_bookies_and_racks_and_follows_changes():
    store = await open_metadata_store(f"memory://{uuid.uuid4()}")
    try:
        await store.put("/ledgers/available/b1:3181", json.dumps({"rack": "/r1"}).encode())
        await store.put("/ledgers/available/b2:3181", b"{}")
        await store.put("/ledgers/available/readonly/b3:3181", b"{}")
        registry = BookieRegistry(store)
        registry.start()

        first = await registry.bookies()
        assert first.writable == {"b1:3181", "b2:3181"}
        assert first.read_only == {"b3:3181"}
        assert first.racks == {"b1:3181": "/r1"}
        assert await registry.bookies() is first, "no re-read without a change"

        await store.put(
            "/bookies", json.dumps({"default": {"b2:3181": {"rack": "/r2"}, "b1:3181": {"rack": "/r9"}}}).encode()
        )
        await store.delete("/ledgers/available/b1:3181")
        # notifications arrive asynchronously: the registry re-reads once it has been told
        await wait_for(lambda: _writable_is(registry, {"b2:3181"}), 5)
        second = await registry.bookies()
        assert second.racks["b2:3181"] == "/r2", "the rack mapping names the rack"
    finally:
        await store.close()


def test_rack_mapping_ignores_malformed_content():
    assert parse_rack_mapping(b"not json") == {}
    assert parse_rack_mapping(b'{"g": {"b:1": {"rack": 3}, "c:1": {"rack": "/r"}}, "h": 5}') == {"c:1": "/r"}


def test_budget_admits_within_the_limit_and_wakes_waiters_when_bytes_come_back():
    budget = AddBudget(100)
    woken = []
    assert budget.fits(60)
    budget.take(60)
    assert not budget.fits(50)
    budget.wait(lambda: woken.append(1))
    budget.give_back(30)
    assert woken == [1] and budget.fits(50)
    budget.give_back(30)
    assert woken == [1], "a waiter is called once per wait"


def test_budget_always_admits_one_add_into_an_empty_budget():
    budget = AddBudget(10)
    assert budget.fits(1000), "an entry larger than the limit must not wedge the ledger"
    budget.take(1000)
    assert not budget.fits(1)
