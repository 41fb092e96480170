"""``minipulsar config``: the keys each server reads, as its conf file.

::

    minipulsar config list [broker|bookie|metastore]   print the file (default: all three)
    minipulsar config write [DIR]                       write broker.conf, bookkeeper.conf and
                                                        metastore.conf into DIR (default: conf)

The text is :func:`minipulsar.config.conf_text`: every key with its default, one line of
meaning, and where minipulsar's default differs from Pulsar's or BookKeeper's, a line saying
so. ``write`` is how the repository's ``conf/`` is regenerated. Exit codes: 0 done, 1 a file
could not be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from minipulsar.config import CONF_FILES, conf_file, conf_text

DEFAULT_DIR = "conf"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "config",
        help="print or write each server's conf file (every key, its default and meaning)",
        description="The keys each server reads, with their defaults, as conf files.",
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    verb = verbs.add_parser("list", help="print a server's conf file (default: all three)")
    verb.add_argument("role", nargs="?", choices=[conf.role for conf in CONF_FILES])
    verb.set_defaults(func=list_files)
    verb = verbs.add_parser("write", help=f"write every conf file into a directory (default: {DEFAULT_DIR})")
    verb.add_argument("directory", nargs="?", default=DEFAULT_DIR, type=Path)
    verb.set_defaults(func=write_files)


def list_files(args: argparse.Namespace) -> int:
    confs = CONF_FILES if args.role is None else (conf_file(args.role),)
    sys.stdout.write("\n".join(conf_text(conf) for conf in confs))
    return 0


def write_files(args: argparse.Namespace) -> int:
    directory: Path = args.directory
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for conf in CONF_FILES:
            path = directory / conf.name
            path.write_text(conf_text(conf), encoding="utf-8")
            print(path)
    except OSError as exc:
        print(f"error: cannot write {exc.filename or directory}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0
