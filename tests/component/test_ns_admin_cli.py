"""Goal: ``minipulsar admin`` refuses malformed names before any request (exit 2), names an
unreachable broker (exit 1), and follows a 307 with the same method, as pulsar-admin does.
Method: the CLI's functions in-process; a tiny aiohttp server that redirects a PUT."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from minipulsar.cli.admin import AdminClient, AdminError
from tests.support.cli import run_admin


def admin_without_broker(*argv: str) -> tuple[int, str, str]:
    """``minipulsar admin`` against an address nobody serves: what it says before it connects."""
    return run_admin("--admin-url", "http://127.0.0.1:1", *argv)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["namespaces", "bundles", "public"], "invalid namespace 'public'"),
        (["namespaces", "create", "a/b/c"], "invalid namespace 'a/b/c'"),
        (["tenants", "create", "bad name"], "invalid tenant 'bad name'"),
        (["namespaces", "split-bundle", "public/default", "--bundle", "0x0_0x4"], "invalid bundle '0x0_0x4'"),
        (["namespaces", "unload", "public/default", "-d", "h:1"], "--destination-broker needs --bundle"),
        (["topics", "lookup", "persistent://only/two"], "invalid topic name"),
    ],
)
def test_malformed_names_exit_2_without_a_request(argv: list[str], message: str) -> None:
    code, _, err = admin_without_broker(*argv)
    assert code == 2 and message in err


def test_an_unreachable_broker_is_named() -> None:
    code, _, err = admin_without_broker("tenants", "list")
    assert code == 1 and "cannot reach the broker at http://127.0.0.1:1" in err


async def test_a_put_follows_a_307_to_the_owner_with_its_method_and_query() -> None:
    seen: list[str] = []

    async def owner(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path_qs}")
        return web.json_response(["0x00000000_0x80000000", "0x80000000_0xffffffff"])

    async def elsewhere(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(f"http://127.0.0.1:{ports['owner']}{request.path_qs}")

    ports: dict[str, int] = {}
    runners = []
    for name, handler in (("owner", owner), ("other", elsewhere)):
        app = web.Application()
        app.router.add_put("/admin/v2/namespaces/t/ns/{bundle}/split", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        ports[name] = runner.addresses[0][1]
        runners.append(runner)
    try:
        client = AdminClient(f"http://127.0.0.1:{ports['other']}", 10)
        halves = await asyncio.to_thread(
            client.request, "PUT", "/admin/v2/namespaces/t/ns/0x00000000_0xffffffff/split", None, {"unload": "true"}
        )
        assert halves == ["0x00000000_0x80000000", "0x80000000_0xffffffff"]
        assert seen == ["PUT /admin/v2/namespaces/t/ns/0x00000000_0xffffffff/split?unload=true"]
        with pytest.raises(AdminError, match="HTTP 404"):
            await asyncio.to_thread(client.request, "GET", "/nothing/here")
    finally:
        for runner in runners:
            await runner.cleanup()
