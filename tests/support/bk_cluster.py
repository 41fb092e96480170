"""Bookie processes and a BookKeeper client for tests of the BookKeeper client against real
bookies (no broker): numbered bookies with their dirs under one root, and a client on the
metastore with the same short session timeout."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from minipulsar.bookkeeper import BookKeeper, BookKeeperSettings
from minipulsar.metadata import open_metadata_store
from tests.support.process import ServerProcess
from tests.support.servers import bookie_process

SESSION_MS = 2000
"""The bookies' and the client's metadata session timeout: a killed bookie is gone within it."""


def numbered_bookie(root: Path, index: int, metastore: ServerProcess, port: int = 0) -> ServerProcess:
    """Bookie ``index``, with its dirs under ``root/bookie-<index>``."""
    name = f"bookie-{index}"
    return bookie_process(
        root,
        metastore.url,
        port=port,
        journals=[f"{name}/journal"],
        ledgers=[f"{name}/ledgers"],
        settings={"zkTimeout": SESSION_MS},
        name=name,
    )


@contextlib.asynccontextmanager
async def bookies_running(root: Path, metastore: ServerProcess, count: int) -> AsyncIterator[list[ServerProcess]]:
    """``count`` bookies; a test may replace entries of the list (restarts): those are stopped too."""
    processes = [numbered_bookie(root, i, metastore) for i in range(count)]
    try:
        for process in processes:
            await asyncio.to_thread(process.start)
        yield processes
    except BaseException:
        print("\n".join(p.log_tail() for p in processes))
        raise
    finally:
        for process in processes:
            await asyncio.to_thread(process.stop)


@contextlib.asynccontextmanager
async def bk_client(metastore: ServerProcess, **settings: Any) -> AsyncIterator[BookKeeper]:
    """A started BookKeeper client (``settings``: BookKeeperSettings fields; 10 s timeout by default)."""
    store = await open_metadata_store(metastore.url, session_timeout_ms=SESSION_MS)
    bk = BookKeeper(store, BookKeeperSettings(timeout_s=settings.pop("timeout_s", 10.0), **settings))
    await bk.start()
    try:
        yield bk
    finally:
        await bk.close()
        await store.close()
