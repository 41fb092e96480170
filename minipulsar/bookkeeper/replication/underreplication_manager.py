"""The under-replicated ledger list and its locks (BookKeeper's ``LedgerUnderreplicationManager``),
over the metadata store in the layout of :mod:`.paths`.

A mark says "these bookies of this ledger must be replaced". Marks only grow while they exist:
marking a marked ledger again adds the new bookies to it (compare-and-set). A worker clears a
mark only at the version it read before it started, so bookies marked while it worked are not
lost: the mark stays, and the ledger is taken again.

Invariants:

- at most one worker holds a ledger at a time: its lock is an ephemeral key created only if
  absent, so a worker that dies releases it with its session;
- while ``disable`` exists, :meth:`acquire_next` hands out nothing.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from minipulsar.bookkeeper.replication.paths import (
    DISABLE_PATH,
    LOST_BOOKIE_RECOVERY_DELAY_PATH,
    UNDERREPLICATION_ROOT,
    UR_LEDGERS_ROOT,
    parse_ur_node,
    ur_ledger_path,
    ur_lock_path,
    ur_parent_path,
)
from minipulsar.errors import AlreadyExistsError, BadVersionError, NotEmptyError, NotFoundError
from minipulsar.metadata.store import NOT_EXISTS, MetadataStore, Notification

log = logging.getLogger(__name__)

LOCK_DATA = b'{"owner":"ReplicationWorker"}'


@dataclass(frozen=True, slots=True)
class UnderreplicatedLedger:
    """One mark: BookKeeper's ``UnderreplicatedLedgerFormat``."""

    ledger_id: int
    missing_replicas: frozenset[str]
    """Bookies whose fragments of the ledger must be copied elsewhere."""
    ctime_ms: int = 0
    version: int = -1
    """Version of the mark this was read at."""

    def to_json(self) -> dict[str, object]:
        return {"ledgerId": self.ledger_id, "replicaList": sorted(self.missing_replicas), "ctime": self.ctime_ms}


def encode_mark(missing: Collection[str], ctime_ms: int) -> bytes:
    return json.dumps({"replica": sorted(missing), "ctime": ctime_ms}, separators=(",", ":")).encode()


def decode_mark(ledger_id: int, data: bytes, version: int) -> UnderreplicatedLedger:
    """A mark's value; an unreadable one means "check every bookie" (empty replica list)."""
    try:
        raw = json.loads(data) if data else {}
        replicas = frozenset(str(b) for b in raw.get("replica", []))
        ctime_ms = int(raw.get("ctime", 0))
    except (ValueError, AttributeError, TypeError):
        replicas, ctime_ms = frozenset(), 0
    return UnderreplicatedLedger(ledger_id, replicas, ctime_ms, version)


