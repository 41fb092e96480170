"""Goal: the load manager's view of the brokers, fed by a watch on ``/loadbalance/brokers``,
is re-read after a reconnection of the metadata session, so a report written while this broker
was disconnected (its notification lost) is not missed until the next change.

Method: a LoadManager (load balancing off: no election) on an in-process store; another store
of the same tree writes a broker's report while the first is disconnected."""

from __future__ import annotations

from minipulsar.broker.identity import BrokerIdentity
from minipulsar.broker.loadbalance.load_manager import LoadManager
from minipulsar.broker.loadbalance.reporter import BROKERS_PATH
from minipulsar.broker.loadbalance.settings import LoadBalancerSettings
from minipulsar.metadata import MemoryMetadataStore
from minipulsar.metadata.memory import SharedTree
from tests.support.load_reports import report
from tests.support.process import wait_for


class IdleReporter:
    """A load reporter that reports nothing (the other store writes the reports)."""

    current = None

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass


class NoBundleOperations:
    async def unload_bundle(self, bundle: str, destination_broker: str | None = None) -> None:
        raise AssertionError("no unload expected")

    async def split_bundle(self, bundle: str, algorithm: str | None = None, unload: bool = False) -> object:
        raise AssertionError("no split expected")

    async def bundles(self, namespace: str):
        raise AssertionError("no bundles expected")


async def test_reports_written_while_disconnected_are_read_on_reconnection() -> None:
    tree = SharedTree()
    store, other = MemoryMetadataStore(tree), MemoryMetadataStore(tree)
    manager = LoadManager(
        store,
        BrokerIdentity.of("127.0.0.1", 6650, 8080),
        LoadBalancerSettings(enabled=False),
        NoBundleOperations(),
        IdleReporter(),  # type: ignore[arg-type]
        cluster_name="test",
    )
    await manager.start()
    try:
        assert manager.load_data.brokers == {}
        store.disconnect()
        await other.put(f"{BROKERS_PATH}/b:8080", report(name="b").to_bytes(), ephemeral=True)
        store.reconnect()
        await wait_for(lambda: "b:8080" in manager.load_data.brokers, 5, message="the report was never read")
    finally:
        await manager.close()
        await store.close()
        await other.close()
