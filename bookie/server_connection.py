"""The bookie side of the broker ↔ bookie protocol: :class:`BookieServerConnection`, the
request handler of one peer's connection (BookKeeper's ``BookieRequestHandler`` and
``BookieRequestProcessor`` for one channel).

ADD_ENTRY is handled in the read path, in its own branch of the dispatch (no handler lookup,
its checks inline): the adds of one read are collected and, once the read
is dispatched (or before any other command, to keep request order), admitted together
(:meth:`BookieImpl.try_add`: one fence check per ledger, one write-cache reservation, one
journal hand-over). The connection is the adds' journal sink
(:meth:`BookieServerConnection.requests_done`, once per run of adds from one read, answered
with one buffer of pre-laid-out frames): no task, closure or future per add — at ~100k
adds/s every per-add Python call counts. Reads and fencing run as tasks: they wait for the
disk or for a durable fence record.

Invariants:
- requests are answered in the order their effects apply: a command behind adds sees them
  admitted (a fencing read sees every add that can still be acknowledged);
- adds that find no room wait, in order, in one task, and the socket is not read until all
  of them are admitted (TCP back-pressure, not unbounded buffering); one that found no
  write-cache room within ``dbStorage_maxThrottleTimeMs`` of its arrival is refused with
  TooManyRequests (BookKeeper's rejected write);
- with the lab fault ``minipulsarAddErrorAboveAddsPerSecond`` (off by default) adds beyond that
  rate are refused with TooManyRequests on arrival, recovery adds excepted (:mod:`bookie.add_fault`);
- while the bookie is read-only (:mod:`bookie.state_manager`) adds are refused with
  BookieReadOnly before they reach the journal, the waiting ones too — except recovery
  adds, which ledger recovery needs — and reads are served as usual;
- with ``maxReadsInProgressLimit`` (off by default, as in BookKeeper) at most that many reads
  are in progress in the bookie, from arrival to answer: a read that finds none free is
  blocked — counted, never refused — and its connection is not read until its blocked reads
  got their permits (:mod:`bookie.read_permits`);
- memory per connection is bounded whatever the peer does: at most
  :data:`READS_IN_FLIGHT_MAX` reads run at once, and none starts while the transport holds
  more unsent bytes than its high-water mark; the next ones wait their turn, in order, their
  fencing applied, already admitted to the read thread pool (whose bound,
  maxPendingReadRequestsPerThread, answers TooManyRequests on arrival: :mod:`bookie.read_pool`);
  the socket is not read while the responses are not taken, nor while more than
  :data:`READS_WAITING_MAX` reads wait;
- with ``waitTimeoutOnResponseBackpressureMs`` (off by default, as in BookKeeper) a peer that
  has not taken its responses for that long gets no read answered until it takes them again
  (its waiting reads give their places back; adds and the small READ_LAC and BOOKIE_INFO
  answers are still sent), or, with ``closeChannelOnResponseTimeout``, is closed; either way
  the keep-alive closes a peer whose socket stayed paused for two intervals;
- requests with out-of-range numbers are refused with InvalidCommand (the schema checked the
  types); BOOKIE_INFO answers from memory (:mod:`bookie.load`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Any

from minipulsar.bookie import metrics
from minipulsar.bookie.add_fault import AddRateFault
from minipulsar.bookie.bookie_impl import BookieImpl
from minipulsar.bookie.journal.format import INT64_MAX
from minipulsar.bookie.load import BookieLoad
from minipulsar.bookie.read_permits import ReadPermits
from minipulsar.bookie.state_manager import BookieStateManager
from minipulsar.errors import ConnectionClosedError, InvalidCommandError, MiniPulsarError, TooManyRequestsError
from minipulsar.net.server import ServerConnection, handles
from minipulsar.protocol.codec import encode_add_entry_responses
from minipulsar.protocol.commands import (
    AddEntry,
    BookieInfo,
    BookieInfoResponse,
    ReadEntry,
    ReadEntryResponse,
    ReadLac,
    ReadLacResponse,
)
from minipulsar.protocol.schema import Command
from minipulsar.supervision import spawn

log = logging.getLogger(__name__)

_ADD_OK, _ADD_FAILED = metrics.ADD_ENTRY_REQUEST_OK, metrics.ADD_ENTRY_REQUEST_FAILED

RESPONSE_OVERHEAD_BYTES = 1024
"""Room kept in a READ_ENTRY_RESPONSE frame for everything but the payloads."""
READ_COUNT_MAX = 10_000
"""Entries asked for in one READ_ENTRY beyond this are not read (the response says how many came)."""
READS_IN_FLIGHT_MAX = 64
"""READ_ENTRY requests of one connection read at once (their answers are what a peer that
does not read can leave in memory); the next ones wait their turn."""
READS_WAITING_MAX = 1024
"""Reads of one connection waiting for their turn beyond which its socket is not read
(BookKeeper's ``maxReadsInProgressLimit`` idea, per connection)."""
_ADDS_WAITING, _READS_WAITING, _UNSENT = "adds waiting for room", "reads waiting", "responses not taken"
_READS_BLOCKED = "maxReadsInProgressLimit"
_STOPPING = "the bookie is stopping"


class ResponsesNotTaken(Exception):
    """A read given up because its peer does not take its responses (never sent to the peer)."""


class BookieServerConnection(ServerConnection):
    """The bookie end of one client connection (a broker's): decodes its requests, admits
    adds to the journal and reads to the read pool, and answers each (BookKeeper's
    ``BookieRequestHandler`` and ``BookieRequestProcessor`` for one channel)."""

    SERVER_VERSION = "minipulsar-bookie"
    receive_pipeline_bytes = 1024 * 1024
    """Adds of tens of KiB arrive back to back from a few broker connections: read them 1 MiB
    at a time (a few such connections per bookie)."""

    def __init__(
        self,
        bookie: BookieImpl,
        bookie_id: str,
        *,
        state: BookieStateManager,
        load: BookieLoad,
        read_permits: ReadPermits,
        add_fault: AddRateFault | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_frame_size=bookie.config.max_frame_size, **kwargs)
        self.bookie = bookie
        self.bookie_id = bookie_id
        self.state = state
        self.load = load
        self._read_permits = read_permits
        self._add_fault = add_fault
        """The bookie's lab fault (shared by every connection); None: off."""
        """The bookie's maxReadsInProgressLimit permits, shared by every connection."""
        self._reads_blocked = 0
        """Reads of this connection waiting for a permit: the socket is not read while any do."""
        self._adds: list[AddEntry] = []
        """The adds of the read being dispatched (see :meth:`commands_received`)."""
        self._waiting: collections.deque[tuple[AddEntry, float]] = collections.deque()
        """Adds that found no room, with their arrival time, admitted in order by ``_admitting``."""
        self._admitting: asyncio.Task[None] | None = None
        self._payload_max = bookie.config.max_frame_size - RESPONSE_OVERHEAD_BYTES
        self._reads_running = 0
        """Reads that had their turn and are not answered yet."""
        self._read_turns: collections.deque[asyncio.Future[None]] = collections.deque()
        """Reads waiting for their turn (see the module docstring), in arrival order."""
        self._paused_for: set[str] = set()
        """Why the socket is not read now (any reason pauses it)."""
        self._response_timer: asyncio.TimerHandle | None = None
        """Fires waitTimeoutOnResponseBackpressureMs after the transport stopped taking bytes."""
        self._dropping_reads = False
        """The response timeout fired and the peer has not taken its responses since."""

    def _pause_reading(self, reason: str) -> None:
        if not self._paused_for and self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
        self._paused_for.add(reason)

    def _resume_reading(self, reason: str) -> None:
        if reason not in self._paused_for:
            return
        self._paused_for.discard(reason)
        if not self._paused_for and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def stop_reading(self) -> None:
        """The bookie is stopping: read no more requests (what was read is still answered)."""
        self._pause_reading(_STOPPING)

    def pause_writing(self) -> None:
        super().pause_writing()
        self._pause_reading(_UNSENT)
        timeout_ms = self.bookie.config.wait_timeout_on_response_backpressure_ms
        if timeout_ms >= 0 and self._response_timer is None:
            self._response_timer = self._loop.call_later(timeout_ms / 1000, self._responses_timed_out)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._response_timer is not None:
            self._response_timer.cancel()
            self._response_timer = None
        if self._dropping_reads:
            self._dropping_reads = False
            log.info("%s: takes its responses again; its reads are answered again", self.peer)
        self._resume_reading(_UNSENT)
        self._grant_read_turns()

    def _responses_timed_out(self) -> None:
        self._response_timer = None
        timeout_ms = self.bookie.config.wait_timeout_on_response_backpressure_ms
        if self.bookie.config.close_channel_on_response_timeout:
            log.warning(
                "%s: has not taken its responses for %d ms (waitTimeoutOnResponseBackpressureMs); "
                "closing it (closeChannelOnResponseTimeout)",
                self.peer,
                timeout_ms,
            )
            self.abort(ConnectionClosedError(f"{self.peer} did not take its responses for {timeout_ms} ms"))
            return
        self._dropping_reads = True
        dropped = 0
        while self._read_turns:
            turn = self._read_turns.popleft()
            if not turn.done():
                turn.set_exception(ResponsesNotTaken(f"{self.peer} did not take its responses for {timeout_ms} ms"))
                dropped += 1
        log.warning(
            "%s: has not taken its responses for %d ms (waitTimeoutOnResponseBackpressureMs); "
            "dropped its %d waiting reads, and answers none until it takes them",
            self.peer,
            timeout_ms,
            dropped,
        )
        self._resume_reading(_READS_WAITING)

    def closed(self, reason: MiniPulsarError) -> None:
        super().closed(reason)
        if self._response_timer is not None:
            self._response_timer.cancel()
            self._response_timer = None

    # -- ADD_ENTRY ------------------------------------------------------------------------------

    def _dispatch(self, command: Command) -> None:
        """ADD_ENTRY takes this short cut (an add is no response, no PING: no lookup, no
        handler); every other command goes through :class:`Connection`'s dispatch."""
        if command.__class__ is AddEntry and self.handshake_done:
            # The checks of every add, inline: one Python frame per add fewer.
            if len(command.payload) <= self._payload_max and (
                0 <= command.ledger_id <= INT64_MAX
                and 0 <= command.entry_id <= INT64_MAX
                and -1 <= command.lac <= INT64_MAX
            ):
                self._adds.append(command)  # admitted with the read's other adds: commands_received
            else:
                self._add_refused(command)
            return
        super()._dispatch(command)

    def command_received(self, command: Command) -> None:
        """Every command but ADD_ENTRY (see :meth:`_dispatch`; before the handshake the base
        class answers it): to its ``@handles`` method, after the adds received before it
        were admitted."""
        if command.__class__ is AddEntry and self.handshake_done:  # not through _dispatch
            self._dispatch(command)
            return
        if self._adds:  # in request order: e.g. a fencing read behind adds sees them admitted
            self._admit_adds()
        super().command_received(command)

    def commands_received(self) -> None:
        if self._adds:
            self._admit_adds()

    def _add_refused(self, cmd: AddEntry) -> None:
        """Answer an add whose payload or numbers are out of range with InvalidCommand."""
        if len(cmd.payload) > self._payload_max:
            # The frame fit, but the READ_ENTRY_RESPONSE carrying it back would not: refused
            # now rather than acknowledged and then unreadable by every peer.
            self.reply_error(
                cmd,
                InvalidCommandError(
                    f"ADD_ENTRY payload of {len(cmd.payload)} bytes is above the largest entry this bookie can "
                    f"send back ({self._payload_max} bytes: maxFrameSize less {RESPONSE_OVERHEAD_BYTES})"
                ),
            )
            return
        try:
            _check_id("ledger_id", cmd.ledger_id, 0)  # one of them raises, naming the field
            _check_id("entry_id", cmd.entry_id, 0)
            _check_id("lac", cmd.lac, -1)
        except InvalidCommandError as error:
            self.reply_error(cmd, error)

    def _admit_adds(self) -> None:
        adds, self._adds = self._adds, []
        started = self._last_received  # when the read that brought these requests was handled
        metrics.TOTALS.adds_in_progress += len(adds)
        if self.state.read_only:
            refused = [cmd for cmd in adds if not cmd.recovery]
            if refused:
                self.requests_done(refused, started, self.state.refusal(self.bookie_id))
                adds = [cmd for cmd in adds if cmd.recovery]
        if self._add_fault is not None and adds:
            adds = self._refuse_above_rate(adds, started)
        if not adds:
            return
        if not self._waiting:
            admitted = self.bookie.try_add(adds, self, started)
            if admitted == len(adds):
                return
            adds = adds[admitted:]
        # No room for these now: they wait, behind any that already wait, and the connection
        # stops reading until all are admitted (TCP back-pressure, not unbounded buffering).
        self._waiting.extend((cmd, started) for cmd in adds)
        if self._admitting is None:
            self._pause_reading(_ADDS_WAITING)
            task = self._admitting = spawn(self._admit_waiting(), name=f"{self.peer}: adds waiting", logger=log)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _refuse_above_rate(self, adds: list[AddEntry], started: float) -> list[AddEntry]:
        """The lab fault: answer the adds beyond its rate with TooManyRequests; returns the rest."""
        assert self._add_fault is not None
        normal = [cmd for cmd in adds if not cmd.recovery]
        admitted = self._add_fault.admit(len(normal))
        if admitted == len(normal):
            return adds
        refused = normal[admitted:]
        limit = self._add_fault.limit_per_s
        self.requests_done(refused, started, TooManyRequestsError(f"lab fault: above {limit:g} adds/s"))
        kept = {id(cmd) for cmd in refused}
        return [cmd for cmd in adds if id(cmd) not in kept]

    async def _admit_waiting(self) -> None:
        """Admit the waiting adds one by one, in order, each as soon as there is room."""
        waiting, state = self._waiting, self.state
        try:
            while waiting:
                cmd, started = waiting[0]
                try:
                    if state.read_only and not cmd.recovery:  # turned read-only while it waited
                        raise state.refusal(self.bookie_id)
                    await self.bookie.add_when_admitted(cmd, self, started)
                except MiniPulsarError as error:  # TooManyRequests, BookieReadOnly, LedgerFenced, ...
                    self.requests_done([cmd], started, error)
                waiting.popleft()
        finally:
            # Cancelled (the connection closed while adds waited): nobody to answer them.
            metrics.TOTALS.adds_in_progress -= len(waiting)
            waiting.clear()
            self._admitting = None
            self._resume_reading(_ADDS_WAITING)

    def requests_done(self, cmds: list[AddEntry], started: float, error: BaseException | None) -> None:
        """The outcome of adds that arrived together (the journal's sink callback): answer them
        — all successes in one joined buffer — and count their latency."""
        metrics.TOTALS.adds_in_progress -= len(cmds)
        latency_s = time.monotonic() - started
        if error is None:
            _ADD_OK.record(latency_s, len(cmds))
            self.send_frame(encode_add_entry_responses(cmds))
            return
        _ADD_FAILED.record(latency_s, len(cmds))
        for cmd in cmds:
            self.reply_error(cmd, error)

    # -- READ_ENTRY / READ_LAC ------------------------------------------------------------------

    @handles(ReadEntry)
    def read_entry(self, cmd: ReadEntry) -> Any:
        _check_id("ledger_id", cmd.ledger_id, 0)
        _check_id("first_entry_id", cmd.first_entry_id, 0)
        if cmd.count < 1 or cmd.max_bytes < 0:
            raise InvalidCommandError(
                f"READ_ENTRY: count must be >= 1 and max_bytes >= 0, got count={cmd.count} max_bytes={cmd.max_bytes}"
            )
        # Fence here, in the read path: commands behind this one on the connection see it.
        fenced = self.bookie.fence(cmd.ledger_id, cmd.master_key) if cmd.fence else None
        return self._read_entry(cmd, fenced, self._read_turn())

    def _may_run_read(self) -> bool:
        return self._reads_running < READS_IN_FLIGHT_MAX and not (self.writer is not None and self.writer.paused)

    def _read_turn(self) -> asyncio.Future[None] | None:
        """None: the read may run now (counted as running); else the future of its turn, which
        fails with :class:`ResponsesNotTaken` if the read is dropped."""
        if not self._read_turns and self._may_run_read():
            self._reads_running += 1
            return None
        turn: asyncio.Future[None] = self._loop.create_future()
        self._read_turns.append(turn)
        if len(self._read_turns) > READS_WAITING_MAX:
            self._pause_reading(_READS_WAITING)
        return turn

    def _grant_read_turns(self) -> None:
        turns = self._read_turns
        while turns and (turns[0].done() or self._may_run_read()):
            turn = turns.popleft()
            if not turn.done():  # else given up: refused by the read pool, dropped, or the connection closed
                self._reads_running += 1
                turn.set_result(None)
        if len(turns) <= READS_WAITING_MAX // 2:
            self._resume_reading(_READS_WAITING)

    async def _read_entry(
        self,
        cmd: ReadEntry,
        fenced: asyncio.Future | None,
        turn: asyncio.Future[None] | None,
    ) -> None:
        """One read; ``turn``: see :meth:`_read_turn` (the read pool runs it once it is done).

        Its read permit (maxReadsInProgressLimit) is taken first thing, inside the ``try``
        whose ``finally`` gives it back: a task cancelled before its first step takes none.
        Reads start in arrival order, so they take permits in that order."""
        started = time.monotonic()
        metrics.TOTALS.reads_in_progress += 1
        success = False
        permit: asyncio.Future[None] | None = None
        acquired = False
        try:
            permit = self._read_permits.acquire()
            acquired = True
            if permit is not None:
                await self._read_unblocked(permit, started)
            if fenced is not None:
                await fenced
            frame_budget = self.bookie.config.max_frame_size - RESPONSE_OVERHEAD_BYTES
            max_bytes = min(cmd.max_bytes, frame_budget) if cmd.max_bytes else frame_budget
            entries = await self.bookie.read_entries(
                cmd.ledger_id, cmd.first_entry_id, min(cmd.count, READ_COUNT_MAX), max_bytes, ready=turn
            )
            if self._dropping_reads:
                raise ResponsesNotTaken(f"{self.peer} does not take its responses")
            lac = self.bookie.ledger(cmd.ledger_id).lac
            self.send(
                ReadEntryResponse(id=cmd.id, ledger_id=cmd.ledger_id, entries=[[e, p] for e, p in entries], lac=lac)
            )
            success = True
        except ResponsesNotTaken:
            metrics.CHANNEL_WRITE_FAILED.observe((time.monotonic() - started) * 1000)
        except MiniPulsarError:
            if not self._dropping_reads:
                raise  # answered with an ERROR
            metrics.CHANNEL_WRITE_FAILED.observe((time.monotonic() - started) * 1000)
        finally:
            if acquired and (permit is None or _granted(permit)):
                self._read_permits.release()
            metrics.TOTALS.reads_in_progress -= 1
            latency = metrics.READ_ENTRY_REQUEST_OK if success else metrics.READ_ENTRY_REQUEST_FAILED
            latency.observe((time.monotonic() - started) * 1000)
            if turn is None or _granted(turn):
                self._reads_running -= 1
            else:
                turn.cancel()
            self._grant_read_turns()

    async def _read_unblocked(self, permit: asyncio.Future[None], blocked_s: float) -> None:
        """A blocked read (READ_ENTRY_BLOCKED): the socket is not read until none of this
        connection's reads waits for a permit; count the wait (READ_ENTRY_BLOCKED_WAIT)."""
        metrics.READ_ENTRY_BLOCKED.inc()
        self._reads_blocked += 1
        self._pause_reading(_READS_BLOCKED)
        try:
            await permit
        finally:
            waited_ms = (time.monotonic() - blocked_s) * 1000
            wait = metrics.READ_ENTRY_BLOCKED_WAIT_OK if _granted(permit) else metrics.READ_ENTRY_BLOCKED_WAIT_FAILED
            wait.observe(waited_ms)
            self._reads_blocked -= 1
            if self._reads_blocked == 0:
                self._resume_reading(_READS_BLOCKED)

    @handles(ReadLac)
    def read_lac(self, cmd: ReadLac) -> Any:
        _check_id("ledger_id", cmd.ledger_id, 0)
        if not cmd.fence:
            state = self.bookie.ledger(cmd.ledger_id)
            self.send(
                ReadLacResponse(id=cmd.id, ledger_id=cmd.ledger_id, lac=state.lac, last_entry_id=state.last_entry_id)
            )
            return None
        return self._fence_and_read_lac(cmd, self.bookie.fence(cmd.ledger_id, cmd.master_key))

    async def _fence_and_read_lac(self, cmd: ReadLac, fenced: asyncio.Future) -> None:
        state = await fenced
        self.send(ReadLacResponse(id=cmd.id, ledger_id=cmd.ledger_id, lac=state.lac, last_entry_id=state.last_entry_id))

    # -- BOOKIE_INFO ----------------------------------------------------------------------------

    @handles(BookieInfo)
    def bookie_info(self, cmd: BookieInfo) -> None:
        free, total = self.load.disk_space()
        self.send(
            BookieInfoResponse(
                id=cmd.id,
                free_disk_bytes=free,
                total_disk_bytes=total,
                info={"bookieId": self.bookie_id, **self.bookie.info(), **self.load.report()},
            )
        )


def _granted(turn: asyncio.Future[None]) -> bool:
    """The read's turn came (it was counted as running), rather than being given up."""
    return turn.done() and not turn.cancelled() and turn.exception() is None


def _check_id(name: str, value: int, minimum: int) -> None:
    if not minimum <= value <= INT64_MAX:
        raise InvalidCommandError(f"{name} must be in [{minimum}, 2^63-1], got {value}")
