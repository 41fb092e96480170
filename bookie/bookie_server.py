"""The bookie process's root (BookKeeper's ``BookieServer``): it builds the storage engine
(:class:`~bookie.bookie_impl.BookieImpl`), its read thread pool, disk monitor, load report,
listener, HTTP server and registration, wires them together, starts and stops them.

Start, in this order: check the cookies, replay the journals, open them, check the ledger
dirs' disk space, bind the port, serve HTTP (:mod:`bookie.http_api`), check the cookie the
metadata store holds for this bookie id (:func:`bookie.cookie.check_store_cookie`; with
``--port 0``, a port whose id an earlier bookie used is exchanged for another), accept
connections, then register under ``/ledgers/available`` — or, when every ledger dir is
already full or ``forceReadOnlyBookie`` is set, under ``/ledgers/available/readonly`` — and,
with ``autoRecoveryDaemonEnabled``, start AutoRecovery
(:mod:`minipulsar.bookkeeper.replication.autorecovery_main`) on the bookie's metadata session.

Stop, in this order: stop AutoRecovery (its vote goes: another process becomes the auditor),
stop taking work (accepting connections, reading requests), answer the reads already queued
and stop the read pool, let every journal group in flight be written, synced and answered,
close the journals and the storage, delete the registration, close the metadata session.

Invariants:
- brokers see only a bookie that already serves, registered in the state it serves in;
- while serving, the bookie is read-only — adds refused with BookieReadOnly, the
  registration on the read-only path — exactly while a cause of
  :mod:`bookie.state_manager` holds: no writable ledger dir, each full or failed
  (:mod:`bookie.storage.ledger_dirs_manager`; a full one comes back below
  ``diskUsageLwmThreshold``), an operator's ``PUT /api/v1/bookie/state/readonly``, or
  ``forceReadOnlyBookie``; with ``readOnlyModeEnabled=false`` the first stops the bookie
  instead, as BookKeeper does;
- a failed journal (a write or sync error) makes the bookie leave: its registration is
  deleted at once, then it stops and the process exits with 5 (BookKeeper's
  ``ExitCode.BOOKIE_EXCEPTION``) — never a bookie that stays up refusing everything;
- garbage collection runs only while serving (``PUT /api/v1/bookie/gc`` forces a round);
- nothing accepted is dropped on a stop: what was read is answered before the journals close.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from minipulsar.bookie import add_fault, disk_model, metrics
from minipulsar.bookie.bookie_impl import BookieImpl
from minipulsar.bookie.bookie_status import read_status, write_status
from minipulsar.bookie.cookie import (
    Cookie,
    ForeignStoreCookieError,
    check_cookies,
    check_store_cookie,
    record_bookie_id,
)
from minipulsar.bookie.dir_lock import DirectoryLocks
from minipulsar.bookie.disk_monitor import LedgerDirsMonitor
from minipulsar.bookie.http_api import FORCE_READ_ONLY, READ_ONLY_BY_HAND, BookieHttpApi
from minipulsar.bookie.load import BookieLoad
from minipulsar.bookie.read_permits import ReadPermits
from minipulsar.bookie.read_pool import ReadThreadPool
from minipulsar.bookie.registration import DEFAULT_RACK, BookieRegistration
from minipulsar.bookie.server_connection import BookieServerConnection
from minipulsar.bookie.state_manager import LEDGER_DIRS_FULL, BookieStateManager
from minipulsar.bookie.storage.gc import DiskPressure, MetadataStoreLedgers
from minipulsar.bookkeeper.client import BookKeeperSettings
from minipulsar.bookkeeper.replication.autorecovery_main import AutoRecoveryMain
from minipulsar.bookkeeper.replication.settings import AutoRecoverySettings
from minipulsar.config import BookieConfig
from minipulsar.durable_file import make_dirs
from minipulsar.metadata import MetadataStore, open_metadata_store
from minipulsar.metrics import HttpServer
from minipulsar.net.server import Listener
from minipulsar.supervision import spawn

log = logging.getLogger(__name__)

T = TypeVar("T")
_WILDCARD_ADDRESSES = ("", "0.0.0.0", "::")
METADATA_CLOSE_TIMEOUT_S = 5.0
EPHEMERAL_PORT_ATTEMPTS = 5
"""With ``--port 0``: ports tried before giving up when each one's id belongs to another bookie."""
REGISTRATION_MOVE_WAIT_S = 10.0
"""How long a read-only PUT waits for the registration to move before answering."""


class StartAborted(Exception):
    """A stop was asked (SIGTERM, SIGINT) while the bookie was starting: it stops before serving."""


