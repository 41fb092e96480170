"""The broker-side lookup decision: which broker serves a topic's bundle.

::

    owned by this broker (active)          → connect (me)
    owned here or elsewhere, being unloaded → failed ServiceNotReady (the client retries)
    owned by another broker                → redirect (owner, authoritative=false)
    unowned:
        request.authoritative, or no load manager
                                           → candidate = me
        this broker leads the load manager, or there is no leader
                                           → candidate = load_manager.select_broker_for(bundle) (None: me);
                                             authoritative = true
        else                               → redirect (leader, authoritative=false): it decides
        candidate == me → create the ownership key → connect (or redirect to whoever won the race)
        else            → redirect (candidate, authoritative=true): it takes the bundle without asking again

A bundle is acquired only if it is still a bundle of the namespace once the key exists (checked on
freshly read policies): a broker with a stale view of a split must not own the parent of two
bundles another broker owns.

An owner, leader or placement candidate whose service port refuses connections is gone
(:mod:`broker.namespace.liveness`): its ownership key is deleted and the bundle treated as unowned,
rather than redirecting clients to a dead address until its session expires.

Concurrent lookups of topics of one unowned bundle share one decision round (as Pulsar's
ownership cache shares one acquisition future per bundle): ten thousand producers starting at
once cost one owner read and one key creation per bundle, not one per topic.

Invariants:

- at most one decision round per bundle (and ``authoritative`` flag) runs at a time; every
  lookup waiting on it gets its result;
- the decision never raises: every failure is a ``failed`` result with an error code;
- only the load-manager leader's placement (or an authoritative request) makes a broker take
  an unowned bundle; a non-leader forwards the question to the leader;
- a lookup gives up after :data:`ACQUIRE_ATTEMPTS` rounds rather than chase a moving bundle.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Literal, Protocol

from minipulsar.broker.namespace.bundles import NamespaceBundle
from minipulsar.broker.namespace.directory import BrokerDirectory, BrokerInfo
from minipulsar.broker.namespace.ownership import OwnedBundle, OwnerData, OwnershipCache
from minipulsar.errors import ErrorCode, MiniPulsarError, code_for_error
from minipulsar.topic_name import TopicName

log = logging.getLogger(__name__)

ACQUIRE_ATTEMPTS = 3
"""Rounds of (read owner, decide, acquire) before a lookup gives up on a bundle that keeps moving."""


LookupKind = Literal["connect", "redirect", "failed"]
"""LOOKUP_RESPONSE's ``kind``: serve here, ask that broker instead, or retry/give up (``error``)."""


@dataclass(frozen=True, slots=True)
class LookupResult:
    kind: LookupKind
    broker_url: str = ""
    http_url: str = ""
    authoritative: bool = False
    message: str = ""
    error: ErrorCode | None = None

    @classmethod
    def connect(cls, broker_url: str, http_url: str) -> LookupResult:
        return cls("connect", broker_url, http_url, authoritative=True)

    @classmethod
    def redirect(cls, broker_url: str, http_url: str, authoritative: bool) -> LookupResult:
        return cls("redirect", broker_url, http_url, authoritative=authoritative)

    @classmethod
    def failed(cls, error: ErrorCode, message: str) -> LookupResult:
        return cls("failed", message=message, error=error)

    @classmethod
    def failed_by(cls, error: MiniPulsarError) -> LookupResult:
        return cls.failed(code_for_error(error), str(error))


class TopicLookup(Protocol):
    """The LOOKUP decision, as the connections and the admin REST ask for it (the namespace service)."""

    async def lookup(self, topic: TopicName, authoritative: bool = False) -> LookupResult:
        """Which broker serves ``topic``; never raises (failures are ``failed`` results)."""
        ...


class BundlePlacement(Protocol):
    """Where an unowned bundle should go (the load manager)."""

    @property
    def is_leader(self) -> bool:
        """This broker leads the load manager: its placement decides."""
        ...

    def select_broker_for(self, bundle: str) -> str | None:
        """The broker id the bundle should go to; None: no opinion (this broker takes it)."""
        ...


class Liveness(Protocol):
    async def is_gone(self, service_url: str) -> bool:
        """True when the broker at ``service_url`` is known to be dead (its port refuses)."""
        ...


class LookupHost(Protocol):
    """What the decision asks of the namespace service it runs for."""

    @property
    def closing(self) -> bool: ...

    @property
    def placement(self) -> BundlePlacement | None:
        """None: no load manager; this broker takes unowned bundles itself."""
        ...

    async def bundle_of(self, topic: TopicName) -> NamespaceBundle: ...

    def is_active(self, owned: OwnedBundle) -> bool: ...

    async def acquire(self, bundle: NamespaceBundle) -> OwnerData | None: ...


