"""``minipulsar bookie``: a storage server.

    minipulsar bookie --port 3181 --http-port 8000 --journal-dir DIR [--journal-dir DIR2 ...]
                      --ledger-dirs DIR[,DIR2] --metadata-url metastore://127.0.0.1:6680
                      [--bind-address A] [--advertised-address A]
                      [--config bookkeeper.conf] [--set key=value] [--log-level L]

Flags map to ``bookkeeper.conf`` keys: ``--port`` → ``bookiePort``, ``--http-port`` →
``httpServerPort``, ``--journal-dir`` → ``journalDirectories``, ``--ledger-dirs`` →
``ledgerDirectories``, ``--metadata-url`` → ``metadataServiceUri``, ``--bind-address`` →
``bindAddress``, ``--advertised-address`` → ``advertisedAddress``. Port 0 picks a free port;
the bookie id is ``host:port`` of the bound port. Prints ``READY bookie host:port
http=host:port`` once registered. SIGTERM/SIGINT: stop accepting, answer every add in
flight, close the journals, delete the registration, exit 0 (also when asked while starting:
the bookie then stops before it registers). A bookie that shut itself down (a journal failed;
or no ledger dir is writable, with ``readOnlyModeEnabled=false``) exits with 5, BookKeeper's
``ExitCode.BOOKIE_EXCEPTION``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging

from minipulsar.cli.common import (
    EXIT_FAILURE,
    add_server_arguments,
    announce_ready,
    config_error_exit,
    load_server_config,
    run_server,
    tune_gc,
)
from minipulsar.config import BookieConfig
from minipulsar.errors import ConfigError

log = logging.getLogger("minipulsar")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bookie",
        help="run a bookie (storage server)",
        description="Run a bookie: a journal with group commit and ledger storage (keys as in "
        "BookKeeper's bookkeeper.conf).",
    )
    parser.add_argument("--port", type=int, help="bookiePort (default 3181; 0 = any free port)")
    parser.add_argument(
        "--http-port", type=int, help="httpServerPort for /metrics and /api/v1/bookie/info (default 8000; 0 = any)"
    )
    parser.add_argument(
        "--journal-dir",
        action="append",
        default=None,
        metavar="DIR",
        help="journalDirectories; repeat for several journals (put them on a fast fsync disk)",
    )
    parser.add_argument("--ledger-dirs", metavar="DIR[,DIR2]", help="ledgerDirectories, comma-separated")
    parser.add_argument("--metadata-url", help="metadataServiceUri, e.g. metastore://127.0.0.1:6680")
    parser.add_argument("--bind-address", help="bindAddress (default 127.0.0.1)")
    parser.add_argument(
        "--advertised-address", help="advertisedAddress: host part of the bookie id (default: the bind address)"
    )
    add_server_arguments(parser, "bookkeeper.conf")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_server_config(
            BookieConfig,
            args,
            {
                "bookiePort": args.port,
                "httpServerPort": args.http_port,
                "journalDirectories": ",".join(args.journal_dir) if args.journal_dir else None,
                "ledgerDirectories": args.ledger_dirs,
                "metadataServiceUri": args.metadata_url,
                "bindAddress": args.bind_address,
                "advertisedAddress": args.advertised_address,
            },
        )
    except ConfigError as exc:
        return config_error_exit(exc)
    return run_server("bookie", lambda stop: serve(config, stop), args.log_level, config.diagnostics_file)


async def serve(config: BookieConfig, stop: asyncio.Event) -> int:
    """Start, serve until ``stop`` is set, stop. Returns the exit code: 0 after a requested
    stop (also one asked while starting), :data:`EXIT_FAILURE` when the bookie shut itself down
    (a journal failed; or no writable ledger dir, with readOnlyModeEnabled=false)."""
    # The CLI is the only place that imports bookie code.
    from minipulsar.bookie.bookie_server import BookieServer, StartAborted

    service = BookieServer(config, stop=stop)
    try:
        try:
            await service.start()
        except StartAborted:
            log.info("bookie stopped while starting")
            return EXIT_FAILURE if service.failure is not None else 0
        tune_gc()  # after start-up: see its docstring
        announce_ready("bookie", service.host, service.port, (service.host, service.http_port))
        await stop.wait()
    finally:
        await service.stop()
    return EXIT_FAILURE if service.failure is not None else 0
