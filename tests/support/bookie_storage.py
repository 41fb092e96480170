"""Helpers for the storage-engine tests: an in-process BookieImpl on tmp dirs (or one ledger
directory alone), adds that await their acknowledgement, and crash images (a copy of every
dir while the bookie runs)."""

from __future__ import annotations

import asyncio
import itertools
import shutil
from pathlib import Path

from minipulsar.bookie.bookie_impl import BookieImpl
from minipulsar.bookie.storage.db_ledger_storage import DbLedgerStorage
from minipulsar.bookie.storage.single_directory import SingleDirectoryDbLedgerStorage, StorageSettings
from minipulsar.config import BookieConfig, load_config
from tests.support.entries import payload_for
from tests.support.journal import Add, RecordingSink

_images = itertools.count()


def bookie_config(root: Path, **overrides) -> BookieConfig:
    return load_config(
        BookieConfig,
        overrides={
            "journalDirectories": f"{root}/journal-a,{root}/journal-b",
            "ledgerDirectories": f"{root}/ledgers-a,{root}/ledgers-b",
            "journalPreAllocSizeMB": 1,
            "journalMaxGroupWaitMSec": 0,
            "flushInterval": 3_600_000,  # checkpoints only when a test asks (or a cache half fills)
            **{k: str(v) for k, v in overrides.items()},
        },
    )


async def started_bookie(root: Path, **overrides) -> BookieImpl:
    bookie = BookieImpl(bookie_config(root, **overrides))
    await bookie.start()
    return bookie


def storage(bookie: BookieImpl) -> DbLedgerStorage:
    assert isinstance(bookie.storage, DbLedgerStorage)
    return bookie.storage


async def add(
    bookie: BookieImpl, ledger_id: int, entry_id: int, payload: bytes, recovery: bool = False, master_key: bytes = b""
) -> None:
    """One add, through admission and the journal, returning once it is acknowledged."""
    sink, request = RecordingSink(), Add(ledger_id, entry_id, payload, recovery=recovery, master_key=master_key)
    if bookie.try_add([request], sink) == 0:
        await bookie.add_when_admitted(request, sink)
    await sink.wait(1)
    if (error := sink.error_of(request)) is not None:
        raise error


def open_single_directory(
    root: Path, write_cache_max_bytes: int = 1 << 20, flushes: list[int] | None = None
) -> SingleDirectoryDbLedgerStorage:
    """One opened ledger directory (no Bookie around it); each flush it requests appends to ``flushes``."""
    requested = flushes if flushes is not None else []
    directory = SingleDirectoryDbLedgerStorage(
        root, StorageSettings(write_cache_max_bytes=write_cache_max_bytes), request_flush=lambda: requested.append(1)
    )
    directory.open()
    return directory


async def add_many(bookie: BookieImpl, ledgers: range | list[int], entries: range, size: int = 1000) -> None:
    """Pipelined adds of ``payload_for(l, e, size)`` for every ledger and entry."""
    await asyncio.gather(
        *(
            add(bookie, ledger_id, entry_id, payload_for(ledger_id, entry_id, size))
            for entry_id in entries
            for ledger_id in ledgers
        )
    )


async def read_all(bookie: BookieImpl, ledger_id: int, first: int, count: int) -> list[tuple[int, bytes]]:
    return await bookie.read_entries(ledger_id, first, count, 1 << 40)


def crash_image(root: Path) -> Path:
    """Copy every dir of a running, idle bookie: what a SIGKILL at this instant leaves on disk
    (everything written is in the page cache, which a process crash does not lose)."""
    for _ in range(20):
        image = root.parent / f"{root.name}-image-{next(_images)}"
        try:
            shutil.copytree(root, image)
            return image
        except shutil.Error as error:
            # A journal helper thread renamed or deleted a file while it was being copied (a
            # recycled segment taken for the next one, a trimmed one): not an instant's
            # picture. Copy again; anything else is a real error.
            if not all("No such file or directory" in str(why) for _src, _dst, why in error.args[0]):
                raise
            shutil.rmtree(image, ignore_errors=True)
    raise AssertionError(f"{root} kept changing while it was copied")
