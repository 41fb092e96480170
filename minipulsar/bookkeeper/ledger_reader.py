"""Reading entries of a ledger from its replicas.

- Entry ``e`` is read from its write set. With ``E == Qw`` every bookie of a segment holds every
  entry, so a range is one READ_ENTRY to one replica — the *sticky* one (Pulsar's
  ``bookkeeperEnableStickyReads``: one bookie per ledger keeps its read-ahead cache warm),
  switching only after an error. With ``E > Qw`` entries are striped and read one by one, in
  parallel.
- A replica that errs is replaced by the next one at once (failover). With a speculative
  timeout, a replica that stays silent that long gets a companion request to the next replica,
  but only while nobody has answered anything yet; the first good answer wins.
- An answer counts only if it starts at the entry asked for; a shorter range (the bookie's
  ``max_bytes`` cut) is fine, the caller asks again from where it stopped.
- Every entry is verified against its digest and unwrapped
  (:class:`~minipulsar.bookkeeper.digest.DigestManager`). An entry that fails is counted
  (``READ_ENTRY_DM``) and never returned: the answer is cut before it, the replica counts as
  failed (the sticky bookie changes), and when it is the first entry asked for the next
  replica is asked at once.

Invariants:

- entries are returned in order from the first asked for, and never beyond the known end;
- only payloads whose digest matched are returned;
- a read fails only when every replica of an entry failed.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time

from minipulsar.bookkeeper.context import ClientContext
from minipulsar.bookkeeper.digest import DigestManager, DigestMismatchError
from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata
from minipulsar.bookkeeper.metrics import READ_ENTRY, READ_ENTRY_DM, SPECULATIVE_READ_COUNT
from minipulsar.errors import MiniPulsarError, PersistenceError
from minipulsar.protocol.commands import ReadEntryResponse

log = logging.getLogger(__name__)

STRIPED_READ_PARALLELISM = 64
"""At most this many single-entry reads in flight for one striped range read."""

_READ_OK = READ_ENTRY.labels("true")
_READ_FAILED = READ_ENTRY.labels("false")


def _consume(future: asyncio.Future) -> None:
    """Done-callback of a replica request nobody awaits any more (keeps asyncio quiet)."""
    if not future.cancelled():
        future.exception()


class LedgerReader:
    def __init__(self, ctx: ClientContext, rng: random.Random | None = None) -> None:
        self._ctx = ctx
        self._sticky_index = (rng or random).randrange(1 << 30)
        """Which bookie of an ``E == Qw`` ensemble reads go to first (modulo E)."""
        self._digest: DigestManager | None = None
        """The digest manager of the ledger last read (a reader usually reads one ledger)."""

    def _digest_of(self, metadata: LedgerMetadata) -> DigestManager:
        digest = self._digest
        if digest is None or digest.ledger_id != metadata.ledger_id:
            digest = self._digest = metadata.digest_manager()
        return digest

    async def read(self, metadata: LedgerMetadata, first_entry_id: int, last_entry_id: int) -> list[tuple[int, bytes]]:
        """Entries ``first..last`` inclusive, all of them, in order.

        Raises:
            PersistenceError: no replica could serve one of them.
        """
        entries: list[tuple[int, bytes]] = []
        next_id = first_entry_id
        while next_id <= last_entry_id:
            segment_last = min(last_entry_id, self._segment_last(metadata, next_id))
            if metadata.ensemble_size == metadata.write_quorum:
                batch = await self._read_range(metadata, next_id, segment_last - next_id + 1)
            else:
                batch = await self._read_striped(metadata, next_id, segment_last)
            entries.extend(batch)
            next_id = batch[-1][0] + 1
        return entries

    @staticmethod
    def _segment_last(metadata: LedgerMetadata, entry_id: int) -> int:
        """The last entry id stored on the same ensemble as ``entry_id``."""
        for first, _ in metadata.ensembles:
            if first > entry_id:
                return first - 1
        return 1 << 62

    async def _read_striped(self, metadata: LedgerMetadata, first: int, last: int) -> list[tuple[int, bytes]]:
        entries: list[tuple[int, bytes]] = []
        for chunk_first in range(first, last + 1, STRIPED_READ_PARALLELISM):
            chunk_last = min(last, chunk_first + STRIPED_READ_PARALLELISM - 1)
            batches = await asyncio.gather(
                *(self._read_range(metadata, entry_id, 1) for entry_id in range(chunk_first, chunk_last + 1))
            )
            entries.extend(batch[0] for batch in batches)
        return entries

    def _replica_order(self, metadata: LedgerMetadata, entry_id: int) -> list[str]:
        write_set = metadata.write_set(entry_id)
        if metadata.ensemble_size != metadata.write_quorum:
            return write_set
        ensemble = metadata.ensemble_for(entry_id)
        preferred = ensemble[self._sticky_index % len(ensemble)]
        start = write_set.index(preferred)
        return write_set[start:] + write_set[:start]

    async def _read_range(self, metadata: LedgerMetadata, first: int, count: int) -> list[tuple[int, bytes]]:
        started = time.monotonic()
        try:
            entries = await self._read_from_replicas(metadata, first, count)
        except BaseException:
            _READ_FAILED.observe((time.monotonic() - started) * 1000)
            raise
        _READ_OK.observe((time.monotonic() - started) * 1000)
        return entries

    async def _read_from_replicas(self, metadata: LedgerMetadata, first: int, count: int) -> list[tuple[int, bytes]]:
        replicas = self._replica_order(metadata, first)
        speculative_s = self._ctx.speculative_read_timeout_s
        in_flight: dict[asyncio.Future, str] = {}
        errors: list[str] = []
        launched = 0
        heard = False

        def launch() -> None:
            nonlocal launched
            bookie = replicas[launched]
            launched += 1
            in_flight[self._ctx.bookies.read_entries(bookie, metadata.ledger_id, first, count)] = bookie

        launch()
        try:
            while in_flight:
                speculate = speculative_s > 0 and not heard and launched < len(replicas)
                done, _ = await asyncio.wait(
                    in_flight, timeout=speculative_s if speculate else None, return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    SPECULATIVE_READ_COUNT.inc()
                    log.debug(
                        "ledger %d: no answer for entry %d after %.0f ms, asking %s too",
                        metadata.ledger_id,
                        first,
                        speculative_s * 1000,
                        replicas[launched],
                    )
                    launch()
                    continue
                heard = True
                for future in done:
                    bookie = in_flight.pop(future)
                    entries, sound = self._answer(future, bookie, metadata, first, errors)
                    if not sound and bookie == replicas[0]:
                        self._sticky_index += 1  # the sticky bookie failed: prefer the next one
                    if entries:
                        return entries
                    if launched < len(replicas):
                        launch()
        finally:
            for future in in_flight:
                future.add_done_callback(_consume)
        raise PersistenceError(
            f"cannot read entry {first} of ledger {metadata.ledger_id} from any replica: {'; '.join(errors)}"
        )

    def _answer(
        self, future: asyncio.Future, bookie: str, metadata: LedgerMetadata, first: int, errors: list[str]
    ) -> tuple[list[tuple[int, bytes]], bool]:
        """The verified entries of a replica's answer (empty: none from ``first``), and whether
        the replica is sound: it answered, and every entry it sent matched its digest."""
        error = future.exception()
        if error is not None:
            errors.append(f"{bookie}: {error}")
            if isinstance(error, MiniPulsarError):
                self._ctx.record_error(bookie, error)
            return [], False
        response: ReadEntryResponse = future.result()
        if not response.entries or response.entries[0][0] != first:
            errors.append(f"{bookie}: answered without entry {first}")
            return [], False
        entries = verified_entries(self._digest_of(metadata), first, response.entries, bookie)
        if not entries:
            errors.append(f"{bookie}: entry {first} does not match its digest")
        return entries, len(entries) == len(response.entries)


def verified_entries(digest: DigestManager, first: int, entries: list, bookie: str) -> list[tuple[int, bytes]]:
    """The payloads of a bookie's ``[entry_id, wrapped bytes]`` answer from ``first`` on, up to
    the first entry out of sequence or not matching its digest (counted in ``READ_ENTRY_DM``)."""
    verified: list[tuple[int, bytes]] = []
    verify = digest.verify
    for expected, (entry_id, data) in enumerate(entries, first):
        if entry_id != expected:
            break
        try:
            verified.append((expected, verify(expected, bytes(data))))
        except DigestMismatchError as error:
            READ_ENTRY_DM.inc()
            log.warning("bookie %s: %s; reading it from another replica", bookie, error)
            break
    return verified
