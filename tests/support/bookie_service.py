"""An in-process bookie server (:class:`BookieServer`) for component tests.

- :func:`service_config` listens on 127.0.0.1 port 0 (bookie and HTTP), keeps one journal and
  one ledger directory under ``root``, and registers in a fresh ``memory://`` store unless given
  a metadata URL.
- :func:`running_service` stops the service when its context exits, whatever happened inside.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

from minipulsar.bookie.bookie_server import BookieServer
from minipulsar.config import BookieConfig, load_config

_memory_stores = itertools.count()


def memory_store_url() -> str:
    """A ``memory://`` metadata store no other test shares."""
    return f"memory://bookie-service-{next(_memory_stores)}"


def service_config(root: Path, metadata_url: str | None = None, **overrides: object) -> BookieConfig:
    """A bookie server's config; ``overrides`` are bookkeeper.conf keys (``journalQueueSize=3``)."""
    return load_config(
        BookieConfig,
        overrides={
            "bookiePort": 0,
            "httpServerPort": 0,
            "metadataServiceUri": metadata_url or memory_store_url(),
            "journalDirectories": str(root / "journal"),
            "ledgerDirectories": str(root / "ledgers"),
            "journalPreAllocSizeMB": 1,
            "zkTimeout": 2000,
            **{key: str(value) for key, value in overrides.items()},
        },
    )


@contextlib.asynccontextmanager
async def running_service(config: BookieConfig) -> AsyncIterator[BookieServer]:
    """A started :class:`BookieServer`, stopped at the end."""
    service = BookieServer(config)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()
