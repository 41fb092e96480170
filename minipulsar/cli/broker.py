"""``minipulsar broker``: serve topics to clients, store them on bookies."""

from __future__ import annotations

import argparse
import asyncio

from minipulsar.cli.common import (
    add_server_arguments,
    announce_ready,
    config_error_exit,
    load_server_config,
    run_server,
    tune_gc,
)
from minipulsar.config import BrokerConfig
from minipulsar.errors import ConfigError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "broker", help="run a broker", description="Run a broker (config keys as in Pulsar's broker.conf)."
    )
    parser.add_argument("--port", type=int, help="client port (brokerServicePort, default 6650; 0 = any)")
    parser.add_argument("--http-port", type=int, help="admin + /metrics port (webServicePort, default 8080)")
    parser.add_argument("--metadata-url", help="metadataStoreUrl, e.g. metastore://127.0.0.1:6680")
    parser.add_argument("--bind-address", help="bindAddress (default 127.0.0.1)")
    parser.add_argument("--advertised-address", help="advertisedAddress (default: the bind address)")
    add_server_arguments(parser, "broker.conf")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from minipulsar.broker.service import BrokerService  # the CLI is the only place that imports broker code

    try:
        config = load_server_config(
            BrokerConfig,
            args,
            {
                "brokerServicePort": args.port,
                "webServicePort": args.http_port,
                "metadataStoreUrl": args.metadata_url,
                "bindAddress": args.bind_address,
                "advertisedAddress": args.advertised_address,
            },
        )
    except ConfigError as error:
        return config_error_exit(error)

    async def serve(stop: asyncio.Event) -> None:
        service = BrokerService(config)
        try:
            await service.start()
            tune_gc()  # after start-up: see its docstring
            announce_ready("broker", service.host, service.port, (service.host, service.http_port))
            await stop.wait()
        finally:
            await service.close()

    return run_server("broker", serve, args.log_level, config.diagnostics_file)
