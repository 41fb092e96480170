"""A config field and what it says about its key.

- each field of a server's config is a :func:`setting`: a dataclass field whose metadata holds
  one :class:`Setting`: the key as Pulsar, BookKeeper or ZooKeeper spell it, what it means in
  one line, upstream's default where minipulsar's differs, and the checks its values must pass;
- a key may also be read under :class:`Alias` names: spellings upstream deprecated but still
  reads, and that its shipped files use;
- a name (key or alias) stands for one field of its config.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

SETTING = "minipulsar.setting"
"""The field-metadata key a :class:`Setting` is kept under."""


@dataclass(frozen=True, slots=True)
class Alias:
    """Another name a key is read under: a spelling upstream deprecated but still reads."""

    name: str
    unset: tuple[str, ...] = ()
    """Values that mean "not given" under this name, besides an empty one: the placeholder an
    upstream file ships (Pulsar's broker.conf: ``zooKeeperSessionTimeoutMillis=-1``)."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One config key: its names, what it means, and the checks its values must pass."""

    key: str
    doc: str = ""
    """What the key means, in one line (the conf files print it above the key)."""
    upstream: str | None = None
    """One line: upstream's default where minipulsar's differs, or that the key is minipulsar's
    own (the conf files print it under :attr:`doc`)."""
    aliases: tuple[Alias, ...] = ()
    choices: tuple[str, ...] | None = None
    min_value: float | None = None
    max_value: float | None = None


def setting(
    key: str,
    default: Any,
    *,
    doc: str = "",
    upstream: str | None = None,
    aliases: tuple[Alias, ...] = (),
    choices: tuple[str, ...] | None = None,
    min_value: float | None = None,
    max_value: float | None = None,
) -> Any:
    """A config field read from ``key`` (or an alias); ``choices`` / bounds are checked at load time."""
    return field(
        default=default, metadata={SETTING: Setting(key, doc, upstream, aliases, choices, min_value, max_value)}
    )


def config_settings(cls: type[DataclassInstance]) -> list[tuple[dataclasses.Field[Any], Setting]]:
    """Every setting field of ``cls`` with its :class:`Setting`, in declaration order."""
    return [(f, f.metadata[SETTING]) for f in dataclasses.fields(cls) if SETTING in f.metadata]


def config_keys(cls: type[DataclassInstance]) -> dict[str, Any]:
    """Key → default for every setting of ``cls`` (for docs and ``--help``)."""
    return {s.key: f.default for f, s in config_settings(cls)}
