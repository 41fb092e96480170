"""Admin REST for tenants, namespaces, bundles, brokers and HTTP lookup, at Pulsar's paths.

- ``GET  /admin/v2/tenants``, ``GET|PUT /admin/v2/tenants/{tenant}`` (body: TenantInfo, optional);
- ``GET  /admin/v2/namespaces/{tenant}`` (``["t/ns", …]``), ``GET|PUT /admin/v2/namespaces/{t}/{ns}``
  (PUT body: Policies, optional, e.g. ``{"bundles": {"numBundles": 8}}``);
- ``GET  /admin/v2/namespaces/{t}/{ns}/bundles`` (BundlesData: boundaries, numBundles);
- ``PUT  /admin/v2/namespaces/{t}/{ns}/unload`` (every owned bundle, on whichever broker owns it);
- ``PUT  /admin/v2/namespaces/{t}/{ns}/{bundle}/unload[?destinationBroker=host:webport]``;
- ``PUT  /admin/v2/namespaces/{t}/{ns}/{bundle}/split?unload=true|false&splitAlgorithmName=…``;
- ``GET  /lookup/v2/topic/{domain}/{t}/{ns}/{topic}[?authoritative=true]`` (LookupData);
- ``GET  /admin/v2/clusters`` (this broker's cluster), ``GET  /admin/v2/brokers/{cluster}`` (live broker ids),
  ``GET /admin/v2/brokers/leaderBroker``,
  ``GET  /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces`` (bundle → ownership status);
- ``GET  /admin/v2/broker-stats/load-report`` (this broker's load report as of its last rebuild,
  every few seconds; what it writes to /loadbalance/brokers is older when little changed);
- minipulsar's own ``PUT /admin/v2/namespaces/{t}/{ns}/{bundle}/acquire``: take an unowned bundle now
  (how an unload hands a bundle to its ``destinationBroker``).

A bundle operation reaching a broker that does not own the bundle answers ``307`` to the owner's
same URL, as Pulsar does; a lookup the decision redirects answers ``307`` to that broker's lookup
URL with the ``authoritative`` flag. Errors are ``{"reason": …}`` with 400, 404, 409 or 503.

Invariants:

- a bundle operation runs only on the bundle's owner (others redirect) or, for an unowned
  bundle, here;
- every error is a JSON ``{"reason": …}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from minipulsar.broker.identity import BrokerIdentity
from minipulsar.broker.loadbalance.load_report import LocalBrokerData
from minipulsar.broker.namespace.bundles import BundleRange, NamespaceBundle
from minipulsar.broker.namespace.directory import LEADER_PATH
from minipulsar.broker.namespace.policies import check_name
from minipulsar.errors import (
    AlreadyExistsError,
    BadVersionError,
    ErrorCode,
    InvalidCommandError,
    MiniPulsarError,
    NotFoundError,
    NotOwnerError,
)
from minipulsar.metadata import MetadataStore
from minipulsar.topic_name import TopicName

if TYPE_CHECKING:
    from minipulsar.broker.namespace.service import NamespaceService

NS = "/admin/v2/namespaces/{tenant}/{namespace}"
BUNDLE = NS + "/{bundle:0x[0-9a-fA-F]{8}_0x[0-9a-fA-F]{8}}"


def namespace_routes(
    namespaces: NamespaceService,
    identity: BrokerIdentity,
    cluster_name: str,
    store: MetadataStore,
    load_report: Callable[[], LocalBrokerData | None],
) -> list[web.RouteDef]:
    """``load_report``: this broker's current report (None before the first)."""
    h = _Handlers(namespaces, identity, cluster_name, store, load_report)
    return [
        web.get("/admin/v2/tenants", h.list_tenants),
        web.get("/admin/v2/tenants/{tenant}", h.get_tenant),
        web.put("/admin/v2/tenants/{tenant}", h.create_tenant),
        web.get("/admin/v2/namespaces/{tenant}", h.list_namespaces),
        web.get(NS, h.get_policies),
        web.put(NS, h.create_namespace),
        web.get(NS + "/bundles", h.get_bundles),
        web.put(NS + "/unload", h.unload_namespace),
        web.put(BUNDLE + "/unload", h.unload_bundle),
        web.put(BUNDLE + "/split", h.split_bundle),
        web.put(BUNDLE + "/acquire", h.acquire_bundle),
        web.get("/lookup/v2/topic/{domain:persistent|non-persistent}/{tenant}/{namespace}/{topic}", h.lookup),
        web.get("/admin/v2/clusters", h.list_clusters),
        web.get("/admin/v2/brokers/leaderBroker", h.leader_broker),
        web.get("/admin/v2/brokers/{cluster}", h.list_brokers),
        web.get("/admin/v2/brokers/{cluster}/{broker}/ownedNamespaces", h.owned_namespaces),
        web.get("/admin/v2/broker-stats/load-report", h.load_report),
    ]


