"""The shipped ``conf/*.conf`` files, generated from the settings.

- one :class:`ConfFile` per server: ``conf/broker.conf``, ``conf/bookkeeper.conf``,
  ``conf/metastore.conf``;
- :func:`conf_text` is the only source of their text: every setting of the server's config in
  declaration order, each with its meaning, its upstream note and aliases, and its default as
  :func:`~minipulsar.config.load_config` reads it back (so the file loads to the defaults);
- ``minipulsar config write conf`` rewrites them, and a unit test keeps them equal to
  :func:`conf_text`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from minipulsar.config.bookie import BookieConfig
from minipulsar.config.broker import BrokerConfig
from minipulsar.config.metastore import MetastoreConfig
from minipulsar.config.settings import config_settings

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

REGENERATE = "minipulsar config write conf"
"""The command that rewrites the shipped files (run in the repository's root)."""


@dataclass(frozen=True, slots=True)
class ConfFile:
    """One shipped ``conf/`` file: the server that reads it and the upstream files it follows."""

    role: str
    """The server: ``minipulsar <role> --config conf/<name>``."""
    name: str
    config: type[DataclassInstance]
    follows: str
    """The upstream files whose keys, and defaults unless a key says otherwise, it follows."""


CONF_FILES = (
    ConfFile("broker", "broker.conf", BrokerConfig, "Pulsar 4.0's conf/broker.conf"),
    ConfFile(
        "bookie", "bookkeeper.conf", BookieConfig, "Pulsar 4.0's conf/bookkeeper.conf and BookKeeper 4.17's defaults"
    ),
    ConfFile("metastore", "metastore.conf", MetastoreConfig, "ZooKeeper's zoo.cfg (Pulsar's conf/zookeeper.conf)"),
)


def conf_file(role: str) -> ConfFile:
    """The shipped file of ``role`` (one of :data:`CONF_FILES`' roles)."""
    return next(conf for conf in CONF_FILES if conf.role == role)


def conf_text(conf: ConfFile) -> str:
    """The text of ``conf``: a header, then every key with its default and what it means."""
    lines = [
        f"# {conf.name}: every key the minipulsar {conf.role} reads, with its default.",
        "#",
        f"# Keys and defaults follow {conf.follows}.",
        "# Where minipulsar's default differs, or the key is minipulsar's own, the line under the",
        "# key's meaning says so. A key not listed here is logged as a warning and ignored; an",
        "# empty value leaves the key at its default.",
        "#",
        f"# Generated from minipulsar/config/; regenerate with: {REGENERATE}",
    ]
    for f, s in config_settings(conf.config):
        lines += ["", f"# {s.doc}"]
        if s.upstream is not None:
            lines.append(f"# {s.upstream}")
        if s.aliases:
            lines.append(f"# Also read as: {', '.join(a.name for a in s.aliases)}.")
        lines.append(f"{s.key}={conf_value(f.default)}")
    return "\n".join(lines) + "\n"


def conf_value(value: Any) -> str:
    """``value`` as a conf file spells it: what the loader reads back as ``value``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)
