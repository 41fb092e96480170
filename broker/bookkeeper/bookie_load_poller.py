"""Polls every writable bookie's load report (BOOKIE_INFO) for load-aware placement (BP-65).

Every ``bookieLoadPollIntervalSeconds`` each bookie is asked concurrently; the last good report
per bookie is kept with the time it arrived. A bookie that does not answer keeps its previous
report, which grows stale and is then ignored by the policy (it falls back to random for it).
Reports of bookies that left the registry are dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from minipulsar.broker.bookkeeper.bookie_client import BookieClient
from minipulsar.broker.bookkeeper.bookie_registry import BookieRegistry
from minipulsar.broker.bookkeeper.cluster_view import BookieLoadReport
from minipulsar.errors import MiniPulsarError
from minipulsar.protocol.commands import BookieInfoResponse

log = logging.getLogger(__name__)


def load_report(response: BookieInfoResponse, received_at_s: float) -> BookieLoadReport:
    info = response.info or {}
    used = info.get("ledgerDirsUsedFraction")
    io_util = info.get("journalIoUtil")
    if not isinstance(used, (int, float)):
        total = response.total_disk_bytes
        used = (total - response.free_disk_bytes) / total if total > 0 else 0.0
    return BookieLoadReport(
        journal_write_bytes_per_s=float(info.get("journalWriteBytesPerSecond") or 0.0),
        ledger_dirs_used_fraction=float(used),
        received_at_s=received_at_s,
        journal_io_util=float(io_util) if isinstance(io_util, (int, float)) else -1.0,
        read_only=bool(info.get("readOnly", False)),
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
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.poll_once()
            except MiniPulsarError as error:
                log.warning("polling bookie load reports failed: %s", error)
            await asyncio.sleep(self.interval_s)

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
