"""NamespaceService: this broker's namespaces, bundles and the bundles it owns.

What the rest of the broker calls:

- :meth:`lookup` — the LOOKUP decision (connect / redirect / failed), binary and HTTP alike;
- :meth:`ensure_owned` / :meth:`check_serving` — a topic loads and serves only on the owner of its
  bundle (acquiring an unowned bundle when placement picks this broker);
- :meth:`unload_bundle`, :meth:`split_bundle`, :meth:`unload_namespace` — for the admin REST and
  the load manager; :meth:`close` unloads everything on a clean shutdown.

Bundles are computed from namespace policies cached per namespace and dropped on every change
under ``/admin/policies`` (a watch), and when the metadata session reconnects. A watch on
``/namespace`` catches this broker's ownership key vanishing while it still serves the bundle
(taken away by another broker that judged it dead): the bundle is dropped at once, as on a
lost session; after a reconnection every owned key is read again (a deletion notified meanwhile
was lost). A lost session drops every bundle inside the event callback (docs/design.md §4.1).
A namespace a topic names that has no policies yet is created with ``defaultNumberOfNamespaceBundles``
bundles (its tenant too) — a minipulsar convenience; Pulsar refuses such topics.

Invariants:

- a topic loads and serves only while this broker holds its bundle's ownership key and the
  bundle is ACTIVE (not unloading, not closing);
- an unload releases the key only after its topics closed (or the timeout passed), and tells
  the clients only after that;
- a cached bundle list read before an invalidation never repopulates the cache.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from minipulsar.broker.identity import BrokerIdentity
from minipulsar.broker.managed_ledger.info import managed_ledger_path
from minipulsar.broker.namespace import split as splitting
from minipulsar.broker.namespace.bundles import NamespaceBundle, NamespaceBundles, topic_hash
from minipulsar.broker.namespace.directory import BrokerDirectory
from minipulsar.broker.namespace.liveness import LivenessProbe
from minipulsar.broker.namespace.lookup import BundlePlacement, Liveness, LookupDecision, LookupResult
from minipulsar.broker.namespace.metrics import NamespaceCollector, NamespaceMetrics
from minipulsar.broker.namespace.ownership import (
    OWNERSHIP_ROOT,
    BundleState,
    OwnedBundle,
    OwnerData,
    OwnershipCache,
    ownership_path,
)
from minipulsar.broker.namespace.policies import DEFAULT_NAMESPACE, POLICIES_ROOT, PolicyStore
from minipulsar.broker.namespace.remote import RemoteAdmin
from minipulsar.broker.namespace.settings import NamespaceSettings
from minipulsar.broker.namespace.unload import DetachedClients, close_topics, detach_clients
from minipulsar.broker.topics.base import Topic
from minipulsar.broker.topics.registry import LoadedTopics
from minipulsar.clock import MONOTONIC, Clock
from minipulsar.errors import (
    BadVersionError,
    ErrorCode,
    InvalidCommandError,
    LedgerFencedError,
    MiniPulsarError,
    NotFoundError,
    NotOwnerError,
    ServerError,
    ServiceNotReadyError,
    SessionExpiredError,
    error_for_code,
)
from minipulsar.metadata import MetadataStore, Notification, NotificationType, SessionEvent
from minipulsar.supervision import guarded, spawn
from minipulsar.topic_name import TopicName

log = logging.getLogger(__name__)

SHUTDOWN_UNLOAD_TIMEOUT_S = 10.0
"""A clean shutdown unloads for at most this long (or namespaceBundleUnloadingTimeoutMs if shorter),
then drops what is left locally: the ownership keys go with the session anyway, and the
supervisor (15 s) or the test harness (10 s) would kill the process soon after."""

DROP_DRAIN_TIMEOUT_S = 1.0
"""How long a bundle dropped without an unload (session lost, key deleted, shutdown leftovers)
waits for the sends already persisting before its topics close."""

OwnershipListener = Callable[[str, str], None]
"""``listener(event, bundle_name)`` with event ``"owned"`` or ``"unloaded"``."""


class NamespaceService:
    """Args:
    store: the metadata store (policies, ownership keys, the broker directory).
    identity: this broker; its URLs go into the ownership keys it writes.
    topics: the topics loaded here; an unload takes its bundle's topics out of them.
    settings: the namespace keys of the broker's config.
    liveness: how a lookup tells a dead owner (a TCP probe of its port by default).
    """

    def __init__(
        self,
        store: MetadataStore,
        identity: BrokerIdentity,
        topics: LoadedTopics,
        settings: NamespaceSettings,
        *,
        liveness: Liveness | None = None,
        clock: Clock = MONOTONIC,
    ) -> None:
        self._store = store
        self._identity = identity
        self._topics = topics
        self._settings = settings
        self._clock = clock
        self.policies = PolicyStore(store, settings.cluster_name, settings.default_bundle_count)
        self.ownership = OwnershipCache(store, OwnerData(identity.service_url, identity.web_service_url))
        self.directory = BrokerDirectory(store)
        self.metrics = NamespaceMetrics()
        self.closing = False
        self.placement: BundlePlacement | None = None
        """Where unowned bundles go (the load manager, set once it is built); None: this broker
        takes them itself."""
        self._decision = LookupDecision(
            self, self.ownership, self.directory, liveness or LivenessProbe(), identity.broker_id
        )
        self._cache: dict[str, NamespaceBundles] = {}
        self._generation: dict[str, int] = {}
        """Namespace → how many times its cached bundles were invalidated (a read that started
        before an invalidation must not repopulate the cache)."""
        self._listeners: list[OwnershipListener] = []
        self._unloads: dict[str, asyncio.Future[None]] = {}
        self._remote = RemoteAdmin()
        self._collector: NamespaceCollector | None = None
        self._store_connected = True
        """False while the metadata store is unreachable (a shutdown then skips writing to it)."""

    async def start(self) -> None:
        store = self._store
        store.watch(POLICIES_ROOT, self._policies_changed)
        store.watch(OWNERSHIP_ROOT, self._ownership_changed)
        store.add_session_listener(self._session_event)
        await self.policies.ensure_namespace(DEFAULT_NAMESPACE)
        self._collector = NamespaceCollector(
            self._settings.cluster_name, self.metrics, lambda: len(self.ownership.owned)
        )

    # -- bundles --------------------------------------------------------------------------------

    async def bundles(self, namespace: str) -> NamespaceBundles:
        """The namespace's bundles (cached); the namespace is created if it has no policies yet."""
        cached = self._cache.get(namespace)
        if cached is not None:
            return cached
        generation = self._generation.get(namespace, 0)
        found = await self.policies.bundles(namespace)
        if found is None:
            found = await self.policies.ensure_namespace(namespace)
        if self._generation.get(namespace, 0) == generation:
            self._cache[namespace] = found
        return found

    async def bundle_of(self, topic: TopicName) -> NamespaceBundle:
        return (await self.bundles(topic.namespace_name)).find(str(topic))

    def _invalidate(self, namespace: str) -> None:
        self._cache.pop(namespace, None)
        self._generation[namespace] = self._generation.get(namespace, 0) + 1

    def _policies_changed(self, notification: Notification) -> None:
        parts = notification.path[len(POLICIES_ROOT) + 1 :].split("/")
        if len(parts) >= 2:
            self._invalidate(f"{parts[0]}/{parts[1]}")

    def _ownership_changed(self, notification: Notification) -> None:
        if notification.type is not NotificationType.DELETED or self.closing:
            return
        for owned in list(self.ownership.owned.values()):
            if owned.state is BundleState.ACTIVE and ownership_path(owned.bundle) == notification.path:
                spawn(self._drop(owned, "its ownership key was deleted"), name=f"drop {owned.bundle}", logger=log)

    async def _drop(self, owned: OwnedBundle, why: str) -> None:
        """Stop serving one bundle without touching its (gone) key; its clients look it up again.

        A deletion notification can arrive after the key was created again by this broker (taking
        over an earlier session's key deletes it, then creates it): the key is read first, and a
        key at the version this broker wrote is still ours."""
        if self.ownership.owned.get(owned.bundle.name) is not owned:
            return
        try:
            current = await self._store.get(ownership_path(owned.bundle))
        except MiniPulsarError:  # cannot tell: stop serving, the safe side
            current = None
        if current is not None and current.version == owned.version:
            return
        if self.ownership.owned.get(owned.bundle.name) is not owned:
            return
        log.warning("%s: %s; no longer serving it", owned.bundle, why)
        del self.ownership.owned[owned.bundle.name]
        bundle = owned.bundle
        loading = self._topics.take_topics(lambda name: bundle.contains_topic(str(name), name.namespace_name))
        (await close_topics(loading, DROP_DRAIN_TIMEOUT_S)).notify()
        self._emit("unloaded", bundle.name)

    def _session_event(self, event: SessionEvent) -> None:
        """The session rules (docs/design.md §4.1): a lost session drops every bundle here and
        now, in this callback, before the loop runs anything else (a SEND read meanwhile finds
        its producer detached); a lost connection changes nothing served; after a reconnection
        whatever watches fed is re-read — the policies cache, and this broker's ownership keys (a
        deletion notified while disconnected was lost)."""
        self._store_connected = event in (SessionEvent.RECONNECTED, SessionEvent.SESSION_REESTABLISHED)
        if event in (SessionEvent.RECONNECTED, SessionEvent.SESSION_REESTABLISHED):
            for namespace in list(self._cache):  # notifications may have been missed meanwhile
                self._invalidate(namespace)
        if event is SessionEvent.RECONNECTED and not self.closing:
            for owned in list(self.ownership.owned.values()):
                if owned.state is BundleState.ACTIVE:
                    spawn(self._drop(owned, "its ownership key is gone"), name=f"check {owned.bundle}", logger=log)
        if event is SessionEvent.SESSION_LOST and not self.closing:
            self._stop_serving_all("metadata session lost")

    # -- lookup and ownership -------------------------------------------------------------------

    async def lookup(self, topic: TopicName, authoritative: bool = False) -> LookupResult:
        """Which broker serves ``topic``; acquires the bundle when that is this broker.
        Never raises: failures are ``failed`` results with an error code."""
        metrics = self.metrics
        if metrics.lookup_pending >= self._settings.max_concurrent_lookups:
            metrics.lookup_done("failed", 0.0)
            return LookupResult.failed(ErrorCode.TOO_MANY_REQUESTS, "Failed due to too many pending lookup requests")
        metrics.lookup_pending += 1
        started = self._clock()
        try:
            result = await self._decision.find(topic, authoritative)
        except MiniPulsarError as error:
            if isinstance(error, SessionExpiredError) or (not isinstance(error, ServerError) and error.retriable):
                # the metadata store unreachable, a timeout, or the session lost and not yet replaced
                result = LookupResult.failed(ErrorCode.SERVICE_NOT_READY, f"lookup of {topic} failed: {error}")
            else:
                result = LookupResult.failed_by(error)
        finally:
            metrics.lookup_pending -= 1
        metrics.lookup_done(result.kind, self._clock() - started)
        return result

    def is_active(self, owned: OwnedBundle) -> bool:
        return owned.state is BundleState.ACTIVE and not self.closing

    async def acquire(self, bundle: NamespaceBundle) -> OwnerData | None:
        """Try to own ``bundle``. Returns the owner (this broker's data when acquired), or None when
        ``bundle`` is no longer a bundle of its namespace (split meanwhile; nothing is kept)."""
        winner = await self.ownership.try_acquire(bundle)
        if not winner.same_broker(self.ownership.me):
            return winner
        fresh = await self.policies.bundles(bundle.namespace)
        owned = self.ownership.owned.get(bundle.name)
        if owned is None:  # dropped meanwhile (the metadata session was lost): the client retries
            raise ServiceNotReadyError(f"{bundle}: ownership lost while acquiring it")
        if fresh is None or not fresh.has(bundle.range):
            log.info("%s was split or removed meanwhile; releasing it", bundle)
            await self.ownership.release(owned)
            self._invalidate(bundle.namespace)
            return None
        if self.closing:  # acquired while shutting down: give it back at once
            await self.ownership.release(owned)
            return None
        self._emit("owned", bundle.name)
        return winner

    async def ensure_owned(self, topic: TopicName) -> None:
        """Return when this broker serves ``topic``'s bundle, acquiring it if unowned and placement
        picks this broker.

        Raises:
            NotOwnerError: another broker owns it or should (the client looks it up again), or it is
                being unloaded.
            ServiceNotReadyError / TooManyRequestsError: the lookup failed for now.
        """
        owned = self.ownership.owning(topic.namespace_name, topic_hash(str(topic)))
        if owned is not None:
            if self.is_active(owned):
                return
            raise NotOwnerError(f"Namespace bundle {owned.bundle} is being unloaded")
        result = await self.lookup(topic)
        if result.kind == "connect" and result.broker_url == self.ownership.me.native_url:
            return
        if result.kind == "failed":
            assert result.error is not None
            if result.error is ErrorCode.SERVICE_NOT_READY:
                raise NotOwnerError(result.message)
            raise error_for_code(result.error.value, result.message)
        raise NotOwnerError(f"{topic} is not served by this broker; look it up again ({result.broker_url})")

    def check_serving(self, topic: TopicName) -> None:
        """Raise NotOwnerError unless this broker owns ``topic``'s bundle and is not unloading it."""
        owned = self.ownership.owning(topic.namespace_name, topic_hash(str(topic)))
        if owned is None or not self.is_active(owned):
            raise NotOwnerError(f"{topic} is not served by this broker now; look it up again")

    async def owner_of(self, bundle: NamespaceBundle) -> OwnerData | None:
        found = await self.ownership.owner(bundle)
        return None if found is None else found[0]

    def owned_bundles(self) -> list[NamespaceBundle]:
        """Bundles this broker owns and serves (not those being unloaded)."""
        return [o.bundle for o in self.ownership.owned.values() if o.state is BundleState.ACTIVE]

    def bundle_of_loaded(self, topic: TopicName) -> NamespaceBundle | None:
        owned = self.ownership.owning(topic.namespace_name, topic_hash(str(topic)))
        return None if owned is None else owned.bundle

    def add_ownership_listener(self, listener: OwnershipListener) -> None:
        self._listeners.append(listener)

    def _emit(self, event: str, bundle_name: str) -> None:
        for listener in self._listeners:  # one listener's bug must not break ownership or the others
            guarded(log, f"ownership listener on {event} {bundle_name}", listener, event, bundle_name)

    # -- unload ---------------------------------------------------------------------------------

    async def unload_bundle(self, bundle: NamespaceBundle | str, destination_broker: str | None = None) -> None:
        """Unload a bundle this broker owns: flag it disabled, close its topics,
        release the ownership key, then tell the clients (CLOSE_PRODUCER / CLOSE_CONSUMER, naming
        the destination broker when one is given and it took the bundle).

        Raises:
            NotOwnerError: this broker does not own ``bundle``.
            InvalidCommandError: a malformed bundle name.
        """
        bundle = _parse_bundle(bundle)
        owned = self.ownership.owned.get(bundle.name)
        if owned is None:
            raise NotOwnerError(f"Namespace bundle {bundle} is not owned by this broker")
        running = self._unloads.get(bundle.name)
        if running is None:
            running = asyncio.ensure_future(self._unload(owned, destination_broker))
            self._unloads[bundle.name] = running
            running.add_done_callback(lambda _: self._unloads.pop(bundle.name, None))
        await asyncio.shield(running)

    async def _unload(self, owned: OwnedBundle, destination_broker: str | None) -> None:
        bundle = owned.bundle
        started = self._clock()
        owned.state = BundleState.UNLOADING
        loading = self._topics.take_topics(lambda name: bundle.contains_topic(str(name), name.namespace_name))
        log.info("unloading %s (%d topics)", bundle, len(loading))
        await self.ownership.disable(owned)
        timeout_s = self._settings.unloading_timeout_s
        try:
            detached = await asyncio.wait_for(close_topics(loading, timeout_s / 2), timeout_s)
        except TimeoutError:
            log.warning("%s: closing its topics took over %.1fs; releasing it anyway", bundle, timeout_s)
            detached = DetachedClients()
        await self.ownership.release(owned)
        assigned = await self._hand_over(bundle, destination_broker)
        detached.notify(assigned)
        self.metrics.unloads += 1
        self._emit("unloaded", bundle.name)
        log.info(
            "unloaded %s in %.0f ms%s",
            bundle,
            (self._clock() - started) * 1000,
            f" (to {destination_broker})" if assigned else "",
        )

    async def _hand_over(self, bundle: NamespaceBundle, destination_broker: str | None) -> str | None:
        """Ask ``destination_broker`` to take ``bundle``; its service URL when it did."""
        if not destination_broker or destination_broker == self._identity.broker_id:
            return None
        info = await self.directory.broker(destination_broker)
        if info is None:
            log.warning("%s: destination broker %s is not registered", bundle, destination_broker)
            return None
        url = f"{info.web_service_url}/admin/v2/namespaces/{bundle.namespace}/{bundle.range.name}/acquire"
        try:
            await self._remote.put(url)
        except ServiceNotReadyError as error:
            log.warning("%s: %s did not take it: %s", bundle, destination_broker, error)
            return None
        return info.service_url

    async def acquire_here(self, bundle: NamespaceBundle | str) -> bool:
        """Own ``bundle`` now, without asking placement (an unload's destination, a split of an unowned
        bundle). True when this broker owns it afterwards."""
        bundle = _parse_bundle(bundle)
        if bundle.name in self.ownership.owned:
            return self.is_active(self.ownership.owned[bundle.name])
        if self.closing:
            return False
        current = await self.bundles(bundle.namespace)
        if not current.has(bundle.range):
            raise NotFoundError(f"Namespace bundle {bundle} does not exist")
        winner = await self.acquire(bundle)
        return winner is not None and winner.same_broker(self.ownership.me)

    def _stop_serving_all(self, why: str) -> None:
        """The metadata session expired: every ownership key is gone (another broker may take the
        bundles now), so stop serving at once, without an await: forget the bundles (lookups and
        new producers or consumers here then go through a fresh acquire), fence every loaded
        topic (its managed ledger and cursors write the metadata store no more: a cursor's clean
        close would overwrite the key the next owner has read) and detach its producers and
        consumers (their later SENDs are dropped, their clients resend them to the next owner);
        closing the topics and telling the clients follow in a task.
        What was already handed to the bookies may still be acknowledged: the next owner fences
        those ledgers when it opens the topic, so no add here succeeds after that."""
        lost = self.ownership.forget_all()
        if not lost:
            return
        log.warning("%s: dropping %d bundles", why, len(lost))
        loading = self._topics.take_topics(lambda name: True)
        early = DetachedClients()
        in_flight: list[asyncio.Future[None]] = []
        fenced = LedgerFencedError(f"{why}: this broker no longer owns the topic")
        for future in loading:
            if future.done() and not future.cancelled() and future.exception() is None:
                future.result().fence(fenced)
                detached, persisting = detach_clients(future.result())
                early.extend(detached)
                in_flight += persisting
        spawn(self._close_dropped(lost, loading, early, in_flight, fenced), name="close dropped topics", logger=log)

    async def _close_dropped(
        self,
        lost: list[OwnedBundle],
        loading: list[asyncio.Future[Topic]],
        early: DetachedClients,
        in_flight: list[asyncio.Future[None]],
        fenced: LedgerFencedError,
    ) -> None:
        if in_flight:  # their receipts still go out (or they fail: the next owner fenced them)
            await asyncio.wait(in_flight, timeout=DROP_DRAIN_TIMEOUT_S)
        early.extend(await close_topics(loading, DROP_DRAIN_TIMEOUT_S, fence=fenced))
        early.notify()
        for owned in lost:
            self._emit("unloaded", owned.bundle.name)

    async def _drop_all(self, why: str) -> None:
        """Stop serving every bundle without touching the metadata store (its keys are gone, or
        will go with the session): close the topics, tell the clients."""
        lost = self.ownership.forget_all()
        if not lost:
            return
        log.warning("%s: dropping %d bundles", why, len(lost))
        loading = self._topics.take_topics(lambda name: True)
        detached = await close_topics(loading, DROP_DRAIN_TIMEOUT_S)
        detached.notify()
        for owned in lost:
            self._emit("unloaded", owned.bundle.name)

    # -- split ----------------------------------------------------------------------------------

    async def split_bundle(
        self, bundle: NamespaceBundle | str, algorithm: str | None = None, unload: bool = False
    ) -> list[NamespaceBundle]:
        """Split a bundle this broker owns in two; this broker owns both halves
        (and unloads them when ``unload``, so placement may move them).

        Raises:
            NotOwnerError: this broker does not own ``bundle``.
            InvalidCommandError: unknown/unsupported algorithm, or the bundle cannot be split that way.
            NotFoundError: ``bundle`` is no longer a bundle of its namespace.
            BadVersionError: the policies changed concurrently (nothing was changed; retry).
        """
        bundle = _parse_bundle(bundle)
        supported = self._settings.supported_split_algorithms
        algorithm = algorithm or self._settings.default_split_algorithm
        if algorithm not in supported or algorithm not in splitting.ALGORITHMS:
            raise InvalidCommandError(
                f"split algorithm {algorithm!r} is not supported; use one of {', '.join(supported)}"
            )
        owned = self.ownership.owned.get(bundle.name)
        if owned is None or not self.is_active(owned):
            raise NotOwnerError(f"Namespace bundle {bundle} is not owned by this broker")
        current = await self.policies.bundles(bundle.namespace)
        if current is None or not current.has(bundle.range):
            raise NotFoundError(f"Namespace bundle {bundle} does not exist (split already?)")
        hashes = await self._topic_hashes(bundle) if algorithm == splitting.TOPIC_COUNT_EQUALLY_DIVIDE else []
        position = splitting.split_position(algorithm, bundle.range, hashes)
        if position is None:
            why = (
                "it is too narrow"
                if algorithm == splitting.RANGE_EQUALLY_DIVIDE
                else f"its {len(hashes)} topics leave no position to split at"
            )
            raise InvalidCommandError(f"{bundle} cannot be split with {algorithm}: {why}")
        boundaries = splitting.split_boundaries(current.boundaries, bundle.range, position)
        halves = [NamespaceBundle(bundle.namespace, r) for r in splitting.children(bundle.range, position)]
        await self._split_and_own(owned, current, boundaries, halves)
        self.metrics.splits += 1
        log.info(
            "split %s at 0x%08x (%s) into %s", bundle, position, algorithm, ", ".join(h.range_name for h in halves)
        )
        if unload:
            await asyncio.gather(*(self.unload_bundle(half) for half in halves))
        return halves

    async def _split_and_own(
        self, parent: OwnedBundle, current: NamespaceBundles, boundaries: tuple[int, ...], halves: list[NamespaceBundle]
    ) -> None:
        """Own the halves first, then publish the new boundaries by CAS, then drop the parent's key:
        at every moment each hash is owned by this broker through the parent or a half."""
        me = self.ownership.me
        acquired: list[OwnedBundle] = []
        try:
            for half in halves:
                winner = await self.ownership.try_acquire(half)
                if not winner.same_broker(me):
                    raise ServiceNotReadyError(f"{half} is owned by {winner.native_url}; cannot split {parent.bundle}")
                acquired.append(self.ownership.owned[half.name])
            updated = await self.policies.replace_bundles(current, boundaries)
        except (BadVersionError, ServiceNotReadyError, NotFoundError):
            for owned in acquired:
                await self.ownership.release(owned)
            raise
        self._invalidate(current.namespace)
        self._cache[current.namespace] = updated
        await self.ownership.release(parent)
        self._emit("unloaded", parent.bundle.name)
        for half in halves:
            self._emit("owned", half.name)

    async def _topic_hashes(self, bundle: NamespaceBundle) -> list[int]:
        """Hashes of the bundle's topics: persistent ones from their managed ledgers, plus loaded ones."""
        tenant, namespace = bundle.namespace.split("/")
        names = {
            f"persistent://{bundle.namespace}/{local}"
            for local in await self._store.children(managed_ledger_path(f"{tenant}/{namespace}/persistent"))
        }
        names.update(str(t.name) for t in self._topics.loaded_topics() if t.name.namespace_name == bundle.namespace)
        return [h for h in map(topic_hash, names) if bundle.range.contains(h)]

    # -- namespace-wide -------------------------------------------------------------------------

    async def unload_namespace(self, namespace: str) -> None:
        """Unload every owned bundle of ``namespace``: here for this broker's, through the owner's
        admin REST for the others' (reference: ``pulsar-admin namespaces unload``)."""
        bundles = await self.bundles(namespace)
        calls = []
        for bundle in bundles.bundles:
            if bundle.name in self.ownership.owned:
                calls.append(self.unload_bundle(bundle))
                continue
            owner = await self.owner_of(bundle)
            if owner is not None and owner.http_url:
                calls.append(
                    self._remote.put(
                        f"{owner.http_url}/admin/v2/namespaces/{bundle.namespace}/{bundle.range.name}/unload"
                    )
                )
        results = await asyncio.gather(*calls, return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException) and not isinstance(r, NotOwnerError)]
        if failures:
            raise ServiceNotReadyError(f"unloading {namespace} failed for {len(failures)} bundles: {failures[0]}")

    async def close(self) -> None:
        """Clean shutdown: unload every bundle (clients move to other brokers), then stop."""
        self.closing = True
        owned = list(self.ownership.owned.values())
        if owned and self._store_connected:
            log.info("unloading %d bundles before shutting down", len(owned))
            unloads = asyncio.gather(*(self.unload_bundle(o.bundle) for o in owned), return_exceptions=True)
            timeout_s = min(SHUTDOWN_UNLOAD_TIMEOUT_S, self._settings.unloading_timeout_s)
            try:
                results = await asyncio.wait_for(unloads, timeout_s)
            except TimeoutError:
                results = []
                log.warning("unloading at shutdown took over %.0fs", timeout_s)
            for result in results:
                if isinstance(result, BaseException) and not isinstance(result, NotOwnerError):
                    log.warning("unloading at shutdown failed: %r", result)
        await self._drop_all("shutting down")  # whatever is left (metadata store unreachable, timeout)
        if self._collector is not None:
            self._collector.unregister()
            self._collector = None
        await self._remote.close()


def _parse_bundle(bundle: NamespaceBundle | str) -> NamespaceBundle:
    if isinstance(bundle, NamespaceBundle):
        return bundle
    try:
        return NamespaceBundle.parse(bundle)
    except ValueError as error:
        raise InvalidCommandError(str(error)) from None
