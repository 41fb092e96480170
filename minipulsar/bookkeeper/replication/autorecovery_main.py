"""AutoRecoveryMain (BookKeeper's ``AutoRecoveryMain``): one process's AutoRecovery — its vote in
the auditor election (and the Auditor while elected) and one ReplicationWorker — over one
metadata store session and its own BookKeeper client.

Runs inside every bookie with ``autoRecoveryDaemonEnabled=true`` and as ``minipulsar
autorecovery`` on its own.

Stop order: the worker (a ledger in progress is abandoned: its copies are harmless, its lock
is released), the election (the Auditor stops, the vote is deleted so another process takes
over at once), then the BookKeeper client. The metadata store belongs to the caller.
"""

from __future__ import annotations

import logging

from minipulsar.bookkeeper.client import BookKeeper, BookKeeperSettings
from minipulsar.bookkeeper.replication.auditor import Auditor
from minipulsar.bookkeeper.replication.auditor_elector import AuditorElector
from minipulsar.bookkeeper.replication.replication_worker import ReplicationWorker
from minipulsar.bookkeeper.replication.settings import AutoRecoverySettings
from minipulsar.bookkeeper.replication.underreplication_manager import LedgerUnderreplicationManager
from minipulsar.metadata.store import MetadataStore

log = logging.getLogger(__name__)


class AutoRecoveryMain:
    def __init__(
        self,
        store: MetadataStore,
        my_id: str,
        settings: AutoRecoverySettings | None = None,
        bk_settings: BookKeeperSettings | None = None,
    ) -> None:
        self.settings = settings = settings or AutoRecoverySettings()
        self.my_id = my_id
        self.bk = BookKeeper(store, bk_settings or BookKeeperSettings(health_check_enabled=False))
        self.urm = LedgerUnderreplicationManager(store)
        self.auditor = Auditor(store, self.bk.registry, self.bk.bookies, self.urm, settings)
        self.worker = ReplicationWorker(self.bk, store, self.urm, settings)
        self.elector = AuditorElector(store, my_id, self._elected, self.auditor.stop)
        self._started = False

    def _elected(self) -> None:
        if not self.auditor.running:
            self.auditor.start()

    async def start(self) -> None:
        await self.bk.start()
        self.elector.start()
        self.worker.start()
        self._started = True
        log.info("autorecovery %s started", self.my_id)

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        await self.worker.stop()
        await self.elector.stop()
        await self.bk.close()
        log.info("autorecovery %s stopped", self.my_id)