_LOOKUP_ERROR_STATUS = {ErrorCode.TOPIC_NOT_FOUND: 404, ErrorCode.NOT_FOUND: 404, ErrorCode.INVALID_COMMAND: 400}
"""HTTP status of a failed lookup by its error code; any other is 503 (retry later)."""


def _error(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)


def _failure(error: MiniPulsarError) -> web.Response:
    if isinstance(error, NotFoundError):
        return _error(404, str(error))
    if isinstance(error, (AlreadyExistsError, BadVersionError)):
        return _error(409, str(error))
    if isinstance(error, InvalidCommandError):
        return _error(400, str(error))
    return _error(503, str(error))


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() in ("true", "1", "yes")


async def _body(request: web.Request) -> dict[str, Any] | None:
    """The JSON object of the body, None when empty; else 400 (also for bytes that are not
    UTF-8, and JSON nested too deep for the parser, which raises RecursionError)."""
    raw = await request.read()
    if not raw.strip():
        return None
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as error:
        raise web.HTTPBadRequest(
            text=json.dumps({"reason": "the body is not JSON"}), content_type="application/json"
        ) from error
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(
            text=json.dumps({"reason": "the body must be a JSON object"}), content_type="application/json"
        )
    return body


def _redirect(base_url: str, request: web.Request, query: str | None = None) -> web.Response:
    location = f"{base_url.rstrip('/')}{request.path}"
    query = request.query_string if query is None else query
    return web.Response(status=307, headers={"Location": f"{location}?{query}" if query else location})