class BookieServer:
    def __init__(
        self, config: BookieConfig, store: MetadataStore | None = None, stop: asyncio.Event | None = None
    ) -> None:
        """``store``: an already open metadata store (tests); else one is opened from the config.
        ``stop``: set when the bookie must shut down by itself (a journal failed; or no ledger
        dir is writable, with read-only mode disabled); the process then stops it as on SIGTERM."""
        self.config = config
        model = disk_model.install(config.simulated_disk_model)  # bench only; None (the default): no model
        self.read_pool = ReadThreadPool(config.num_read_worker_threads, config.max_pending_read_requests_per_thread)
        self.read_permits = ReadPermits(config.max_reads_in_progress_limit)
        self.add_fault = add_fault.from_setting(config.add_error_above_adds_per_s)  # lab fault; None: off
        self.bookie = BookieImpl(config, read_executor=self.read_pool)
        self.state = BookieStateManager(self._read_only_changed)
        self.bookie.journals.on_failed(self._journal_failed)
        self.disk_monitor = LedgerDirsMonitor(config, self._writable_changed, self.bookie.dirs_manager)
        self.bookie.storage.no_space_listener = self._ledger_dir_out_of_space
        self.load = BookieLoad(
            config.journal_dirs,
            config.ledger_dirs,
            self.disk_monitor,
            self.state,
            self.read_pool,
            journal_device=None if model is None else model.journal_device,
        )
        self._stop_event = stop
        self.failure: str | None = None
        """Why the bookie shut itself down (:meth:`_shut_down`), if it did: not a requested stop."""
        self.store = store
        self._owns_store = store is None
        self.listener = Listener(self._new_connection)
        self.http_api = BookieHttpApi(self)
        self.http = HttpServer(self.http_api.routes())
        self.registration: BookieRegistration | None = None
        self.autorecovery: AutoRecoveryMain | None = None
        """With autoRecoveryDaemonEnabled: this bookie's vote for the auditor and its replication worker."""
        self.host = ""
        self.port = 0
        self.http_port = 0
        self._stopped = False
        self.serving = False
        """Registered and taking requests: from the end of :meth:`start` to the start of :meth:`stop`."""
        self.failed_journals: set[int] = set()
        """Journals whose writer stopped (their ledgers take no adds, recovery adds included)."""
        self._locks = DirectoryLocks()

    @property
    def bookie_id(self) -> str:
        return f"{self.host}:{self.port}"

    def _new_connection(self) -> BookieServerConnection:
        return BookieServerConnection(
            self.bookie,
            self.bookie_id,
            state=self.state,
            load=self.load,
            read_permits=self.read_permits,
            add_fault=self.add_fault,
        )

    async def start(self) -> None:
        """Start, in the order of the module docstring.

        Raises:
            StartAborted: the stop event was set meanwhile (checked after the replay, which runs
                to its end, and while waiting for the metadata store or an old registration).
        """
        config, loop = self.config, asyncio.get_running_loop()
        journal_dirs = [Path(d) for d in config.journal_dirs]
        cookie = await loop.run_in_executor(None, self._prepare_dirs, journal_dirs)
        await self.bookie.start()
        self._check_not_stopping()
        await self.disk_monitor.start()
        await self.load.start()
        # Bound but not accepting until the metadata store's cookie is checked: a broker
        # recovering a ledger reaches a bookie by the host:port in the ledger's metadata, and
        # must never hear "no such ledger" from a wiped bookie that is about to be refused.
        await self._bind()
        self.http_port = await self.http.start(config.bind_address, config.http_port)
        if self.store is None:
            self.store = await self._unless_stopping(
                open_metadata_store(config.metadata_url, session_timeout_ms=config.session_timeout_ms)
            )
        await self._check_store_cookie(cookie)
        await loop.run_in_executor(None, record_bookie_id, cookie, self.bookie_id)
        if config.force_read_only_bookie:
            self.state.set_cause(FORCE_READ_ONLY, True)
        persisted_read_only = (
            await loop.run_in_executor(None, read_status, self._ledger_dirs)
            if config.persist_bookie_status_enabled
            else None
        )
        if persisted_read_only:
            log.info("starting read-only, as an operator left it (persistBookieStatusEnabled)")
            self.state.set_cause(READ_ONLY_BY_HAND, True)
        await self.listener.serve()
        self.registration = BookieRegistration(
            self.store,
            self.bookie_id,
            {
                "httpPort": self.http_port,
                "journalDirs": [str(Path(d).resolve()) for d in config.journal_dirs],  # noqa: ASYNC240 -- once, at registration
                "ledgerDirs": [str(Path(d).resolve()) for d in config.ledger_dirs],  # noqa: ASYNC240 -- once, at registration
                "rack": DEFAULT_RACK,
                "instanceId": cookie.instanceId,
            },
            config.session_timeout_ms,
            read_only=self.state.read_only,
        )
        await self._unless_stopping(self.registration.register())
        self.bookie.start_gc(MetadataStoreLedgers(self.store), self._disk_pressure)
        if config.auto_recovery_daemon_enabled:
            self.autorecovery = AutoRecoveryMain(
                self.store,
                self.bookie_id,
                AutoRecoverySettings.from_bookie_config(config),
                BookKeeperSettings(health_check_enabled=False, max_frame_size=config.max_frame_size),
            )
            await self.autorecovery.start()
        metrics.SERVER_STATUS.set(0 if self.state.read_only else 1)
        self.serving = not self.stopping
        log.info(
            "bookie %s serving (journals %s, ledger dirs %s)",
            self.bookie_id,
            ", ".join(config.journal_dirs),
            ", ".join(config.ledger_dirs),
        )

    async def _bind(self) -> None:
        """Bind the port (not accepting connections yet); the bookie id is known from here on."""
        config = self.config
        bound_host, self.port = await self.listener.start(config.bind_address, config.port, serve=False)
        self.host = config.advertised_address or _advertised_host(bound_host)

    async def _check_store_cookie(self, cookie: Cookie) -> None:
        """Check (or write) the metadata store's cookie for the bound bookie id.

        Raises:
            ForeignStoreCookieError: the configured port's id belongs to another bookie instance
                (with ``--port 0``: each of EPHEMERAL_PORT_ATTEMPTS ports' ids did).
        """
        store = self.store
        assert store is not None, "the metadata store is opened first"
        for attempt in range(1, EPHEMERAL_PORT_ATTEMPTS + 1):
            try:
                await self._unless_stopping(check_store_cookie(store, self.bookie_id, cookie))
                return
            except ForeignStoreCookieError:
                # An ephemeral port is no identity: the id of a bookie that ran here before with
                # its own ledgers is left to it, and another port asked for.
                if self.config.port != 0 or attempt == EPHEMERAL_PORT_ATTEMPTS:
                    raise
                log.warning(
                    "port %d was given by the OS, but bookie id %s belongs to another bookie instance "
                    "(its cookie is in the metadata store); binding another port",
                    self.port,
                    self.bookie_id,
                )
                await self.listener.close()
                await self._bind()

    def _check_not_stopping(self) -> None:
        if self._stop_event is not None and self._stop_event.is_set():
            raise StartAborted("stopped while starting")

    async def _unless_stopping(self, work: Awaitable[T]) -> T:
        """``await work``, unless the stop event is set first (a metadata store that does not
        answer, an old registration waited out for up to the session timeout): then cancel it."""
        try:
            self._check_not_stopping()
        except StartAborted:
            if asyncio.iscoroutine(work):
                work.close()  # never started: no "never awaited" warning
            raise
        task = asyncio.ensure_future(work)
        if self._stop_event is None:
            return await task
        stopping = asyncio.ensure_future(self._stop_event.wait())
        try:
            await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise StartAborted("stopped while starting")
        return task.result()

    def _prepare_dirs(self, journal_dirs: list[Path]):
        self.bookie.ledger_dirs.create()
        for directory in journal_dirs:
            make_dirs(directory / "current")
        self._locks.acquire([d / "current" for d in [*journal_dirs, *self.bookie.ledger_dirs.dirs]])
        return check_cookies(journal_dirs, self.bookie.ledger_dirs.dirs)

    def _writable_changed(self, writable: bool) -> None:
        """The first ledger dir is writable again, or the last one is full or failed."""
        if not writable and not self.config.read_only_mode_enabled:
            self._shut_down("no ledger dir is writable (each full or failed) and readOnlyModeEnabled=false")
            return
        self.state.set_cause(LEDGER_DIRS_FULL, not writable)

    def _ledger_dir_out_of_space(self) -> None:
        """A flush failed with ENOSPC: check the dirs now rather than at the next round."""
        if not self._stopped:
            self.disk_monitor.check_soon()

    def _journal_failed(self, index: int, failure: BaseException) -> None:
        """A journal's writer stopped (on the loop, once per journal): as BookKeeper's bookie
        whose journal thread quit, leave the cluster — the failed journal refuses its adds
        already; the registration is deleted now, so that writers replace this bookie at once
        rather than after its session expires; then the bookie stops (the process exits with
        BOOKIE_EXCEPTION, 5), whatever ``readOnlyModeEnabled`` says."""
        log.error("journal %d (%s) failed: %s", index, self.config.journal_dirs[index], failure)
        self.failed_journals.add(index)
        self._shut_down(f"journal {index} failed ({failure})")
        if self.registration is not None and not self._stopped:
            spawn(self.registration.unregister(), name="unregister after a journal failure", logger=log)

    def _shut_down(self, why: str) -> None:
        log.error("%s: shutting the bookie down", why)
        self.failure = why
        if self._stop_event is not None:
            self._stop_event.set()

    def _read_only_changed(self, read_only: bool, reason: str) -> None:
        if read_only:
            log.warning("bookie %s is now read-only (%s): adds are refused, reads served", self.bookie_id, reason)
            # Adds waiting for write-cache room have not reached the journal: refuse them now
            # rather than after dbStorage_maxThrottleTimeMs (the flush may be what failed).
            refused = self.bookie.storage.refuse_waiting(functools.partial(self.state.refusal, self.bookie_id))
            if refused:
                log.warning("refused %d adds that were waiting for write-cache room", refused)
        else:
            log.warning("bookie %s is writable again (cleared: %s)", self.bookie_id, reason)
        if self._stopped:
            return
        if self.registration is not None:
            self.registration.set_read_only(read_only)
            metrics.SERVER_STATUS.set(0 if read_only else 1)

    @property
    def _ledger_dirs(self) -> list[Path]:
        return list(self.bookie.ledger_dirs.dirs)

    async def set_read_only_by_hand(self, read_only: bool) -> None:
        """An operator's read-only choice (cleared: only that cause goes); kept across restarts
        with persistBookieStatusEnabled. Returns once the registration is where it belongs, or
        after REGISTRATION_MOVE_WAIT_S (the move goes on in the background)."""
        self.state.set_cause(READ_ONLY_BY_HAND, read_only)
        if self.config.persist_bookie_status_enabled:
            await asyncio.get_running_loop().run_in_executor(None, write_status, self._ledger_dirs, read_only)
        if self.registration is not None:
            try:
                await asyncio.wait_for(self.registration.settled(), REGISTRATION_MOVE_WAIT_S)
            except TimeoutError:
                log.warning("the registration has not moved within %.0fs; it goes on trying", REGISTRATION_MOVE_WAIT_S)

    @property
    def stopping(self) -> bool:
        """Stopping or stopped, or asked to shut itself down."""
        return self._stopped or (self._stop_event is not None and self._stop_event.is_set())

    async def stop(self) -> None:
        """Finish what was accepted, then leave: see the module docstring for the order."""
        if self._stopped:
            return
        self._stopped = True
        self.serving = False
        metrics.SERVER_STATUS.set(0)
        if self.autorecovery is not None:  # first: it is a client of this bookie and of the store
            await self.autorecovery.stop()
        self.listener.stop_accepting()
        for connection in list(self.listener.connections):
            if isinstance(connection, BookieServerConnection):
                connection.stop_reading()
        await self.disk_monitor.close()
        await self.load.close()
        # Reads already queued run against the still-open storage and are answered; a fencing
        # read still waiting for its journal record is then refused with ServiceNotReady.
        await asyncio.to_thread(self.read_pool.close)
        await self.bookie.close()
        await self.listener.close()
        await self.http_api.close()
        await self.http.close()
        # The metadata store may be down: leave anyway (the session then expires on its own).
        try:
            if self.registration is not None:
                await asyncio.wait_for(self.registration.unregister(), METADATA_CLOSE_TIMEOUT_S)
            if self.store is not None and self._owns_store:
                await asyncio.wait_for(self.store.close(), METADATA_CLOSE_TIMEOUT_S)
        except TimeoutError:
            log.warning(
                "the metadata store did not answer within %.0fs; the registration will expire with the session",
                METADATA_CLOSE_TIMEOUT_S,
            )
        self._locks.release()
        log.info("bookie %s stopped", self.bookie_id)

    def _disk_pressure(self) -> DiskPressure:
        """For compaction: a dir above diskUsageWarnThreshold is almost full, a full dir full."""
        monitor = self.disk_monitor
        full = bool(monitor.full_dirs)
        almost_full = full or any(usage.used_fraction > monitor.thresholds.warn for usage in monitor.usages)
        return DiskPressure(almost_full=almost_full, full=full)


def _advertised_host(bound_host: str) -> str:
    """The host part of the bookie id when bound to a wildcard address: this host's name."""
    if bound_host in _WILDCARD_ADDRESSES:
        return socket.gethostname()
    return bound_host
