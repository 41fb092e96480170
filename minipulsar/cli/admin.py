"""``minipulsar admin``: pulsar-admin's verbs for brokers, tenants, namespaces and topic lookup.

Talks to a broker's admin REST (``--admin-url``, default ``http://localhost:8080``) with Pulsar's
paths, following the ``307`` a broker answers when another one owns the bundle or topic. Output:
lists one item per line, objects as indented JSON, a lookup as the owner's service URL.
Exit codes: 0 done, 1 the broker refused (its reason is printed) or could not be reached,
2 a malformed name or flag.

::

    minipulsar admin brokers list [CLUSTER]            minipulsar admin brokers load-report
    minipulsar admin brokers leader-broker
    minipulsar admin tenants list | get T | create T [--allowed-clusters C,...]
    minipulsar admin namespaces list T | create T/NS [--bundles N] | policies T/NS | bundles T/NS
    minipulsar admin namespaces unload T/NS [--bundle 0x00000000_0x40000000] [--destination-broker HOST:WEBPORT]
    minipulsar admin namespaces split-bundle T/NS --bundle RANGE [--unload] [--algorithm range_equally_divide]
    minipulsar admin topics lookup TOPIC
    minipulsar admin bookies list | list-underreplicated | recover B | decommission B | ...   (admin_bookies.py)

The ``bookies`` verbs talk to the metadata store instead (:mod:`minipulsar.cli.admin_bookies`).
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import sys
from typing import Any
from urllib.parse import quote, urlencode, urljoin, urlsplit

from minipulsar.cli.admin_bookies import BookiesCommandError, add_bookies_parser
from minipulsar.topic_name import TopicName

DEFAULT_ADMIN_URL = "http://localhost:8080"
MAX_REDIRECTS = 5

_NAME = re.compile(r"^[-=:.\w]+$")
_RANGE = re.compile(r"^0x[0-9a-fA-F]{8}_0x[0-9a-fA-F]{8}$")


class AdminError(Exception):
    """The broker refused, or could not be reached; ``exit_code`` 1."""

    exit_code = 1


class UsageError(AdminError):
    """A malformed name or flag, caught before any request; ``exit_code`` 2."""

    exit_code = 2


# -- HTTP ------------------------------------------------------------------------------------------


class AdminClient:
    """Blocking HTTP client for the admin REST; follows 307/308 with the same method and body."""

    def __init__(self, admin_url: str, timeout_s: float) -> None:
        parts = urlsplit(admin_url if "://" in admin_url else f"http://{admin_url}")
        if parts.scheme != "http" or not parts.hostname:
            raise UsageError(f"--admin-url must be http://host:port, got {admin_url!r}")
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, body: Any = None, query: dict | None = None) -> Any:
        """The decoded JSON answer (None when empty).

        Raises:
            AdminError: unreachable, too many redirects, or an error status (with the broker's reason).
        """
        url = self.base + path + (f"?{urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body).encode()
        for _ in range(MAX_REDIRECTS + 1):
            status, headers, text = self._once(method, url, data)
            if status in (301, 302, 303, 307, 308) and headers.get("location"):
                url = urljoin(url, headers["location"])
                continue
            if status >= 400:
                raise AdminError(f"{method} {urlsplit(url).path} failed: HTTP {status}: {_reason(text)}")
            return json.loads(text) if text.strip() else None
        raise AdminError(f"{method} {path}: more than {MAX_REDIRECTS} redirects")

    def _once(self, method: str, url: str, data: bytes | None) -> tuple[int, dict[str, str], str]:
        parts = urlsplit(url)
        if parts.hostname is None:
            raise AdminError(f"{method} {url}: the URL names no host")
        connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=self.timeout_s)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = {"Content-Type": "application/json"} if data is not None else {}
        try:
            connection.request(
                method, path, body=data if data is not None else (b"" if method == "PUT" else None), headers=headers
            )
            response = connection.getresponse()
            text = response.read().decode(errors="replace")
            return response.status, {k.lower(): v for k, v in response.getheaders()}, text
        except (TimeoutError, OSError, http.client.HTTPException) as error:
            why = (
                error.strerror if isinstance(error, OSError) and error.strerror else str(error) or type(error).__name__
            )
            raise AdminError(f"cannot reach the broker at {parts.scheme}://{parts.netloc}: {why}") from None
        finally:
            connection.close()


def _reason(text: str) -> str:
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip() or "(no reason given)"
    return str(data.get("reason", text.strip())) if isinstance(data, dict) else text.strip()


# -- names -----------------------------------------------------------------------------------------


def _namespace(text: str) -> str:
    parts = text.split("/")
    if len(parts) != 2 or not all(_NAME.match(p) for p in parts):
        raise UsageError(f"invalid namespace {text!r}: expected tenant/namespace (letters, digits, _ - = : .)")
    return text


def _tenant(text: str) -> str:
    if not _NAME.match(text):
        raise UsageError(f"invalid tenant {text!r}: use letters, digits and _ - = : .")
    return text


def _bundle(text: str) -> str:
    if not _RANGE.match(text):
        raise UsageError(f"invalid bundle {text!r}: expected a range such as 0x00000000_0x40000000")
    return text.lower()


def _topic(text: str) -> TopicName:
    try:
        name = TopicName.parse(text)
    except ValueError as error:
        raise UsageError(str(error)) from None
    _namespace(name.namespace_name)
    return name


# -- verbs -----------------------------------------------------------------------------------------


def _print(value: Any) -> None:
    if isinstance(value, list):
        for item in value:
            print(item)
    elif isinstance(value, str):
        print(value)
    elif value is not None:
        print(json.dumps(value, indent=2, sort_keys=True))


def brokers_list(client: AdminClient, args: argparse.Namespace) -> Any:
    cluster = args.cluster
    if cluster is None:
        clusters = client.request("GET", "/admin/v2/clusters") or []
        if not clusters:
            raise AdminError("the broker names no cluster")
        cluster = clusters[0]
    return client.request("GET", f"/admin/v2/brokers/{quote(cluster, safe='')}")


def brokers_load_report(client: AdminClient, args: argparse.Namespace) -> Any:
    return client.request("GET", "/admin/v2/broker-stats/load-report")


def brokers_leader(client: AdminClient, args: argparse.Namespace) -> Any:
    return client.request("GET", "/admin/v2/brokers/leaderBroker")


def tenants_list(client: AdminClient, args: argparse.Namespace) -> Any:
    return client.request("GET", "/admin/v2/tenants")


def tenants_get(client: AdminClient, args: argparse.Namespace) -> Any:
    return client.request("GET", f"/admin/v2/tenants/{_tenant(args.tenant)}")


def tenants_create(client: AdminClient, args: argparse.Namespace) -> Any:
    info: dict[str, Any] = {"adminRoles": [r for r in (args.admin_roles or "").split(",") if r]}
    if args.allowed_clusters:
        info["allowedClusters"] = [c for c in args.allowed_clusters.split(",") if c]
    client.request("PUT", f"/admin/v2/tenants/{_tenant(args.tenant)}", info)
    return None


def namespaces_list(client: AdminClient, args: argparse.Namespace) -> Any:
    return client.request("GET", f"/admin/v2/namespaces/{_tenant(args.tenant)}")


def namespaces_create(client: AdminClient, args: argparse.Namespace) -> Any:
    body = {"bundles": {"numBundles": args.bundles}} if args.bundles is not None else {}
    if args.bundles is not None and args.bundles < 1:
        raise UsageError(f"--bundles must be at least 1, got {args.bundles}")
    client.request("PUT", f"/admin/v2/namespaces/{_namespace(args.namespace)}", body)
    return None


def namespaces_policies(client: AdminClient, args: argparse.Namespace) -> Any:
    return client.request("GET", f"/admin/v2/namespaces/{_namespace(args.namespace)}")


def namespaces_bundles(client: AdminClient, args: argparse.Namespace) -> Any:
    return client.request("GET", f"/admin/v2/namespaces/{_namespace(args.namespace)}/bundles")


def namespaces_unload(client: AdminClient, args: argparse.Namespace) -> Any:
    namespace = _namespace(args.namespace)
    if args.bundle is None:
        if args.destination_broker:
            raise UsageError("--destination-broker needs --bundle")
        client.request("PUT", f"/admin/v2/namespaces/{namespace}/unload")
        return None
    query = {"destinationBroker": args.destination_broker} if args.destination_broker else None
    client.request("PUT", f"/admin/v2/namespaces/{namespace}/{_bundle(args.bundle)}/unload", query=query)
    return None


def namespaces_split_bundle(client: AdminClient, args: argparse.Namespace) -> Any:
    namespace, bundle = _namespace(args.namespace), _bundle(args.bundle)
    query = {"unload": str(args.unload).lower()}
    if args.algorithm:
        query["splitAlgorithmName"] = args.algorithm
    return client.request("PUT", f"/admin/v2/namespaces/{namespace}/{bundle}/split", query=query)


def topics_lookup(client: AdminClient, args: argparse.Namespace) -> Any:
    name = _topic(args.topic)
    path = f"/lookup/v2/topic/{name.domain}/{name.tenant}/{name.namespace}/{quote(name.local_name, safe='')}"
    data = client.request("GET", path) or {}
    return data.get("brokerUrl", data) if not args.json else data


# -- parser ----------------------------------------------------------------------------------------


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    admin = subparsers.add_parser(
        "admin",
        help="administer brokers, tenants and namespaces (as pulsar-admin)",
        description="Admin REST client with pulsar-admin's verbs.",
    )
    admin.add_argument(
        "--admin-url", default=DEFAULT_ADMIN_URL, help="a broker's web service URL (default: %(default)s)"
    )
    admin.add_argument(
        "--request-timeout", type=float, default=60.0, metavar="SECONDS", help="per HTTP request (default: %(default)g)"
    )
    groups = admin.add_subparsers(dest="group", required=True, metavar="GROUP")

    brokers = groups.add_parser("brokers", help="active brokers, their load reports, the leader")
    verbs = brokers.add_subparsers(dest="verb", required=True, metavar="VERB")
    verb = verbs.add_parser("list", help="active brokers of a cluster (default: the broker's own)")
    verb.add_argument("cluster", nargs="?")
    verb.set_defaults(action=brokers_list)
    verbs.add_parser("load-report", help="the broker's load report (JSON)").set_defaults(action=brokers_load_report)
    verbs.add_parser("leader-broker", help="the load-manager leader").set_defaults(action=brokers_leader)

    tenants = groups.add_parser("tenants", help="list, get, create tenants")
    verbs = tenants.add_subparsers(dest="verb", required=True, metavar="VERB")
    verbs.add_parser("list").set_defaults(action=tenants_list)
    verb = verbs.add_parser("get")
    verb.add_argument("tenant")
    verb.set_defaults(action=tenants_get)
    verb = verbs.add_parser("create")
    verb.add_argument("tenant")
    verb.add_argument("-r", "--admin-roles", help="comma-separated roles")
    verb.add_argument("-c", "--allowed-clusters", help="comma-separated clusters (default: the broker's)")
    verb.set_defaults(action=tenants_create)

    namespaces = groups.add_parser("namespaces", help="namespaces, their bundles, unload and split")
    verbs = namespaces.add_subparsers(dest="verb", required=True, metavar="VERB")
    verb = verbs.add_parser("list", help="namespaces of a tenant")
    verb.add_argument("tenant")
    verb.set_defaults(action=namespaces_list)
    verb = verbs.add_parser("create", help="create tenant/namespace")
    verb.add_argument("namespace")
    verb.add_argument(
        "-b", "--bundles", type=int, help="number of bundles (default: the broker's defaultNumberOfNamespaceBundles)"
    )
    verb.set_defaults(action=namespaces_create)
    verb = verbs.add_parser("policies", help="the namespace's policies (JSON)")
    verb.add_argument("namespace")
    verb.set_defaults(action=namespaces_policies)
    verb = verbs.add_parser("bundles", help="the namespace's bundle boundaries")
    verb.add_argument("namespace")
    verb.set_defaults(action=namespaces_bundles)
    verb = verbs.add_parser("unload", help="unload the namespace, or one bundle of it")
    verb.add_argument("namespace")
    verb.add_argument("-b", "--bundle", help="a bundle range such as 0x00000000_0x40000000")
    verb.add_argument(
        "-d",
        "--destination-broker",
        "--destinationBroker",
        metavar="HOST:WEBPORT",
        help="hand the bundle to this broker (a broker id from 'brokers list')",
    )
    verb.set_defaults(action=namespaces_unload)
    verb = verbs.add_parser("split-bundle", help="split one bundle in two")
    verb.add_argument("namespace")
    verb.add_argument("-b", "--bundle", required=True, help="the bundle range to split")
    verb.add_argument("-u", "--unload", action="store_true", help="unload the two halves afterwards")
    verb.add_argument(
        "-san",
        "--split-algorithm-name",
        "--algorithm",
        dest="algorithm",
        choices=["range_equally_divide", "topic_count_equally_divide"],
        help="default: the broker's defaultNamespaceBundleSplitAlgorithm",
    )
    verb.set_defaults(action=namespaces_split_bundle)

    topics = groups.add_parser("topics", help="topic lookup")
    verbs = topics.add_subparsers(dest="verb", required=True, metavar="VERB")
    verb = verbs.add_parser("lookup", help="the broker serving a topic")
    verb.add_argument("topic")
    verb.add_argument("--json", action="store_true", help="print the whole lookup answer")
    verb.set_defaults(action=topics_lookup)

    add_bookies_parser(groups)
    admin.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        client = AdminClient(args.admin_url, args.request_timeout)
        _print(args.action(client, args))
    except (AdminError, BookiesCommandError) as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    return 0
