"""Polls every writable bookie's load report (BOOKIE_INFO) for load-aware placement (BP-65).

Every ``bookieLoadPollIntervalSeconds`` each bookie is asked concurrently; the last good report
per bookie is kept with the time it arrived. A bookie that does not answer keeps its previous
report, which grows stale and is then ignored by the policy (it falls back to random for it).
Reports of bookies that left the registry are dropped.

Invariants:

- a report is kept only for a bookie still in the registry;
- a report's ``received_at_s`` is when it arrived, on the poller's clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from minipulsar.bookkeeper.bookie_client import BookieClient
from minipulsar.bookkeeper.bookie_registry import BookieRegistry
from minipulsar.bookkeeper.cluster_view import BookieLoadReport
from minipulsar.errors import MiniPulsarError
from minipulsar.protocol.commands import BookieInfoResponse
from minipulsar.supervision import Periodic, spawn

log = logging.getLogger(__name__)


def load_report(response: BookieInfoResponse, received_at_s: float) -> BookieLoadReport:
    """The figures placement weighs, from a BOOKIE_INFO answer (``bookie/load.py`` names the keys).

    A bookie that reports no journal-disk figure (None: no block device; or an older bookie
    without the key) gets None, so placement weighs its own journal bytes instead.
    """
    info = response.info or {}
    used = info.get("ledgerDirsUsedFraction")
    if not isinstance(used, (int, float)):
        total = response.total_disk_bytes
        used = (total - response.free_disk_bytes) / total if total > 0 else 0.0
    disk_rate = info.get("journalDiskWriteBytesPerSecond")
    return BookieLoadReport(
        journal_write_bytes_per_s=float(info.get("journalWriteBytesPerSecond") or 0.0),
        ledger_dirs_used_fraction=float(used),
        received_at_s=received_at_s,
        read_only=bool(info.get("readOnly", False)),
        journal_disk_write_bytes_per_s=float(disk_rate) if isinstance(disk_rate, (int, float)) else None,
    )


class BookieLoadPoller:
    def __init__(
        self,
        registry: BookieRegistry,
        bookies: BookieClient,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry = registry
        self._bookies = bookies
        self.interval_s = interval_s
        self._clock = clock
        self.reports: dict[str, BookieLoadReport] = {}
        self._periodic = Periodic("bookie load poll", lambda: self.interval_s, self._poll, logger=log)
        self._first: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Poll every ``interval_s``, the first time at once."""
        if not self._periodic.running:
            self._first = spawn(self._periodic.run_once(), name="bookie load poll", logger=log)
            self._periodic.start()

    async def stop(self) -> None:
        first, self._first = self._first, None
        if first is not None:
            first.cancel()
            await asyncio.gather(first, return_exceptions=True)
        await self._periodic.stop()

    async def _poll(self) -> None:
        try:
            await self.poll_once()
        except MiniPulsarError as error:
            log.warning("polling bookie load reports failed: %s", error)

    async def poll_once(self) -> None:
        bookies = (await self._registry.bookies()).writable
        for gone in set(self.reports) - bookies:
            del self.reports[gone]
        names = sorted(bookies)
        answers = await asyncio.gather(
            *(asyncio.wait_for(self._bookies.bookie_info(b), self.interval_s) for b in names), return_exceptions=True
        )
        now = self._clock()
        for bookie, answer in zip(names, answers):
            if isinstance(answer, BookieInfoResponse):
                self.reports[bookie] = load_report(answer, now)
            else:
                log.debug("no load report from bookie %s: %r", bookie, answer)
