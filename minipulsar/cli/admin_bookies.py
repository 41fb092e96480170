"""``minipulsar admin bookies``: BookKeeper's shell verbs for bookies and AutoRecovery.

::

    minipulsar admin bookies [--metadata-url URL] list | list-underreplicated | who-is-auditor
    minipulsar admin bookies recover BOOKIE [--no-wait] [--timeout SECONDS]
    minipulsar admin bookies decommission BOOKIE [--timeout SECONDS]
    minipulsar admin bookies autorecovery status | enable | disable
    minipulsar admin bookies lost-bookie-recovery-delay [SECONDS]

They talk to the metadata store directly (``--metadata-url``, as ``bookkeeper shell`` talks to
ZooKeeper): recovering a dead bookie must work with no bookie of it up, and the state they read
and change (registrations, marks, the disable flag, the delay) lives there. The one exception:
``decommission`` first turns a live bookie read-only through its REST API
(``PUT /api/v1/bookie/state/readonly``, at the ``httpPort`` of its registration), so that no new
ledger is placed on it and its writers replace it on their next add; then it marks its ledgers,
waits until no ledger names it (the replication workers of the cluster do the copying), and
deletes its cookie. ``recover`` marks and, unless ``--no-wait``, waits the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from minipulsar.bookkeeper.bookie_registry import AVAILABLE_PATH
from minipulsar.bookkeeper.replication import admin
from minipulsar.bookkeeper.replication.underreplication_manager import LedgerUnderreplicationManager
from minipulsar.errors import MiniPulsarError
from minipulsar.metadata import MetadataStore, open_metadata_store

DEFAULT_METADATA_URL = "metastore://127.0.0.1:6680"
T = TypeVar("T")


class BookiesCommandError(Exception):
    """The metadata store or a bookie refused or could not be reached (exit code 1)."""

    exit_code = 1


def add_bookies_parser(groups: argparse._SubParsersAction) -> None:
    bookies = groups.add_parser("bookies", help="bookies and AutoRecovery (as bookkeeper shell)")
    bookies.add_argument(
        "--metadata-url", default=DEFAULT_METADATA_URL, help="metadataServiceUri (default: %(default)s)"
    )
    verbs = bookies.add_subparsers(dest="verb", required=True, metavar="VERB")
    verbs.add_parser("list", help="registered bookies, writable and read-only").set_defaults(action=bookies_list)
    verbs.add_parser("list-underreplicated", help="ledgers marked under-replicated").set_defaults(
        action=bookies_list_underreplicated
    )
    verbs.add_parser("who-is-auditor", help="the elected auditor").set_defaults(action=bookies_who_is_auditor)
    verb = verbs.add_parser("recover", help="re-replicate every ledger with a fragment on BOOKIE")
    verb.add_argument("bookie")
    verb.add_argument("--no-wait", action="store_true", help="only mark the ledgers")
    verb.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS")
    verb.set_defaults(action=bookies_recover)
    verb = verbs.add_parser("decommission", help="drain a bookie, then delete its cookie")
    verb.add_argument("bookie")
    verb.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS")
    verb.set_defaults(action=bookies_decommission)
    verb = verbs.add_parser("autorecovery", help="AutoRecovery: status, enable, disable")
    verb.add_argument("switch", choices=("status", "enable", "disable"))
    verb.set_defaults(action=bookies_autorecovery)
    verb = verbs.add_parser("lost-bookie-recovery-delay", help="get, or set, lostBookieRecoveryDelay (seconds)")
    verb.add_argument("seconds", nargs="?", type=int)
    verb.set_defaults(action=bookies_lost_bookie_recovery_delay)


def _with_store(args: argparse.Namespace, work: Callable[[MetadataStore], Awaitable[T]]) -> T:
    async def run() -> T:
        store = await open_metadata_store(args.metadata_url)
        try:
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except MiniPulsarError as error:
        raise BookiesCommandError(str(error)) from error


def bookies_list(_: Any, args: argparse.Namespace) -> Any:
    return _with_store(args, admin.list_bookies)


def bookies_list_underreplicated(_: Any, args: argparse.Namespace) -> Any:
    async def work(store: MetadataStore) -> list[str]:
        marks = await LedgerUnderreplicationManager(store).list_underreplicated()
        return [f"{m.ledger_id}\t{','.join(sorted(m.missing_replicas))}" for m in marks]

    return _with_store(args, work)


def bookies_who_is_auditor(_: Any, args: argparse.Namespace) -> Any:
    return _with_store(args, admin.who_is_auditor) or "no auditor elected"


def bookies_recover(_: Any, args: argparse.Namespace) -> Any:
    async def work(store: MetadataStore) -> list[int]:
        ledgers = await admin.recover_bookie(store, args.bookie)
        if not args.no_wait:
            await admin.wait_drained(store, args.bookie, args.timeout)
        return sorted(ledgers)

    return _with_store(args, work)


def bookies_decommission(_: Any, args: argparse.Namespace) -> Any:
    async def work(store: MetadataStore) -> str:
        await _set_read_only(store, args.bookie)
        await admin.decommission_bookie(store, args.bookie, args.timeout)
        return f"decommissioned {args.bookie}: no ledger has a fragment on it, its cookie is deleted"

    return _with_store(args, work)


async def _set_read_only(store: MetadataStore, bookie: str) -> None:
    """Turn a registered bookie read-only through its REST API (nothing when not registered)."""
    registration = await store.get(f"{AVAILABLE_PATH}/{bookie}")
    if registration is None:
        return
    try:
        http_port = int(json.loads(registration.value)["httpPort"])
    except (ValueError, KeyError, TypeError):
        return
    host = bookie.rpartition(":")[0]
    await asyncio.to_thread(_put_read_only, host, http_port)


def _put_read_only(host: str, port: int) -> None:
    connection = http.client.HTTPConnection(host, port, timeout=30)
    try:
        connection.request(
            "PUT",
            "/api/v1/bookie/state/readonly",
            body=b'{"readOnly": true}',
            headers={"Content-Type": "application/json"},
        )
        response = connection.getresponse()
        body = response.read().decode(errors="replace")
    except OSError as error:
        raise BookiesCommandError(f"cannot turn {host}:{port} read-only: {error}") from error
    finally:
        connection.close()
    if response.status != 200:
        raise BookiesCommandError(f"the bookie refused to turn read-only ({response.status}): {body}")


def bookies_autorecovery(_: Any, args: argparse.Namespace) -> Any:
    async def work(store: MetadataStore) -> dict[str, bool]:
        if args.switch != "status":
            await admin.set_autorecovery_enabled(store, args.switch == "enable")
        return {"enabled": await admin.autorecovery_enabled(store)}

    return _with_store(args, work)


def bookies_lost_bookie_recovery_delay(_: Any, args: argparse.Namespace) -> Any:
    async def work(store: MetadataStore) -> int:
        urm = LedgerUnderreplicationManager(store)
        if args.seconds is not None:
            if args.seconds < 0:
                raise BookiesCommandError("the delay must be >= 0 seconds")
            await urm.set_lost_bookie_recovery_delay_s(args.seconds)
        return await urm.lost_bookie_recovery_delay_s(default_s=0)

    return _with_store(args, work)
