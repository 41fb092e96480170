"""The servers tests start as real processes: their command lines, and a bookie beside its
own metastore.

- Every server listens on port 0 unless given a port (a restart on the same port passes the old
  one), keeps its data under the test's ``root`` and logs to ``<root>/logs/<name>.log``.
- ``settings`` become ``--set key=value`` flags (booleans as ``true``/``false``) after the
  defaults below, so a test's setting wins.
- A bookie's defaults keep tests quick: a short metadata session (``zkTimeout``) and small
  preallocated journal files.
- :func:`bookie_beside_metastore` stops both (TERM, then KILL) when its context exits, whatever
  happened inside; a start that fails raises with the log's tail.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

from tests.support.process import ServerProcess, started

BOOKIE_DEFAULTS: Mapping[str, object] = {"zkTimeout": 2000, "journalPreAllocSizeMB": 1}
"""Every test bookie's settings unless the test sets them: a 2 s session, 1 MB journal files."""


def set_flags(settings: Mapping[str, object]) -> list[str]:
    """``--set key=value`` for each setting, in order."""
    return [
        flag
        for key, value in settings.items()
        for flag in ("--set", f"{key}={str(value).lower() if isinstance(value, bool) else value}")
    ]


def metastore_process(
    root: Path,
    *,
    port: int = 0,
    settings: Mapping[str, object] | None = None,
    name: str = "metastore",
    data_dir: Path | None = None,
) -> ServerProcess:
    """A metastore keeping its data in ``data_dir`` (default ``root/<name>``), /metrics on any free port."""
    args = [
        "--port",
        str(port),
        "--http-port",
        "0",
        "--data-dir",
        str(data_dir or root / name),
        *set_flags(settings or {}),
    ]
    return ServerProcess("metastore", args, root / "logs" / f"{name}.log")


def bookie_process(
    root: Path,
    metadata_url: str,
    *,
    port: int = 0,
    journals: Sequence[str | Path] = ("journal",),
    ledgers: Sequence[str | Path] = ("ledgers",),
    settings: Mapping[str, object] | None = None,
    defaults: Mapping[str, object] = BOOKIE_DEFAULTS,
    name: str = "bookie",
    args: Sequence[str] = (),
) -> ServerProcess:
    """A bookie registered at ``metadata_url``, serving HTTP on a free port.

    Args:
        journals: its journal directories (one ``--journal-dir`` each), relative to ``root``
            unless absolute.
        ledgers: its ledger directories (``--ledger-dirs`` a,b), likewise.
        settings: bookkeeper.conf keys over ``defaults`` (:data:`BOOKIE_DEFAULTS`).
        args: further command-line flags (``--log-level DEBUG``).
    """
    flags = ["--port", str(port), "--http-port", "0", "--metadata-url", metadata_url]
    flags += [arg for journal in journals for arg in ("--journal-dir", str(root / journal))]
    flags += ["--ledger-dirs", ",".join(str(root / ledger) for ledger in ledgers)]
    flags += set_flags({**defaults, **(settings or {})})
    return ServerProcess("bookie", [*flags, *args], root / "logs" / f"{name}.log")


@contextlib.asynccontextmanager
async def bookie_beside_metastore(
    root: Path, settings: Mapping[str, object] | None = None
) -> AsyncIterator[ServerProcess]:
    """A started metastore and a started :func:`bookie_process` with ``settings`` registered in it;
    yields the bookie."""
    metastore = metastore_process(root)
    async with started(metastore):
        async with started(bookie_process(root, metastore.url, settings=settings)) as (bookie,):
            yield bookie