class _Handlers:
    def __init__(
        self,
        namespaces: NamespaceService,
        identity: BrokerIdentity,
        cluster_name: str,
        store: MetadataStore,
        load_report: Callable[[], LocalBrokerData | None],
    ) -> None:
        self._ns = namespaces
        self._identity = identity
        self._cluster_name = cluster_name
        self._store = store
        self._load_report = load_report

    def _namespace(self, request: web.Request) -> str:
        info = request.match_info
        try:
            return f"{check_name('tenant', info['tenant'])}/{check_name('namespace', info['namespace'])}"
        except InvalidCommandError as error:
            raise web.HTTPBadRequest(
                text=json.dumps({"reason": str(error)}), content_type="application/json"
            ) from error

    # -- tenants --------------------------------------------------------------------------------

    async def list_tenants(self, request: web.Request) -> web.Response:
        return web.json_response(await self._ns.policies.tenants())

    async def get_tenant(self, request: web.Request) -> web.Response:
        try:
            info = await self._ns.policies.tenant(request.match_info["tenant"])
        except MiniPulsarError as error:
            return _failure(error)
        return web.json_response(info) if info is not None else _error(404, "Tenant does not exist")

    async def create_tenant(self, request: web.Request) -> web.Response:
        body = await _body(request)
        try:
            await self._ns.policies.create_tenant(request.match_info["tenant"], body)
        except AlreadyExistsError:
            return _error(409, "Tenant already exists")
        except MiniPulsarError as error:
            return _failure(error)
        return web.Response(status=204)

    # -- namespaces -----------------------------------------------------------------------------

    async def list_namespaces(self, request: web.Request) -> web.Response:
        try:
            check_name("tenant", request.match_info["tenant"])
            return web.json_response(await self._ns.policies.namespaces(request.match_info["tenant"]))
        except MiniPulsarError as error:
            return _failure(error)

    async def get_policies(self, request: web.Request) -> web.Response:
        namespace = self._namespace(request)
        found = await self._ns.policies.policies(namespace)
        if found is None:
            return _error(404, "Namespace does not exist")
        return web.json_response(found[0])

    async def create_namespace(self, request: web.Request) -> web.Response:
        namespace, body = self._namespace(request), await _body(request)
        try:
            await self._ns.policies.create_namespace(namespace, body)
        except AlreadyExistsError:
            return _error(409, "Namespace already exists")
        except MiniPulsarError as error:
            return _failure(error)
        return web.Response(status=204)

    async def get_bundles(self, request: web.Request) -> web.Response:
        found = await self._ns.policies.bundles(self._namespace(request))
        if found is None:
            return _error(404, "Namespace does not exist")
        return web.json_response(found.to_policy())

    async def unload_namespace(self, request: web.Request) -> web.Response:
        namespace = self._namespace(request)
        if await self._ns.policies.policies(namespace) is None:
            return _error(404, "Namespace does not exist")
        try:
            await self._ns.unload_namespace(namespace)
        except MiniPulsarError as error:
            return _failure(error)
        return web.Response(status=204)

    # -- bundles --------------------------------------------------------------------------------

    async def _bundle(self, request: web.Request) -> NamespaceBundle:
        namespace = self._namespace(request)
        bundle = NamespaceBundle(namespace, BundleRange.parse(request.match_info["bundle"]))
        current = await self._ns.policies.bundles(namespace)
        if current is None:
            raise web.HTTPNotFound(
                text=json.dumps({"reason": "Namespace does not exist"}), content_type="application/json"
            )
        if not current.has(bundle.range) and bundle.name not in self._ns.ownership.owned:
            raise web.HTTPNotFound(
                text=json.dumps({"reason": f"Namespace bundle {bundle} does not exist"}),
                content_type="application/json",
            )
        return bundle

    async def _elsewhere(self, request: web.Request, bundle: NamespaceBundle) -> web.Response | None:
        """307 to the owner when another broker owns ``bundle``; None when this one does or nobody."""
        if bundle.name in self._ns.ownership.owned:
            return None
        owner = await self._ns.owner_of(bundle)
        if owner is None or owner.same_broker(self._ns.ownership.me) or not owner.http_url:
            return None
        return _redirect(owner.http_url, request)

    async def unload_bundle(self, request: web.Request) -> web.Response:
        bundle = await self._bundle(request)
        if (elsewhere := await self._elsewhere(request, bundle)) is not None:
            return elsewhere
        if bundle.name not in self._ns.ownership.owned:
            return web.Response(status=204)  # unowned: nothing to unload
        try:
            await self._ns.unload_bundle(bundle, request.query.get("destinationBroker") or None)
        except NotOwnerError:  # released meanwhile
            return web.Response(status=204)
        except MiniPulsarError as error:
            return _failure(error)
        return web.Response(status=204)

    async def split_bundle(self, request: web.Request) -> web.Response:
        bundle = await self._bundle(request)
        if (elsewhere := await self._elsewhere(request, bundle)) is not None:
            return elsewhere
        try:
            if not await self._ns.acquire_here(bundle):
                return _error(503, f"Namespace bundle {bundle} is being unloaded or taken by another broker; retry")
            halves = await self._ns.split_bundle(
                bundle, request.query.get("splitAlgorithmName") or None, _flag(request, "unload")
            )
        except MiniPulsarError as error:
            return _failure(error)
        return web.json_response([h.range_name for h in halves])

    async def acquire_bundle(self, request: web.Request) -> web.Response:
        bundle = await self._bundle(request)
        try:
            if await self._ns.acquire_here(bundle):
                return web.Response(status=204)
        except MiniPulsarError as error:
            return _failure(error)
        return _error(409, f"Namespace bundle {bundle} is owned by another broker")

    # -- lookup ---------------------------------------------------------------------------------

    async def lookup(self, request: web.Request) -> web.Response:
        info = request.match_info
        try:
            name = TopicName.parse(f"{info['domain']}://{info['tenant']}/{info['namespace']}/{info['topic']}")
            check_name("tenant", name.tenant)
            check_name("namespace", name.namespace)
        except (ValueError, InvalidCommandError) as error:
            return _error(400, str(error))
        result = await self._ns.lookup(name, _flag(request, "authoritative"))
        if result.kind == "connect":
            return web.json_response(
                {
                    "brokerUrl": result.broker_url,
                    "brokerUrlTls": "",
                    "httpUrl": result.http_url,
                    "httpUrlTls": "",
                    "nativeUrl": result.broker_url,
                }
            )
        if result.kind == "redirect":
            return _redirect(result.http_url, request, f"authoritative={str(result.authoritative).lower()}")
        status = 503 if result.error is None else _LOOKUP_ERROR_STATUS.get(result.error, 503)
        return _error(status, result.message)

    # -- brokers --------------------------------------------------------------------------------

    async def list_clusters(self, request: web.Request) -> web.Response:
        return web.json_response([self._cluster_name])

    async def list_brokers(self, request: web.Request) -> web.Response:
        if request.match_info["cluster"] != self._cluster_name:
            return _error(404, f"Cluster {request.match_info['cluster']} does not exist")
        return web.json_response(await self._ns.directory.broker_ids())

    async def leader_broker(self, request: web.Request) -> web.Response:
        found = await self._store.get(LEADER_PATH)
        if found is None:
            return _error(404, "No leader broker is elected")
        try:
            return web.json_response(json.loads(found.value))
        except ValueError:
            return _error(503, "the leader record is unreadable")

    async def owned_namespaces(self, request: web.Request) -> web.Response:
        broker = request.match_info["broker"]
        if broker != self._identity.broker_id:
            info = await self._ns.directory.broker(broker)
            if info is None:
                return _error(404, f"Broker {broker} is not active")
            return _redirect(info.web_service_url, request)
        return web.json_response(
            {
                owned.bundle.name: {
                    "broker_assignment": "shared",
                    "is_controlled": False,
                    "is_active": owned.state.value == "active",
                }
                for owned in self._ns.ownership.owned.values()
            }
        )

    async def load_report(self, request: web.Request) -> web.Response:
        """As Pulsar's: the report built now-ish (the reporter rebuilds it every
        ``loadBalancerReportUpdateMinIntervalMillis``), not the copy last written to the store,
        which the write policy lets age up to ``loadBalancerReportUpdateMaxIntervalMinutes``."""
        report = self._load_report()
        if report is None:
            return _error(503, "this broker has no load report yet")
        return web.json_response(report.to_json())
