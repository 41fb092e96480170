"""Gathering the cluster for the console: the metadata store, every broker's per-broker REST, every bookie.

One gathering reads who is there from the metadata store (the registered brokers and their web
service URLs, the leader, the bookies with a cookie or a registration), then at once and
concurrently asks every broker — this one included, by the same path — for its
``broker-stats/load-report``, ``broker-stats/topics``, ``ownedNamespaces`` and
``broker-stats/bookies``, and every registered bookie for its load report (BOOKIE_INFO). The
results become the document of :func:`broker.console.view.console_view`.

Invariants:

- bounded time: every step has its deadline (:data:`METADATA_TIMEOUT_S`,
  :data:`BROKER_TIMEOUT_S`, :data:`BOOKIE_TIMEOUT_S`); a broker or bookie that does not answer
  in time, refuses, or answers something other than a 200 with JSON of at most
  :data:`ANSWER_BYTES_MAX` is shown with the reason, and the page is answered anyway;
- bounded work: concurrent requests share one gathering in flight, and a gathering younger than
  :data:`MIN_AGE_S` is answered again (:class:`SnapshotCache`), however many pages are open;
  redirects are not followed (a broker answers for itself or not at all);
- a bookie is contacted only while registered (see :mod:`broker.admin_bookies`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import aiohttp

from minipulsar.bookkeeper.bookie_registry import BookieSet
from minipulsar.broker.console.view import BookieAnswer, BrokerAnswers, ClusterFacts, console_view
from minipulsar.broker.namespace.directory import BrokerInfo
from minipulsar.errors import MiniPulsarError

METADATA_TIMEOUT_S = 2.0
BROKER_TIMEOUT_S = 2.0
"""Per request to a broker: its answers are built from memory, so 2 s means it is not answering."""
BOOKIE_TIMEOUT_S = 2.0
ANSWER_BYTES_MAX = 8 * 1024 * 1024
"""A broker's ``broker-stats/topics`` with ten thousand topics is a few MB."""
MIN_AGE_S = 1.0
"""Pages refresh every few seconds; more than one gathering a second is waste."""
TOPICS_MAX = 200
"""Topics in one document: the busiest; an operator filters in the page."""


class Brokers(Protocol):
    """Where the brokers are (:class:`~broker.namespace.directory.BrokerDirectory`)."""

    async def broker_ids(self) -> list[str]: ...

    async def broker(self, broker_id: str) -> BrokerInfo | None: ...

    async def leader(self) -> BrokerInfo | None: ...


class Bookies(Protocol):
    """The bookies (:class:`~broker.admin_bookies.ClusterBookies`)."""

    async def registered(self) -> BookieSet: ...

    async def all_bookies(self) -> list[str]: ...

    async def info(self, bookie: str, timeout_s: float) -> dict[str, Any]: ...


class AnswerError(MiniPulsarError):
    """A broker's endpoint gave no usable answer; the message says why."""

    retriable = True