class LedgerUnderreplicationManager:
    def __init__(self, store: MetadataStore, rng: random.Random | None = None) -> None:
        self._store = store
        self._rng = rng or random.Random()

    # -- marks ----------------------------------------------------------------------------------

    async def mark_ledger_underreplicated(self, ledger_id: int, missing: Collection[str]) -> None:
        """Add ``missing`` to the ledger's mark, creating it if needed (BookKeeper's
        ``markLedgerUnderreplicated``)."""
        path = ur_ledger_path(ledger_id)
        while True:
            current = await self._store.get(path)
            try:
                if current is None:
                    await self._store.put(path, encode_mark(missing, _now_ms()), NOT_EXISTS)
                    return
                mark = decode_mark(ledger_id, current.value, current.version)
                if frozenset(missing) <= mark.missing_replicas:
                    return
                merged = mark.missing_replicas | frozenset(missing)
                await self._store.put(path, encode_mark(merged, mark.ctime_ms), current.version)
                return
            except (AlreadyExistsError, BadVersionError, NotFoundError):
                continue  # raced with another marker or a worker: read again

    async def get(self, ledger_id: int) -> UnderreplicatedLedger | None:
        result = await self._store.get(ur_ledger_path(ledger_id))
        return None if result is None else decode_mark(ledger_id, result.value, result.version)

    async def mark_ledger_replicated(self, mark: UnderreplicatedLedger) -> bool:
        """Clear ``mark`` if it is unchanged since it was read; False when it changed (kept)."""
        try:
            await self._store.delete(ur_ledger_path(mark.ledger_id), mark.version)
        except NotFoundError:
            return True
        except BadVersionError:
            return False
        await self._delete_empty_parents(mark.ledger_id)
        return True

    async def _delete_empty_parents(self, ledger_id: int) -> None:
        path = ur_parent_path(ledger_id)
        while path != UR_LEDGERS_ROOT:
            try:
                await self._store.delete(path)
            except (NotEmptyError, NotFoundError):
                return
            path = path.rsplit("/", 1)[0]

    async def list_underreplicated(self) -> list[UnderreplicatedLedger]:
        """Every mark, by ledger id."""
        marks: list[UnderreplicatedLedger] = []
        await self._walk(UR_LEDGERS_ROOT, 4, marks)
        return sorted(marks, key=lambda m: m.ledger_id)

    async def _walk(self, path: str, depth: int, marks: list[UnderreplicatedLedger]) -> None:
        for name in await self._store.children(path):
            child = f"{path}/{name}"
            if depth > 0:
                await self._walk(child, depth - 1, marks)
                continue
            ledger_id = parse_ur_node(name)
            result = await self._store.get(child) if ledger_id is not None else None
            if ledger_id is not None and result is not None:
                marks.append(decode_mark(ledger_id, result.value, result.version))

    # -- locks ----------------------------------------------------------------------------------

    async def acquire(self, ledger_id: int) -> bool:
        """Take the ledger's lock (ephemeral); False when another worker holds it."""
        try:
            await self._store.put(ur_lock_path(ledger_id), LOCK_DATA, NOT_EXISTS, ephemeral=True)
        except AlreadyExistsError:
            return False
        return True

    async def release(self, ledger_id: int) -> None:
        try:
            await self._store.delete(ur_lock_path(ledger_id))
        except NotFoundError:
            pass

    async def acquire_next(self, skip: Collection[int] = ()) -> UnderreplicatedLedger | None:
        """A marked ledger not in ``skip``, now locked by the caller; None when there is none
        (or AutoRecovery is disabled). Chosen at random, so workers spread over the list."""
        if not await self.is_enabled():
            return None
        marks = [m for m in await self.list_underreplicated() if m.ledger_id not in skip]
        self._rng.shuffle(marks)
        for mark in marks:
            if await self.acquire(mark.ledger_id):
                current = await self.get(mark.ledger_id)  # read under the lock: the version to clear
                if current is not None:
                    return current
                await self.release(mark.ledger_id)
        return None

    # -- switches -------------------------------------------------------------------------------

    async def is_enabled(self) -> bool:
        return not await self._store.exists(DISABLE_PATH)

    async def disable(self) -> None:
        try:
            await self._store.put(DISABLE_PATH, b"", NOT_EXISTS)
        except AlreadyExistsError:
            pass

    async def enable(self) -> None:
        try:
            await self._store.delete(DISABLE_PATH)
        except NotFoundError:
            pass

    async def lost_bookie_recovery_delay_s(self, default_s: int) -> int:
        """The delay the operator set, else ``default_s`` (the auditor's lostBookieRecoveryDelay)."""
        result = await self._store.get(LOST_BOOKIE_RECOVERY_DELAY_PATH)
        if result is None:
            return default_s
        try:
            return max(0, int(result.value.decode().strip()))
        except ValueError:
            log.warning("%s holds %r, not seconds; using %d", LOST_BOOKIE_RECOVERY_DELAY_PATH, result.value, default_s)
            return default_s

    async def set_lost_bookie_recovery_delay_s(self, delay_s: int) -> None:
        if delay_s < 0:
            raise ValueError(f"lostBookieRecoveryDelay must be >= 0, got {delay_s}")
        await self._store.put(LOST_BOOKIE_RECOVERY_DELAY_PATH, str(delay_s).encode())

    def watch(self, listener: Callable[[Notification], None]) -> None:
        """Call ``listener`` on every change under ``/ledgers/underreplication``."""
        self._store.watch(UNDERREPLICATION_ROOT, listener)


def _now_ms() -> int:
    return int(time.time() * 1000)