def being_unloaded(bundle: NamespaceBundle) -> LookupResult:
    return LookupResult.failed(ErrorCode.SERVICE_NOT_READY, f"Namespace bundle {bundle} is currently being unloaded")


class LookupDecision:
    """Runs the decision for one broker (its namespace service is the ``host``)."""

    def __init__(
        self,
        host: LookupHost,
        ownership: OwnershipCache,
        directory: BrokerDirectory,
        liveness: Liveness,
        broker_id: str,
    ) -> None:
        self._host = host
        self._ownership = ownership
        self._directory = directory
        self._liveness = liveness
        self._broker_id = broker_id
        self._deciding: dict[tuple[str, bool], asyncio.Future[LookupResult | None]] = {}
        """(bundle name, authoritative) → the decision round running for it."""

    async def find(self, topic: TopicName, authoritative: bool) -> LookupResult:
        ns, ownership = self._host, self._ownership
        me = ownership.me
        for _ in range(ACQUIRE_ATTEMPTS):
            bundle = await ns.bundle_of(topic)
            local = ownership.owned.get(bundle.name)
            if local is not None:
                return (
                    LookupResult.connect(me.native_url, me.http_url) if ns.is_active(local) else being_unloaded(bundle)
                )
            result = await self._shared_round(bundle, authoritative)
            if result is not None:
                return result
        return LookupResult.failed(
            ErrorCode.SERVICE_NOT_READY, f"ownership of the bundle of {topic} keeps changing; retry"
        )

    async def _shared_round(self, bundle: NamespaceBundle, authoritative: bool) -> LookupResult | None:
        """:meth:`_round` for ``bundle``, joined by every lookup of the bundle while it runs."""
        key = (bundle.name, authoritative)
        pending = self._deciding.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._round(bundle, authoritative))
            self._deciding[key] = pending

            def finished(done: asyncio.Future[LookupResult | None]) -> None:
                if self._deciding.get(key) is done:
                    del self._deciding[key]
                if not done.cancelled():
                    done.exception()  # retrieved: every waiter may have gone; each one still raises it

            pending.add_done_callback(finished)
        return await asyncio.shield(pending)

    async def _round(self, bundle: NamespaceBundle, authoritative: bool) -> LookupResult | None:
        """One round for an unowned (here) bundle: the result, or None for another round (the
        bundle moved: a dead owner's key removed, a split, a race lost)."""
        ns, ownership = self._host, self._ownership
        me = ownership.me
        owner = await ownership.owner(bundle)
        if owner is not None:
            data, version = owner
            if not data.same_broker(me) and data.native_url and await self._liveness.is_gone(data.native_url):
                log.info("%s: its owner %s is gone; taking its ownership key away", bundle, data.native_url)
                await ownership.remove_dead(bundle, version)
                return None
            if data.disabled and not data.same_broker(me):
                return being_unloaded(bundle)
            if not data.same_broker(me):
                return LookupResult.redirect(data.native_url, data.http_url, authoritative=False)
            # else: a key of an earlier session on this address: placement chose this address
            # already, and every other broker redirects here; try_acquire replaces the key
        if ns.closing:
            return LookupResult.failed(ErrorCode.SERVICE_NOT_READY, "the broker is shutting down")
        stale_mine = owner is not None and owner[0].same_broker(me)
        candidate = None if stale_mine else await self._candidate(bundle, authoritative)
        if isinstance(candidate, LookupResult):
            return candidate
        if candidate is not None:
            return LookupResult.redirect(candidate.service_url, candidate.web_service_url, authoritative=True)
        winner = await ns.acquire(bundle)
        if winner is None:
            return None  # the namespace was split meanwhile: look the topic's bundle up again
        if winner.same_broker(me):
            return LookupResult.connect(me.native_url, me.http_url)
        return None  # lost the race: the next round reads the winner (and whether it is unloading)

    async def _candidate(self, bundle: NamespaceBundle, authoritative: bool) -> BrokerInfo | LookupResult | None:
        """Who should own an unowned bundle: None = this broker, a BrokerInfo = another broker, or a
        LookupResult = ask the leader (redirect) instead of deciding here."""
        placement = self._host.placement
        if authoritative or placement is None:
            return None
        if not placement.is_leader:
            leader = await self._directory.leader()
            if (
                leader is not None
                and leader.broker_id != self._broker_id
                and not await self._liveness.is_gone(leader.service_url)
            ):
                return LookupResult.redirect(leader.service_url, leader.web_service_url, authoritative=False)
        chosen = placement.select_broker_for(bundle.name)
        if chosen is None or chosen == self._broker_id:
            return None
        info = await self._directory.broker(chosen)
        if info is None or await self._liveness.is_gone(info.service_url):  # it went away meanwhile
            log.info("%s: placement chose %s, which is not reachable; taking the bundle", bundle, chosen)
            return None
        return info
