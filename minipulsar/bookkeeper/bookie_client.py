"""Connections from the broker to bookies: one per bookie, opened on first use, reopened
after a failure. Requests return futures; nothing here retries — the ledger handle decides
what a failure means (fail the add, try another replica).

Invariants:

- at most one connection per bookie is open or opening;
- every request's future completes: with the answer, or with the error that ended it.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from minipulsar.bookkeeper.metrics import BOOKIE_PENDING_REQUESTS
from minipulsar.errors import ConnectionClosedError, MiniPulsarError, PersistenceError
from minipulsar.net import Connection, connect, parse_address
from minipulsar.net.rpc import ResponseCallback
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.codec import encode_add_entry
from minipulsar.protocol.schema import Command

log = logging.getLogger(__name__)


class PerChannelBookieClient(Connection):
    """The broker end of one connection to one bookie (BookKeeper's ``PerChannelBookieClient``):
    requests go out, only responses are expected back."""

    def command_received(self, command: Command) -> None:
        if command.RESPONSE:  # the answer to a request that already timed out
            log.debug("%s: late %s from bookie", self.peer, command.TYPE)
        else:
            log.warning("%s: unexpected %s from bookie", self.peer, command.TYPE)


class BookieClient:
    """Requests to bookies by bookie id (``host:port``)."""

    def __init__(self, *, timeout_s: float, max_frame_size: int, keepalive_interval_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self._max_frame_size = max_frame_size
        self._keepalive_interval_s = keepalive_interval_s
        self._connections: dict[str, PerChannelBookieClient] = {}
        self._connecting: dict[str, asyncio.Future[PerChannelBookieClient]] = {}
        self._closed = False

    def add_entry(
        self,
        bookie: str,
        ledger_id: int,
        entry_id: int,
        lac: int,
        payload: bytes,
        recovery: bool = False,
        *,
        master_key: bytes,
    ) -> asyncio.Future:
        """Store ``payload`` (the wrapped entry: :meth:`DigestManager.package`) on ``bookie``."""
        return self._request(
            bookie,
            cmd.AddEntry,
            ledger_id=ledger_id,
            entry_id=entry_id,
            lac=lac,
            payload=payload,
            recovery=recovery,
            master_key=master_key,
        )

    def add_entry_then(
        self,
        bookie: str,
        ledger_id: int,
        entry_id: int,
        lac: int,
        head: bytes,
        payload: bytes,
        callback: ResponseCallback,
        *,
        master_key: bytes,
    ) -> None:
        """Store the wrapped entry ``head + payload`` on ``bookie`` and call ``callback(response,
        error)`` once (the ledger handle's hot path): the payload goes to the socket as it is,
        after a header packed in one go (:func:`~minipulsar.protocol.codec.encode_add_entry`),
        and the answer reaches ``callback`` without a future."""
        connection = self._connections.get(bookie)
        if connection is None or not connection.is_open:
            self.add_entry(bookie, ledger_id, entry_id, lac, head + payload, master_key=master_key).add_done_callback(
                partial(_answer_callback, callback)
            )
            return
        rid = connection.new_request_id()
        prefix = encode_add_entry(rid, ledger_id, entry_id, lac, False, master_key, head, payload)
        connection.request_frame(rid, prefix, payload, "ADD_ENTRY", callback)

    def read_entries(
        self, bookie: str, ledger_id: int, first_entry_id: int, count: int, max_bytes: int = 0
    ) -> asyncio.Future:
        return self._request(
            bookie, cmd.ReadEntry, ledger_id=ledger_id, first_entry_id=first_entry_id, count=count, max_bytes=max_bytes
        )

    def read_lac(self, bookie: str, ledger_id: int, fence: bool = False, master_key: bytes = b"") -> asyncio.Future:
        """The bookie's LAC of the ledger; ``fence`` (with the ledger's ``master_key``) fences it first."""
        return self._request(bookie, cmd.ReadLac, ledger_id=ledger_id, fence=fence, master_key=master_key)

    def bookie_info(self, bookie: str) -> asyncio.Future:
        return self._request(bookie, cmd.BookieInfo)

    def outstanding(self, bookie: str) -> int:
        """Requests to ``bookie`` awaiting an answer (its request queue, as this broker sees it)."""
        connection = self._connections.get(bookie)
        return connection.pending_requests if connection is not None else 0

    def _request(self, bookie: str, cls: type[Command], **fields) -> asyncio.Future:
        connection = self._connections.get(bookie)
        if connection is not None and connection.is_open:
            return connection.request(cls, timeout_s=self.timeout_s, **fields)
        return asyncio.ensure_future(self._request_after_connect(bookie, cls, fields))

    async def _request_after_connect(self, bookie: str, cls: type[Command], fields: dict) -> Command:
        connection = await self._connection(bookie)
        return await connection.request(cls, timeout_s=self.timeout_s, **fields)

    async def _connection(self, bookie: str) -> PerChannelBookieClient:
        if self._closed:
            raise ConnectionClosedError("the bookie client is closed")
        connection = self._connections.get(bookie)
        if connection is not None and connection.is_open:
            return connection
        pending = self._connecting.get(bookie)
        if pending is None:
            pending = asyncio.ensure_future(self._open(bookie))
            self._connecting[bookie] = pending
            pending.add_done_callback(lambda done: self._connect_done(bookie, done))
        return await asyncio.shield(pending)

    def _connect_done(self, bookie: str, done: asyncio.Future[PerChannelBookieClient]) -> None:
        """Forget the attempt. Its failure was logged by :meth:`_open` and raised to every
        waiter; a connect whose waiters were all cancelled (shielded, it runs on) has nobody
        to raise it to, so it is retrieved here rather than reported as never retrieved."""
        self._connecting.pop(bookie, None)
        if not done.cancelled():
            done.exception()

    async def _open(self, bookie: str) -> PerChannelBookieClient:
        host, port = parse_address(bookie, 3181)

        def factory() -> PerChannelBookieClient:
            return PerChannelBookieClient(
                max_frame_size=self._max_frame_size,
                keepalive_interval_s=self._keepalive_interval_s,
                request_timeout_s=self.timeout_s,
            )

        try:
            connection = await connect(factory, host, port, role="broker", timeout_s=self.timeout_s)
        except MiniPulsarError as error:
            log.warning("cannot connect to bookie %s: %s", bookie, error)
            raise
        self._connections[bookie] = connection
        BOOKIE_PENDING_REQUESTS.labels(bookie).set_function(lambda: self.outstanding(bookie))
        return connection

    async def close(self) -> None:
        self._closed = True
        for connection in self._connections.values():
            connection.close()
        await asyncio.gather(*(c.wait_closed() for c in self._connections.values()), return_exceptions=True)
        self._connections.clear()


def _answer_callback(callback: ResponseCallback, request: asyncio.Future) -> None:
    """A request's future, handed to a :data:`ResponseCallback` (a cancelled one gives neither)."""
    if request.cancelled():
        callback(None, None)
        return
    error = request.exception()
    if error is None:
        callback(request.result(), None)
    else:
        callback(None, error if isinstance(error, MiniPulsarError) else PersistenceError(repr(error)))
