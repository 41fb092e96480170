"""``minipulsar autorecovery``: AutoRecovery as its own process (BookKeeper's ``bin/bookkeeper
autorecovery``): a vote in the auditor election, the Auditor while elected, and a replication
worker.

    minipulsar autorecovery --metadata-url metastore://127.0.0.1:6680 [--http-port 0]
                            [--config bookkeeper.conf] [--set key=value] [--log-level L]

It reads the bookie's config (``bookkeeper.conf``: ``lostBookieRecoveryDelay``,
``auditorPeriodicCheckInterval``, ``rereplicationEntryBatchSize``, ...). ``--http-port``
(``httpServerPort``) serves ``/metrics``. Its id in the election is
``autorecovery-<host>:<http port>``. Prints ``READY autorecovery host:port http=host:port``
(both the HTTP port) once started; SIGTERM/SIGINT: stop the worker, withdraw the vote, close
the metadata session, exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging

from minipulsar.bookkeeper.client import BookKeeperSettings
from minipulsar.bookkeeper.replication.autorecovery_main import AutoRecoveryMain
from minipulsar.bookkeeper.replication.settings import AutoRecoverySettings
from minipulsar.cli.common import (
    add_server_arguments,
    announce_ready,
    config_error_exit,
    load_server_config,
    run_server,
)
from minipulsar.config import BookieConfig
from minipulsar.errors import ConfigError
from minipulsar.metadata import open_metadata_store
from minipulsar.metrics import HttpServer

log = logging.getLogger("minipulsar")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "autorecovery",
        help="run AutoRecovery on its own (auditor election and a replication worker)",
        description="Run AutoRecovery: re-replicate the ledgers of lost bookies (keys as in bookkeeper.conf).",
    )
    parser.add_argument("--metadata-url", help="metadataServiceUri, e.g. metastore://127.0.0.1:6680")
    parser.add_argument("--http-port", type=int, help="httpServerPort for /metrics (0 = any free port)")
    parser.add_argument("--bind-address", help="bindAddress of the HTTP server (default 127.0.0.1)")
    add_server_arguments(parser, "bookkeeper.conf")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_server_config(
            BookieConfig,
            args,
            {
                "metadataServiceUri": args.metadata_url,
                "httpServerPort": args.http_port,
                "bindAddress": args.bind_address,
            },
        )
    except ConfigError as exc:
        return config_error_exit(exc)
    return run_server("autorecovery", lambda stop: serve(config, stop), args.log_level)


async def serve(config: BookieConfig, stop: asyncio.Event) -> int:
    http = HttpServer()
    port = await http.start(config.bind_address, config.http_port)
    store = await open_metadata_store(config.metadata_url, session_timeout_ms=config.session_timeout_ms)
    main = AutoRecoveryMain(
        store,
        f"autorecovery-{config.bind_address}:{port}",
        AutoRecoverySettings.from_bookie_config(config),
        BookKeeperSettings(health_check_enabled=False, max_frame_size=config.max_frame_size),
    )
    try:
        await main.start()
        announce_ready("autorecovery", config.bind_address, port, (config.bind_address, port))
        await stop.wait()
    finally:
        await main.stop()
        await store.close()
        await http.close()
    return 0
