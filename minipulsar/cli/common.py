"""What every server entry point shares: logging, config loading, READY line, signals.

A server process prints exactly one line on stdout once it serves::

    READY <role> <host>:<port> [http=<host>:<port>]

and logs everything else to stderr. Tests, the standalone launcher and ``docker compose``
wait for that line. SIGTERM and SIGINT stop the process cleanly (exit code 0). A server that
cannot start exits with 2; one that stopped itself on a failure while serving (a bookie whose
disks failed, with read-only mode disabled) with :data:`EXIT_FAILURE`, so that a supervisor
restarting on failure does restart it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from minipulsar import diagnostics, gc_metrics
from minipulsar.config import load_config

if TYPE_CHECKING:
    from _typeshed import DataclassInstance
from minipulsar.errors import ConfigError, MiniPulsarError
from minipulsar.net.loop import run, tune_malloc

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

log = logging.getLogger("minipulsar")

T = TypeVar("T", bound="DataclassInstance")

LOG_FORMAT = "%(asctime)s %(levelname)-5s %(name)s: %(message)s"
EXIT_FAILURE = 5
"""Exit code of a server that stopped itself on a failure, not a requested stop (BookKeeper's
``ExitCode.BOOKIE_EXCEPTION``)."""


GC_THRESHOLDS = (50_000, 50, 100)
"""``gc.set_threshold``: net allocations between two young collections (CPython: 700), young
collections between two of the middle generation (10), middle ones between full ones (10)."""


def tune_gc() -> None:
    """The cyclic GC of a minipulsar process: every command once it has imported its code,
    a server again once it serves (everything allocated by then lives as long as the process).

    - ``gc.freeze()``: what exists now (modules, config, the started server) moves to the
      permanent generation, which no collection scans again. Without it a full collection
      rescans the whole heap while holding the GIL: 74 ms in the bench process during a
      10k msg/s run, stalling every message in flight (the latency timeline's ``gc`` event);
    - :data:`GC_THRESHOLDS`: the messages and adds in flight (thousands, ~10 objects each)
      are not garbage, only rescanned and promoted by every collection; with CPython's
      defaults the collector took ~7 % of a bookie's CPU, and ~17 % of the broker's with
      batching off (mostly full collections). With these, broker CPU per unbatched entry
      fell from 38 to 33 µs. Cycles are still collected, so memory stays bounded.
    """
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def setup_logging(level: str | None = None) -> None:
    level = (level or os.environ.get("MINIPULSAR_LOG_LEVEL") or "INFO").upper()
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr, force=True)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def add_server_arguments(parser: argparse.ArgumentParser, config_name: str) -> None:
    """Flags every server takes: its config file, generic overrides, log level."""
    parser.add_argument("--config", metavar="FILE", help=f"a {config_name} file of key=value lines")
    parser.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="overrides",
        help="override one config key (repeatable); applied after --config and the flags",
    )
    parser.add_argument("--log-level", default=None, help="DEBUG, INFO (default), WARNING, ERROR")


def load_server_config(cls: type[T], args: argparse.Namespace, flags: dict[str, Any]) -> T:
    """Config file, then the dedicated flags (``flags``: key → value or None), then ``--set``."""
    overrides = {k: v for k, v in flags.items() if v is not None}
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        overrides[key.strip()] = value.strip()
    return load_config(cls, Path(args.config) if args.config else None, overrides)


def announce_ready(role: str, host: str, port: int, http: tuple[str, int] | None = None) -> None:
    line = f"READY {role} {host}:{port}"
    if http is not None:
        line += f" http={http[0]}:{http[1]}"
    print(line, flush=True)
    log.info("%s ready on %s:%d%s", role, host, port, f", http on {http[0]}:{http[1]}" if http else "")


def run_server(
    role: str,
    serve: Callable[[asyncio.Event], Awaitable[int | None]],
    log_level: str | None,
    diagnostics_file: str | None = None,
) -> int:
    """Run ``serve(stop_event)`` until it returns; SIGTERM/SIGINT set the event.

    ``diagnostics_file`` (``minipulsarDiagnosticsFile``): record stall events into it
    (:mod:`minipulsar.diagnostics`) while the process runs. Every server times its garbage
    collections for /metrics (:mod:`minipulsar.gc_metrics`).

    ``serve`` starts the server, announces READY, awaits the event, and shuts down; it may
    return an exit code (:data:`EXIT_FAILURE` after stopping itself on a failure).
    Configuration and start-up errors end the process with exit code 2 and one clear line.
    """
    setup_logging(log_level)
    tune_malloc()
    gc_metrics.install()

    async def main() -> int | None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if not diagnostics_file:
            return await serve(stop)
        monitor = loop.create_task(diagnostics.run_monitor(Path(diagnostics_file), role))
        try:
            return await serve(stop)
        finally:
            monitor.cancel()
            await asyncio.gather(monitor, return_exceptions=True)

    try:
        code = run(main()) or 0
    except (ConfigError, MiniPulsarError, OSError) as exc:
        log.error("%s cannot start: %s", role, exc)
        return 2
    if code:
        log.error("%s stopped on a failure (exit code %d)", role, code)
    else:
        log.info("%s stopped", role)
    return code


def config_error_exit(exc: ConfigError) -> int:
    setup_logging()
    log.error("bad configuration: %s", exc)
    return 2