class BrokerRest:
    """GETs of other brokers' JSON endpoints: one aiohttp session, opened on first use."""

    def __init__(self, timeout_s: float = BROKER_TIMEOUT_S) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def get_json(self, url: str) -> Any:
        """The JSON answer of ``GET url``.

        Raises:
            AnswerError: unreachable, too slow, not a 200, too large, or not JSON.
        """
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        try:
            async with self._session.get(url, allow_redirects=False) as response:
                body = await response.content.read(ANSWER_BYTES_MAX + 1)
                if response.status != 200:
                    raise AnswerError(f"HTTP {response.status}")
        except TimeoutError as error:
            raise AnswerError(f"no answer within {self._timeout.total:g} s") from error
        except aiohttp.ClientError as error:
            raise AnswerError(str(error) or type(error).__name__) from error
        if len(body) > ANSWER_BYTES_MAX:
            raise AnswerError(f"answer larger than {ANSWER_BYTES_MAX} bytes")
        try:
            return json.loads(body)
        except (ValueError, RecursionError) as error:
            raise AnswerError("answer is not JSON") from error

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class ClusterGatherer:
    """One gathering (module docstring) per :meth:`gather` call."""

    def __init__(
        self,
        cluster: str,
        broker_id: str,
        brokers: Brokers,
        bookies: Bookies,
        rest: BrokerRest,
        topics_max: int = TOPICS_MAX,
    ) -> None:
        self._cluster = cluster
        self._me = broker_id
        self._brokers = brokers
        self._bookies = bookies
        self._rest = rest
        self._topics_max = topics_max

    async def gather(self) -> dict[str, Any]:
        started_ms = int(time.time() * 1000)
        try:
            brokers, leader, all_bookies, registered = await asyncio.wait_for(self._membership(), METADATA_TIMEOUT_S)
        except (MiniPulsarError, TimeoutError) as error:
            reason = str(error) or f"no answer within {METADATA_TIMEOUT_S:g} s"
            facts = ClusterFacts(self._cluster, self._me, started_ms, errors=(f"metadata store: {reason}",))
            return console_view(facts, self._topics_max)
        broker_answers, bookie_answers = await asyncio.gather(
            asyncio.gather(*(self._ask_broker(b, info) for b, info in brokers)),
            asyncio.gather(*(self._ask_bookie(b, registered) for b in all_bookies)),
        )
        facts = ClusterFacts(
            self._cluster, self._me, started_ms, leader=leader, brokers=broker_answers, bookies=bookie_answers
        )
        return console_view(facts, self._topics_max)

    async def _membership(self) -> tuple[list[tuple[str, BrokerInfo | None]], str | None, list[str], BookieSet]:
        ids = await self._brokers.broker_ids()
        infos = await asyncio.gather(*(self._brokers.broker(b) for b in ids))
        leader = await self._brokers.leader()
        all_bookies = await self._bookies.all_bookies()
        registered = await self._bookies.registered()
        return list(zip(ids, infos)), None if leader is None else leader.broker_id, all_bookies, registered

    async def _ask_broker(self, broker_id: str, info: BrokerInfo | None) -> BrokerAnswers:
        if info is None:
            return BrokerAnswers(broker_id, None, errors=("registration unreadable: no web service URL",))
        base = info.web_service_url.rstrip("/")
        paths = (
            "/admin/v2/broker-stats/load-report",
            f"/admin/v2/brokers/{self._cluster}/{broker_id}/ownedNamespaces",
            "/admin/v2/broker-stats/topics",
            "/admin/v2/broker-stats/bookies",
        )
        results = await asyncio.gather(*(self._rest.get_json(base + p) for p in paths), return_exceptions=True)
        answers: list[Any] = []
        errors: list[str] = []
        for path, result in zip(paths, results):
            if isinstance(result, AnswerError):
                errors.append(f"{path}: {result}")
                answers.append(None)
            elif isinstance(result, BaseException):
                raise result  # a bug: not ours to hide
            else:
                answers.append(result)
        load_report, owned_namespaces, topics, bookies = answers
        return BrokerAnswers(
            broker_id, info.web_service_url, load_report, owned_namespaces, topics, bookies, errors=tuple(errors)
        )

    async def _ask_bookie(self, bookie: str, registered: BookieSet) -> BookieAnswer:
        if bookie in registered.read_only:
            state = "readonly"
        elif bookie in registered.writable:
            state = "writable"
        else:
            return BookieAnswer(bookie, "down", error="not registered")
        try:
            return BookieAnswer(bookie, state, info=await self._bookies.info(bookie, BOOKIE_TIMEOUT_S))
        except MiniPulsarError as error:
            return BookieAnswer(bookie, state, error=str(error))


class SnapshotCache:
    """Shares one gathering between concurrent requests, and answers one younger than ``min_age_s`` again.

    Invariant: at most one gathering runs at a time; a request that finds one in flight waits
    for it (shielded: a client that goes away does not cancel it for the others).
    """

    def __init__(
        self,
        gather: Callable[[], Awaitable[dict[str, Any]]],
        min_age_s: float = MIN_AGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._gather = gather
        self._min_age_s = min_age_s
        self._clock = clock
        self._last: tuple[float, dict[str, Any]] | None = None
        self._in_flight: asyncio.Future[dict[str, Any]] | None = None

    async def get(self) -> dict[str, Any]:
        if self._last is not None and self._clock() - self._last[0] < self._min_age_s:
            return self._last[1]
        if self._in_flight is None:
            self._in_flight = asyncio.ensure_future(self._refresh())
        return await asyncio.shield(self._in_flight)

    async def _refresh(self) -> dict[str, Any]:
        try:
            document = await self._gather()
            self._last = (self._clock(), document)
            return document
        finally:
            self._in_flight = None
