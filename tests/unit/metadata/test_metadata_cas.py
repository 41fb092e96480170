"""Goal: a compare-and-set whose answer a dropped connection hid is resolved by reading the key
back (minipulsar/metadata/cas.py): applied → its Stat, so the writer's next write is at the
right version instead of failing BadVersion forever; not applied → put again; changed by
another writer → that writer's BadVersion / AlreadyExists, as a plain put.

Method: an in-process store whose next put is cut off — after it was applied, or before."""

from __future__ import annotations

import pytest

from minipulsar.errors import AlreadyExistsError, BadVersionError, ConnectionClosedError
from minipulsar.metadata import MemoryMetadataStore
from minipulsar.metadata.cas import put_resolving
from minipulsar.metadata.store import NOT_EXISTS, Stat


class CutOff(MemoryMetadataStore):
    """The next ``cut`` puts fail with ConnectionClosedError, applied first when ``applied``."""

    cut = 0
    applied = True

    async def put(
        self, path: str, value: bytes, expected_version: int | None = None, *, ephemeral: bool = False
    ) -> Stat:
        if self.cut > 0:
            self.cut -= 1
            if self.applied:
                await super().put(path, value, expected_version, ephemeral=ephemeral)
            raise ConnectionClosedError(f"connection lost before the write to {path} was answered")
        return await super().put(path, value, expected_version, ephemeral=ephemeral)


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not-applied"])
async def test_an_unknown_outcome_is_resolved_and_the_next_write_succeeds(applied: bool) -> None:
    store = CutOff()
    try:
        first = await store.put("/cursor", b"v0")
        store.cut, store.applied = 1, applied
        stat = await put_resolving(store, "/cursor", b"v1", first.version)
        assert stat.version == first.version + 1
        assert (await store.get("/cursor")).value == b"v1"
        assert (await put_resolving(store, "/cursor", b"v2", stat.version)).version == stat.version + 1
    finally:
        await store.close()


async def test_a_create_cut_off_after_it_was_applied_is_ours() -> None:
    store = CutOff()
    try:
        store.cut = 1
        assert (await put_resolving(store, "/info", b"x", NOT_EXISTS)).version == 0
    finally:
        await store.close()


async def test_a_bad_version_from_our_own_earlier_lost_write_is_ours() -> None:
    """The caller's earlier attempt was applied but reported cut off (and the read back failed
    then): its retry at the old version sees its own bytes at the next version."""
    store = CutOff()
    try:
        first = await store.put("/cursor", b"v0")
        await store.put("/cursor", b"v1", first.version)  # the lost write
        assert (await put_resolving(store, "/cursor", b"v1", first.version)).version == first.version + 1
    finally:
        await store.close()


async def test_another_writers_change_is_still_a_conflict() -> None:
    store = CutOff()
    try:
        first = await store.put("/cursor", b"v0")
        await store.put("/cursor", b"someone else", first.version)
        with pytest.raises(BadVersionError):
            await put_resolving(store, "/cursor", b"mine", first.version)
        store.cut, store.applied = 1, False
        with pytest.raises(AlreadyExistsError):
            await put_resolving(store, "/cursor", b"mine", NOT_EXISTS)
    finally:
        await store.close()
