"""Goal: the console's endpoints on a broker's web port — the page and its files, the cluster
document gathered from every broker and bookie, ``/admin/v2/bookies/all`` and
``/admin/v2/broker-stats/bookies`` — and that a broker which refuses, hangs, or cannot be
located is shown as such without holding the page past the request deadline.

Method: one in-process bookie on a memory:// store, plus the cookie of a bookie that is down;
"this" broker is a :class:`WebServer` on 127.0.0.1:0 serving the console and the real
broker-stats and bookie routes (its load report and bundles answered by a scripted route);
three more broker registrations: one on a port that refuses, one on a server that never
answers, one whose value is not JSON."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest_asyncio
from aiohttp import web

from minipulsar.bookkeeper.bookie_client import BookieClient
from minipulsar.bookkeeper.bookie_registry import BookieRegistry
from minipulsar.bookkeeper.quarantine import BookieQuarantine
from minipulsar.broker.admin_bookies import ClusterBookies, bookie_routes
from minipulsar.broker.broker_stats import broker_stats_routes
from minipulsar.broker.console.gather import BrokerRest, ClusterGatherer, SnapshotCache
from minipulsar.broker.console.routes import console_routes
from minipulsar.broker.namespace.directory import BROKERS_PATH, LEADER_PATH, BrokerDirectory
from minipulsar.broker.web_server import WebServer
from minipulsar.ledger_paths import cookie_path
from minipulsar.metadata import MetadataStore, open_metadata_store
from tests.support.bookie_service import running_service, service_config
from tests.support.broker_fakes import NoTopics
from tests.support.net import unused_port

CLUSTER = "standalone"
DOWN_BOOKIE = "10.9.9.9:3181"
REQUEST_TIMEOUT_S = 0.5
LOAD_REPORT = {"cpu": {"usage": 12.5, "limit": 200.0}, "memory": {"usage": 64.0, "limit": 1024.0}, "lastUpdate": 1}


class NothingOwned:
    def bundle_of_loaded(self, topic: Any) -> None:
        return None

    def owned_bundles(self) -> list[Any]:
        return []


async def register(store: MetadataStore, broker_id: str, value: bytes | None = None) -> None:
    urls = {"pulsarServiceUrl": "pulsar://127.0.0.1:1", "webServiceUrl": f"http://{broker_id}"}
    await store.put(f"{BROKERS_PATH}/{broker_id}", value or json.dumps(urls).encode(), ephemeral=True)


class Console:
    def __init__(self, base_url: str, broker_id: str, bookie_id: str, others: dict[str, str]) -> None:
        self.base_url, self.broker_id, self.bookie_id, self.others = base_url, broker_id, bookie_id, others

    async def get(self, path: str) -> tuple[int, dict[str, str], bytes]:
        async with aiohttp.ClientSession() as session:
            async with session.get(self.base_url + path, allow_redirects=False) as response:
                return response.status, dict(response.headers), await response.read()


@pytest_asyncio.fixture
async def console(tmp_path: Path, store_url: str) -> AsyncIterator[Console]:
    store = await open_metadata_store(store_url)
    hanging = WebServer()
    hang_port = hanging.bind("127.0.0.1", 0)
    never = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await never.wait()
        return web.Response()

    await hanging.serve([web.get("/{tail:.*}", hang)])
    server, rest, client = WebServer(), BrokerRest(REQUEST_TIMEOUT_S), BookieClient(timeout_s=5, max_frame_size=1 << 20)
    try:
        async with running_service(service_config(tmp_path, store_url)) as bookie:
            await store.put(cookie_path(DOWN_BOOKIE), b"a cookie of a bookie that is down")
            port = server.bind("127.0.0.1", 0)
            me = f"127.0.0.1:{port}"
            others = {
                "refusing": f"127.0.0.1:{unused_port()}",
                "hanging": f"127.0.0.1:{hang_port}",
                "unreadable": "127.0.0.1:9",
            }
            for broker_id in (me, others["refusing"], others["hanging"]):
                await register(store, broker_id)
            await register(store, others["unreadable"], b"not json")
            leader = {"brokerId": me, "serviceUrl": f"http://{me}"}
            await store.put(LEADER_PATH, json.dumps(leader).encode(), ephemeral=True)
            registry = BookieRegistry(store)
            registry.start()
            quarantine = BookieQuarantine(error_threshold_per_interval=5, quarantine_time_s=60, quarantine_ratio=1.0)
            bookies = ClusterBookies(store, registry, client, quarantine)
            gatherer = ClusterGatherer(CLUSTER, me, BrokerDirectory(store), bookies, rest)

            async def load_report(request: web.Request) -> web.Response:
                return web.json_response(LOAD_REPORT)

            async def owned(request: web.Request) -> web.Response:
                return web.json_response({"public/default/0x00000000_0xffffffff": {"is_active": True}})

            await server.serve(
                [
                    *console_routes(SnapshotCache(gatherer.gather)),
                    *bookie_routes(bookies),
                    *broker_stats_routes(NoTopics(), NothingOwned(), bookies),
                    web.get("/admin/v2/broker-stats/load-report", load_report),
                    web.get(f"/admin/v2/brokers/{CLUSTER}/{me}/ownedNamespaces", owned),
                ]
            )
            yield Console(f"http://{me}", me, bookie.bookie_id, others)
    finally:
        never.set()
        await server.close()
        await hanging.close()
        await rest.close()
        await client.close()
        await store.close()


async def test_the_document_lists_every_broker_answering_or_not_within_the_deadline(console: Console) -> None:
    started = time.monotonic()
    status, headers, body = await console.get("/console/api/cluster")
    elapsed_s = time.monotonic() - started
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert elapsed_s < REQUEST_TIMEOUT_S + 2.0, f"a hanging broker held the page for {elapsed_s:.1f} s"
    doc = json.loads(body)
    brokers = {b["brokerId"]: b for b in doc["brokers"]}
    assert set(brokers) == {console.broker_id, *console.others.values()}
    me = brokers[console.broker_id]
    assert me["reachable"] and me["errors"] == [] and me["leader"] and me["self"]
    assert me["load"]["cpu"] == LOAD_REPORT["cpu"] and me["bundles"] == ["public/default/0x00000000_0xffffffff"]
    refusing, hanging = brokers[console.others["refusing"]], brokers[console.others["hanging"]]
    assert not refusing["reachable"] and len(refusing["errors"]) == 4 and refusing["load"] is None
    assert not hanging["reachable"] and all("no answer within 0.5 s" in e for e in hanging["errors"])
    unreadable = brokers[console.others["unreadable"]]
    assert not unreadable["reachable"] and unreadable["webServiceUrl"] is None
    assert unreadable["errors"] == ["registration unreadable: no web service URL"]
    assert doc["leader"] == console.broker_id and doc["servedBy"] == console.broker_id and doc["errors"] == []


async def test_the_document_lists_every_bookie_with_its_load_report_or_why_not(console: Console) -> None:
    doc = json.loads((await console.get("/console/api/cluster"))[2])
    bookies = {b["bookieId"]: b for b in doc["bookies"]}
    assert set(bookies) == {console.bookie_id, DOWN_BOOKIE}
    up, down = bookies[console.bookie_id], bookies[DOWN_BOOKIE]
    assert up["state"] == "writable" and up["error"] is None and up["quarantinedBy"] == []
    assert {"journalWriteBytesPerSecond", "ledgerDirsUsedFraction", "addEntryLatencyMsP99"} <= up["info"].keys()
    assert up["pendingRequests"] == {console.broker_id: 0}, "as this broker's BookKeeper client sees it"
    assert down == {
        "bookieId": DOWN_BOOKIE,
        "state": "down",
        "error": "not registered",
        "info": None,
        "quarantinedBy": [],
        "pendingRequests": {console.broker_id: 0},
    }


async def test_bookies_all_and_broker_stats_bookies_have_their_shapes(console: Console) -> None:
    status, _, body = await console.get("/admin/v2/bookies/all")
    assert status == 200
    assert json.loads(body) == {"bookies": [{"bookieId": b} for b in sorted([console.bookie_id, DOWN_BOOKIE])]}
    status, _, body = await console.get("/admin/v2/broker-stats/bookies")
    assert status == 200
    assert json.loads(body) == {
        console.bookie_id: {"quarantined": False, "quarantineRemainingSeconds": None, "pendingRequests": 0}
    }, "only bookies this broker can reach: the registered ones"
    assert json.loads((await console.get("/admin/v2/broker-stats/topics"))[2]) == {}


async def test_the_page_and_only_its_own_files_are_served(console: Console) -> None:
    status, headers, _ = await console.get("/console")
    assert status == 308 and headers["Location"] == "/console/"
    status, headers, body = await console.get("/console/")
    assert status == 200 and headers["Content-Type"].startswith("text/html") and b"static/console.js" in body
    assert headers["Cache-Control"] == "no-cache"
    for name, kind in [
        ("console.js", "javascript"),
        ("console.css", "text/css"),
        ("vendor/uplot/uPlot.iife.min.js", "javascript"),
        ("vendor/uplot/uPlot.min.css", "text/css"),
    ]:
        status, headers, body = await console.get(f"/console/static/{name}")
        assert status == 200 and kind in headers["Content-Type"] and body, name
    for outside in ("../routes.py", "%2e%2e/routes.py", "vendor/../../gather.py", "nothing.js"):
        status, _, _ = await console.get(f"/console/static/{outside}")
        assert status == 404, outside
