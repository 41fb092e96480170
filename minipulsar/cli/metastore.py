"""``minipulsar metastore``: the built-in metadata store server.

    minipulsar metastore --port 6680 --http-port 7000 --data-dir data/metastore [--bind-address A]
                         [--config metastore.conf] [--set key=value] [--log-level L]

Flags map to ``metastore.conf`` keys (ZooKeeper's names): ``--port`` → ``clientPort``,
``--http-port`` → ``metricsProvider.httpPort`` (``/metrics``, :mod:`minipulsar.metadata.server_stats`),
``--data-dir`` → ``dataDir``, ``--bind-address`` → ``bindAddress``. It prints
``READY metastore host:port http=host:port`` once it serves. SIGTERM/SIGINT stop it
cleanly: connections are closed, every accepted change is fsynced, exit code 0.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from minipulsar.cli.common import (
    add_server_arguments,
    announce_ready,
    config_error_exit,
    load_server_config,
    run_server,
)
from minipulsar.config import MetastoreConfig
from minipulsar.errors import ConfigError, PersistenceError
from minipulsar.metadata.server import MetastoreServer
from minipulsar.metadata.server_stats import MetastoreCollector
from minipulsar.metrics import HttpServer


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "metastore",
        help="run the built-in metadata store server",
        description="The built-in metadata store: versioned keys, sessions, ephemeral keys and "
        "watches, persisted to a write-ahead log and snapshots in --data-dir.",
    )
    parser.add_argument("--port", type=int, default=None, help="client port (clientPort, default 6680; 0: any)")
    parser.add_argument(
        "--http-port", type=int, default=None, help="/metrics port (metricsProvider.httpPort, default 7000; 0: any)"
    )
    parser.add_argument("--data-dir", default=None, help="WAL and snapshot directory (dataDir)")
    parser.add_argument("--bind-address", default=None, help="address to listen on (bindAddress, default 127.0.0.1)")
    add_server_arguments(parser, "metastore.conf")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_server_config(
            MetastoreConfig,
            args,
            {
                "clientPort": args.port,
                "metricsProvider.httpPort": args.http_port,
                "dataDir": args.data_dir,
                "bindAddress": args.bind_address,
            },
        )
    except ConfigError as exc:
        return config_error_exit(exc)
    return run_server("metastore", lambda stop: serve(config, stop), args.log_level)


async def serve(config: MetastoreConfig, stop: asyncio.Event) -> None:
    """Serve until ``stop`` is set (or the WAL fails, which ends the process with an error)."""
    server = MetastoreServer(config)
    http = HttpServer()
    collector = MetastoreCollector(server)
    try:
        host, port = await server.start()
        http_port = await http.start(config.bind_address, config.http_port)
        announce_ready("metastore", host, port, (host, http_port))
        assert server.failed is not None
        stopping = asyncio.ensure_future(stop.wait())
        waited: list[asyncio.Future[Any]] = [stopping, server.failed]
        await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
    finally:
        await http.close()
        collector.unregister()
        await server.stop()
    if server.failed.done():
        raise PersistenceError(f"write-ahead log failed: {server.failed.result()}")
