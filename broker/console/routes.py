"""The console's HTTP routes on the broker's web port.

- ``GET /console`` → 308 to ``/console/``;
- ``GET /console/`` → the page (``static/index.html``);
- ``GET /console/static/{file}`` → one of the files under ``static/`` (the page's script and
  style sheet, and the vendored chart library), with its content type;
- ``GET /console/api/cluster`` → the cluster document (:mod:`broker.console.view`), gathered
  by :class:`~broker.console.gather.ClusterGatherer` through a
  :class:`~broker.console.gather.SnapshotCache`.

Invariants:

- only files that exist under ``static/`` when the routes are built are served: a name is a key
  of that table, never joined onto a path, so no request reaches another file;
- files are answered with ``Cache-Control: no-cache`` (revalidated, so an upgraded broker's page
  is seen at once) and sent by aiohttp's ``FileResponse`` (no blocking read on the loop).
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from minipulsar.broker.console.gather import SnapshotCache

STATIC_DIR = Path(__file__).resolve().parent / "static"
NO_CACHE = {"Cache-Control": "no-cache"}


def static_files(root: Path = STATIC_DIR) -> dict[str, Path]:
    """Every file under ``root`` by its ``/``-separated relative name."""
    return {path.relative_to(root).as_posix(): path for path in sorted(root.rglob("*")) if path.is_file()}


def console_routes(snapshots: SnapshotCache, root: Path = STATIC_DIR) -> list[web.RouteDef]:
    files = static_files(root)
    index = files["index.html"]

    async def to_console(request: web.Request) -> web.StreamResponse:
        raise web.HTTPPermanentRedirect("/console/")

    async def page(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(index, headers=NO_CACHE)

    async def static(request: web.Request) -> web.StreamResponse:
        path = files.get(request.match_info["name"])
        if path is None:
            return web.json_response({"reason": "no such file"}, status=404)
        return web.FileResponse(path, headers=NO_CACHE)

    async def cluster(request: web.Request) -> web.Response:
        return web.json_response(await snapshots.get(), headers=NO_CACHE)

    return [
        web.get("/console", to_console),
        web.get("/console/", page),
        web.get("/console/static/{name:.+}", static),
        web.get("/console/api/cluster", cluster),
    ]
