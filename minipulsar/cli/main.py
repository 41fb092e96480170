"""``minipulsar``: one entry point, one sub-command module each (see ``SUBCOMMANDS``).

A sub-command module exposes ``add_parser(subparsers)``, which registers its parser and sets
``func`` (taking the parsed args, returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from minipulsar.cli.common import tune_gc

SUBCOMMANDS = (
    "minipulsar.cli.standalone",
    "minipulsar.cli.metastore",
    "minipulsar.cli.bookie",
    "minipulsar.cli.autorecovery",
    "minipulsar.cli.broker",
    "minipulsar.cli.client_verbs",
    "minipulsar.cli.admin",
    "minipulsar.cli.perf.command",
    "minipulsar.cli.config",
    "minipulsar.cli.lab",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="minipulsar",
        description="A miniature Apache Pulsar / BookKeeper: servers, standalone cluster and client tools.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(name).add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if argv is None:  # the process's own command line (not a caller's in-process call)
        tune_gc()  # every sub-command's modules are imported by now
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
