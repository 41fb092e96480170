"""Conditions on a metadata store for tests to wait on (with ``tests.support.process.wait_for``)."""

from __future__ import annotations

from minipulsar.metadata import MetadataStore


async def key_absent(store: MetadataStore, path: str) -> bool:
    """``path`` does not exist (never did, was deleted, or went with its session)."""
    return not await store.exists(path)
