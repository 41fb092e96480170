"""The operator verbs of AutoRecovery (BookKeeper's ``BookKeeperAdmin`` and ``bookkeeper shell``:
``listbookies``, ``listunderreplicated``, ``recover``, ``decommissionbookie``, ``autorecovery``,
``lostbookierecoverydelay``, ``whoisauditor``), over the metadata store only — so that they
work with no bookie up, as BookKeeper's shell works on ZooKeeper.

- :func:`recover_bookie` marks every ledger with a fragment on the bookie under-replicated, naming
  it; the replication workers copy the fragments elsewhere when the bookie is down or
  read-only, or lacks them (a writable bookie holding its fragments keeps them, and the marks
  are cleared). :func:`wait_drained` waits until no ledger names it.
- :func:`decommission_bookie` drains a bookie the same way, marking again ledgers that still
  name it (an open ledger's last ensemble: its writer replaces a read-only bookie on its next
  add, or the worker fences the ledger after ``openLedgerRereplicationGracePeriod``), then
  deletes its cookie (``/ledgers/cookies/{id}``). The bookie must be down or read-only: the
  CLI turns a live one read-only first (its REST API), which also keeps new ledgers off it.
"""

from __future__ import annotations

import asyncio
import time

from minipulsar.bookkeeper.bookie_registry import AVAILABLE_PATH, READONLY_NAME, READONLY_PATH
from minipulsar.bookkeeper.replication.auditor_elector import who_is_auditor
from minipulsar.bookkeeper.replication.bookie_ledger_indexer import build_index
from minipulsar.bookkeeper.replication.underreplication_manager import (
    LedgerUnderreplicationManager,
    UnderreplicatedLedger,
)
from minipulsar.errors import NotFoundError, RequestTimeoutError
from minipulsar.ledger_paths import cookie_path
from minipulsar.metadata.store import MetadataStore

DRAIN_CHECK_INTERVAL_S = 1.0
REMARK_INTERVAL_S = 10.0
"""While draining, ledgers still naming the bookie are marked again this often (ledgers
created on it after the first marking, a mark cleared while an open ledger still named it)."""

__all__ = [
    "UnderreplicatedLedger",
    "autorecovery_enabled",
    "decommission_bookie",
    "ledgers_on",
    "list_bookies",
    "recover_bookie",
    "set_autorecovery_enabled",
    "wait_drained",
    "who_is_auditor",
]


async def list_bookies(store: MetadataStore) -> dict[str, list[str]]:
    """``{"writable": [...], "readonly": [...]}``: the registered bookies."""
    names = await store.children(AVAILABLE_PATH)
    read_only = await store.children(READONLY_PATH) if READONLY_NAME in names else []
    return {"writable": sorted(n for n in names if n != READONLY_NAME), "readonly": sorted(read_only)}


async def ledgers_on(store: MetadataStore, bookie: str) -> set[int]:
    """Ledgers whose ensembles name ``bookie``."""
    return set((await build_index(store)).ledgers_on(bookie))


async def recover_bookie(store: MetadataStore, bookie: str) -> set[int]:
    """Mark every ledger with a fragment on ``bookie`` under-replicated; returns their ids."""
    urm = LedgerUnderreplicationManager(store)
    ledgers = await ledgers_on(store, bookie)
    for ledger_id in sorted(ledgers):
        await urm.mark_ledger_underreplicated(ledger_id, [bookie])
    return ledgers


async def wait_drained(store: MetadataStore, bookie: str, timeout_s: float) -> None:
    """Wait until no ledger names ``bookie``, marking again those that still do.

    Raises:
        RequestTimeoutError: some ledger still names it after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    remark_at = time.monotonic() + REMARK_INTERVAL_S
    while True:
        left = await ledgers_on(store, bookie)
        if not left:
            return
        now = time.monotonic()
        if now > deadline:
            raise RequestTimeoutError(
                f"ledgers {sorted(left)} still have fragments on {bookie} after {timeout_s:.0f} s"
            )
        if now >= remark_at:
            await recover_bookie(store, bookie)
            remark_at = now + REMARK_INTERVAL_S
        await asyncio.sleep(DRAIN_CHECK_INTERVAL_S)


async def decommission_bookie(store: MetadataStore, bookie: str, timeout_s: float) -> None:
    """Drain ``bookie`` (every ledger re-replicated off it), then delete its cookie.

    Raises:
        RequestTimeoutError: not drained within ``timeout_s`` (the cookie is kept).
    """
    await recover_bookie(store, bookie)
    await wait_drained(store, bookie, timeout_s)
    try:
        await store.delete(cookie_path(bookie))
    except NotFoundError:
        pass


async def autorecovery_enabled(store: MetadataStore) -> bool:
    return await LedgerUnderreplicationManager(store).is_enabled()


async def set_autorecovery_enabled(store: MetadataStore, enabled: bool) -> None:
    urm = LedgerUnderreplicationManager(store)
    await (urm.enable() if enabled else urm.disable())
