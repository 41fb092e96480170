"""Reading Pulsar-style ``key=value`` files and command-line overrides into a config.

- ``#`` starts a comment line; blank lines are ignored; ``key=value`` with spaces trimmed;
- an empty value leaves the key as it is (its default, or what the file gave it), as Pulsar's
  loader does with the many ``key=`` lines its shipped files hold; for a key that may be
  unset, an empty value unsets it;
- a key is also read under its aliases; one source (the file, or the command line) that gives
  a key and an alias of it different values is a :class:`ConfigError` naming both;
- a key minipulsar does not know is logged as a warning by name and otherwise ignored (a real
  ``broker.conf`` holds hundreds of keys we do not use);
- a bad value for a known key raises :class:`ConfigError` naming the key and what it accepts;
- overrides (CLI flags) are applied after the file, with the same parsing and checks.
"""

from __future__ import annotations

import logging
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from minipulsar.config.settings import Alias, Setting, config_settings
from minipulsar.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

log = logging.getLogger("minipulsar.config")

T = TypeVar("T", bound="DataclassInstance")


def parse_config_text(text: str, source: str = "<config>") -> dict[str, str]:
    """``key=value`` lines to a dict; raises ConfigError on a line with no ``=``."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{source}:{number}: expected key=value, got {raw!r}")
        values[key.strip()] = value.strip()
    return values


def load_config(cls: type[T], path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> T:
    """Build ``cls`` from the file at ``path`` (optional), then ``overrides`` (keys as in the file).

    Raises:
        ConfigError: unreadable file, malformed line, a bad value for a known key, or a key
            and an alias of it given different values by the same source.
    """
    names = _names(cls)
    values: dict[str, Any] = {}
    if path is not None:
        values.update(_read(names, parse_config_text(_read_text(Path(path)), str(path)), str(path)))
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    values.update(_read(names, given, "the command line"))
    try:
        return cls(**values)
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class _Name:
    """What a name in a file stands for: a field, under its key or under an alias."""

    field: str
    hint: Any
    setting: Setting
    alias: Alias | None = None


def _names(cls: type[DataclassInstance]) -> dict[str, _Name]:
    """Every name ``cls`` reads (keys and aliases) → what it stands for."""
    hints = typing.get_type_hints(cls)
    names: dict[str, _Name] = {}
    for f, s in config_settings(cls):
        for name, alias in ((s.key, None), *((a.name, a) for a in s.aliases)):
            assert name not in names, f"{cls.__name__}: {name} names two settings"
            names[name] = _Name(f.name, hints[f.name], s, alias)
    return names


def _read(names: Mapping[str, _Name], raw: Mapping[str, Any], source: str) -> dict[str, Any]:
    """One source's ``name → value`` as field name → typed value, aliases resolved."""
    chosen: dict[str, tuple[str, Any, Any]] = {}  # field → (name given, value given, typed value)
    for name, value in raw.items():
        known = names.get(name)
        if known is None:
            log.warning("config key %r is not used by minipulsar; ignoring it", name)
            continue
        if _not_given(known, value):
            continue
        typed = _convert(name, value, known.hint, known.setting)
        earlier = chosen.get(known.field)
        if earlier is not None and earlier[2] != typed:
            raise ConfigError(
                f"{source}: {earlier[0]}={earlier[1]} and {name}={value} both set {known.setting.key}, "
                "to different values; keep one"
            )
        if known.alias is not None:
            log.info("config key %r is read as %r", name, known.setting.key)
        chosen[known.field] = (name, value, typed)
    return {field: typed for field, (_, _, typed) in chosen.items()}


def _not_given(known: _Name, value: Any) -> bool:
    """An empty value (or an alias's placeholder): the source leaves the key as it is."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    if known.alias is not None:
        return not text or text in known.alias.unset
    return not text and type(None) not in typing.get_args(known.hint)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")  # not the locale's: same file, same result
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read config file {path}: not UTF-8 text ({exc.reason})") from exc


def _convert(key: str, value: Any, hint: Any, s: Setting) -> Any:
    if type(None) in typing.get_args(hint):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
    try:
        typed = _parse(key, value, hint)
    except (ValueError, TypeError):
        raise ConfigError(f"{key}={value!r}: expected {_describe(hint)}") from None
    _check_range(key, typed, s)
    return typed


def _parse(key: str, value: Any, hint: Any) -> Any:
    """``value`` (text, or already of the type) as a ``hint``; ValueError/TypeError if it is none."""
    if hint is bool:
        return parse_bool(value)
    if hint is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else int(str(value).strip())
    if hint is float:
        number = float(value)
        if not math.isfinite(number):  # inf and nan pass every range check
            raise ValueError(value)
        return number
    if hint is str:
        return str(value)
    if typing.get_origin(hint) in (list, tuple):
        items = value if isinstance(value, (list, tuple)) else [s.strip() for s in str(value).split(",")]
        return tuple(str(item) for item in items if str(item))
    raise AssertionError(f"unsupported config type {hint} for {key}")


def parse_bool(value: Any) -> bool:
    """A config-style boolean: a bool, or true/yes/1/on and false/no/0/off in any case.

    Raises:
        ValueError: anything else.
    """
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise ValueError(value)


def _check_range(key: str, value: Any, s: Setting) -> None:
    if s.choices and value not in s.choices:
        raise ConfigError(f"{key}={value!r}: accepted values are {', '.join(s.choices)}")
    if s.min_value is not None and value < s.min_value:
        raise ConfigError(f"{key}={value!r}: must be >= {s.min_value}")
    if s.max_value is not None and value > s.max_value:
        raise ConfigError(f"{key}={value!r}: must be <= {s.max_value}")


def _describe(hint: Any) -> str:
    if hint is bool:
        return "true or false"
    if hint is int:
        return "an integer"
    if hint is float:
        return "a number"
    if typing.get_origin(hint) in (list, tuple):
        return "a comma-separated list"
    return "text"
