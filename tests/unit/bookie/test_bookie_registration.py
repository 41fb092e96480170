"""The bookie's registration key on an in-memory metadata store: where it lives when the bookie
turns read-only (or back) while it registers."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from minipulsar.bookie.registration import BookieRegistration, registration_path
from minipulsar.metadata.memory import MemoryMetadataStore
from tests.support.process import wait_for


class HookedStore(MemoryMetadataStore):
    """Runs ``on_put`` once, right after a put is applied and before its caller resumes: the
    moment a reply is in flight."""

    on_put: Callable[[], None] | None = None

    async def put(self, path, value, expected_version=None, *, ephemeral=False):
        stat = await super().put(path, value, expected_version, ephemeral=ephemeral)
        if self.on_put is not None:
            hook, self.on_put = self.on_put, None
            hook()
        return stat


@pytest.mark.parametrize("read_only_at_start", [False, True])
async def test_a_mode_flip_while_registering_leaves_the_key_where_the_mode_says(read_only_at_start: bool) -> None:
    """Goal: the bookie turning read-only (or writable) while its key is being created ends
    with the key under the path of the new mode, and none under the other. (register() then
    deleted "the other path's" key — by then the one it had just created — and the bookie was
    registered nowhere.)"""
    store = HookedStore(session_timeout_ms=10_000)
    registration = BookieRegistration(store, "b1:3181", {"instanceId": "x"}, 10_000, read_only=read_only_at_start)
    store.on_put = lambda: registration.set_read_only(not read_only_at_start)
    try:
        await registration.register()
        now = registration_path("b1:3181", not read_only_at_start)
        before = registration_path("b1:3181", read_only_at_start)
        await wait_for(lambda: store.get(now), 5, message=f"not registered under {now}")
        await wait_for(lambda: _absent(store, before), 5, message=f"still registered under {before}")
    finally:
        await registration.unregister()
        await store.close()


async def _absent(store: MemoryMetadataStore, path: str) -> bool:
    return await store.get(path) is None


async def test_unregistering_never_deletes_another_instances_key() -> None:
    """Goal: a bookie that failed to register (another instance holds the id) deletes nothing
    when it unregisters: it deleted the live bookie's key."""
    store = HookedStore(session_timeout_ms=10_000)
    live = BookieRegistration(store, "b1:3181", {"instanceId": "live"}, 10_000)
    other = BookieRegistration(store, "b1:3181", {"instanceId": "other"}, 10_000)
    try:
        await live.register()
        await other.unregister()
        assert await store.get(registration_path("b1:3181", False)) is not None
    finally:
        await live.unregister()
        await store.close()


async def test_a_bookie_re_registers_under_its_new_session() -> None:
    """Goal: after SESSION_LOST the key (gone with the session) is created again, as an
    ephemeral key of the store's new session."""
    store = HookedStore(session_timeout_ms=10_000)
    registration = BookieRegistration(store, "b1:3181", {"instanceId": "x"}, 10_000)
    path = registration_path("b1:3181", False)
    try:
        await registration.register()
        old_session = store.session_id
        store.expire_session()

        def owned_by_new_session() -> bool:
            node = store.shared.tree.get(path)
            return node is not None and store.session_id != old_session and node.owner == store.session_id

        await wait_for(owned_by_new_session, 5, message="not registered under the new session")
    finally:
        await registration.unregister()
        await store.close()


async def test_a_key_deleted_while_disconnected_is_recreated_on_reconnection() -> None:
    """Goal: the deletion notified while the bookie was disconnected is lost, but RECONNECTED
    makes it check, and the key is there again."""
    store = HookedStore(session_timeout_ms=10_000)
    other = MemoryMetadataStore(store.shared)
    registration = BookieRegistration(store, "b1:3181", {"instanceId": "x"}, 10_000)
    path = registration_path("b1:3181", False)
    try:
        await registration.register()
        store.disconnect()
        await other.delete(path)  # an operator's mistake, or a stale-key cleanup gone wrong
        store.reconnect()
        await wait_for(lambda: other.get(path), 5, message="the registration was not re-created")
    finally:
        await registration.unregister()
        await store.close()
        await other.close()
