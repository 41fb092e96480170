"""Goal: a ZooKeeper URL's chroot confines a store: Pulsar's ``zk:h:p/chroot`` and BookKeeper's
``zk+hierarchical://h:p/chroot/ledgers`` name the same keys, below ``/chroot`` on the server,
and notifications, children and sequential keys come back relative to it.

Method: one real ZooKeeper server; a chrooted store and an unchrooted one side by side."""

from __future__ import annotations

from minipulsar.metadata import Notification, NotificationType, open_metadata_store
from tests.support.process import wait_for
from tests.support.zookeeper import ZooKeeperEnsemble, zookeeper_fixture

zookeeper = zookeeper_fixture(per_module=True)


async def test_both_url_forms_share_one_chroot(zookeeper: ZooKeeperEnsemble) -> None:
    servers = zookeeper.connect_string
    pulsar = await open_metadata_store(f"zk:{servers}/cluster-a")
    bookkeeper = await open_metadata_store(f"zk+hierarchical://{servers.replace(',', ';')}/cluster-a/ledgers")
    whole = await open_metadata_store(zookeeper.url)
    try:
        assert (await whole.get("/cluster-a")).value == b""  # the first store created its chroot
        seen: list[Notification] = []
        pulsar.watch("/ledgers", seen.append)
        await pulsar.get("/ledgers")
        await bookkeeper.put("/ledgers/available/b1", b"reg", ephemeral=True)
        assert (await pulsar.get("/ledgers/available/b1")).value == b"reg"
        assert (await whole.get("/cluster-a/ledgers/available/b1")).stat.ephemeral
        assert await whole.get("/ledgers/available/b1") is None
        assert await pulsar.children("/") == ["ledgers"]
        vote = await bookkeeper.create_sequential("/ledgers/election/V_", b"", ephemeral=True)
        assert vote == "/ledgers/election/V_0000000000"
        await wait_for(lambda: Notification("/ledgers/available/b1", NotificationType.CREATED) in seen, 5)
        assert all(n.path.startswith("/ledgers") for n in seen)
    finally:
        for store in (pulsar, bookkeeper, whole):
            await store.close()
