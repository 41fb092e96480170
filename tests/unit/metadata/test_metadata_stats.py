"""Goal: the instrumented store counts what Pulsar's MetadataStoreStats counts — each call by
type and status with its latency, put bytes — plus notifications (once each, however many
listeners hear it) and session events, and hides nothing callers use of the backend.

Method: an InstrumentedMetadataStore with a unique name over in-process memory stores; the
values are read from prometheus-client's default registry."""

from __future__ import annotations

import uuid

import prometheus_client
import pytest

from minipulsar.errors import BadVersionError
from minipulsar.metadata import (
    InstrumentedMetadataStore,
    MemoryMetadataStore,
    Notification,
    SessionEvent,
    open_metadata_store,
)
from minipulsar.metadata.memory import SharedTree
from tests.support.process import wait_for


def sample(metric: str, **labels: str) -> float:
    value = prometheus_client.REGISTRY.get_sample_value(metric, labels)
    return 0.0 if value is None else value


def ops(store: str, op: str, status: str = "success") -> float:
    return sample("pulsar_metadata_store_ops_latency_ms_count", name=store, type=op, status=status)


@pytest.fixture
def name() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


async def test_each_call_is_counted_by_type_and_status_with_put_bytes(name: str) -> None:
    store = InstrumentedMetadataStore(MemoryMetadataStore(), name)
    stat = await store.put("/a/b", b"12345")
    await store.put("/a/b", b"678", stat.version)
    with pytest.raises(BadVersionError):
        await store.put("/a/b", b"lost", stat.version)
    assert (await store.get("/a/b")).value == b"678"
    assert await store.get("/missing") is None  # a get of a missing key succeeds, as in Pulsar
    assert await store.children("/a") == ["b"]
    assert await store.exists("/a/b")
    await store.delete("/a/b")
    await store.close()

    assert (ops(name, "put"), ops(name, "put", "fail")) == (2, 1)
    assert (ops(name, "get"), ops(name, "children"), ops(name, "exists"), ops(name, "del")) == (2, 1, 1, 1)
    assert sample("pulsar_metadata_store_put_bytes_total", name=name) == 8
    bucket = "pulsar_metadata_store_ops_latency_ms_bucket"
    assert sample(bucket, name=name, type="get", status="success", le="5000.0") == 2


async def test_a_notification_heard_by_two_listeners_is_counted_once(name: str) -> None:
    shared = SharedTree()
    watcher = InstrumentedMetadataStore(MemoryMetadataStore(shared), name)
    writer = MemoryMetadataStore(shared)
    await writer.put("/w", b"")
    heard: list[Notification] = []
    watcher.watch("/w", heard.append)
    watcher.watch("/w/x", heard.append)
    await writer.put("/w/x", b"1")
    await writer.put("/w/x", b"2")
    await wait_for(lambda: len(heard) == 5, 5, message="/w/x created, modified: 2 each; /w's children: 1")
    count = "pulsar_metadata_store_notifications_total"
    assert sample(count, name=name, type="Created") == 1
    assert sample(count, name=name, type="Modified") == 1
    assert sample(count, name=name, type="ChildrenChanged") == 1
    for store in (watcher, writer):
        await store.close()


async def test_session_events_are_counted_and_backend_hooks_stay_reachable(name: str) -> None:
    store = InstrumentedMetadataStore(MemoryMetadataStore(), name)
    events: list[SessionEvent] = []
    store.add_session_listener(events.append)
    session = store.session_id  # the backend's attribute, through the wrapper
    store.expire_session()  # the backend's test hook, through the wrapper
    await wait_for(lambda: len(events) == 2, 5, message="lost, then re-established")
    assert store.session_id != session
    assert isinstance(store.backend, MemoryMetadataStore)
    count = "pulsar_metadata_store_session_events_total"
    assert sample(count, name=name, event="SessionLost") == 1
    assert sample(count, name=name, event="SessionReestablished") == 1
    await store.close()


async def test_open_metadata_store_instruments_every_store_as_metadata_store() -> None:
    store = await open_metadata_store(f"memory://{uuid.uuid4().hex}")
    assert isinstance(store, InstrumentedMetadataStore) and store.stats.name == "metadata-store"
    before = ops("metadata-store", "get")
    await store.get("/x")
    assert ops("metadata-store", "get") == before + 1
    await store.close()


class NativeRecursiveDelete(MemoryMetadataStore):
    """A backend with its own delete_recursive (as ZooKeeper's could be)."""

    called: list[str]

    async def delete_recursive(self, path: str) -> None:
        self.called = [*getattr(self, "called", []), path]
        await super().delete_recursive(path)


async def test_a_backends_own_derived_method_runs_and_is_timed_once(name: str) -> None:
    backend = NativeRecursiveDelete()
    store = InstrumentedMetadataStore(backend, name)
    await store.put("/t/a/b", b"")
    await store.delete_recursive("/t")
    assert backend.called[0] == "/t" and await store.get("/t") is None
    assert ops(name, "del") == 1  # the backend's one call, not its inner deletes
    plain = InstrumentedMetadataStore(MemoryMetadataStore(), f"{name}-plain")
    await plain.put("/t/a/b", b"")
    await plain.delete_recursive("/t")
    assert ops(f"{name}-plain", "del") == 3  # the interface's version: each delete counted
    for each in (store, plain):
        await each.close()
