"""Reading Pulsar-style ``key=value`` files and command-line overrides into a config.

- ``#`` starts a comment line; blank lines are ignored; ``key=value`` with spaces trimmed;
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
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from minipulsar.config.settings import Setting, config_settings
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
        ConfigError: unreadable file, malformed line, or a bad value for a known key.
    """
    raw: dict[str, Any] = {}
    if path is not None:
        raw.update(parse_config_text(_read_text(Path(path)), str(path)))
    raw.update({k: v for k, v in (overrides or {}).items() if v is not None})
    fields_by_key = {s.key: (f.name, s) for f, s in config_settings(cls)}
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        known = fields_by_key.get(key)
        if known is None:
            log.warning("config key %r is not used by minipulsar; ignoring it", key)
            continue
        name, s = known
        kwargs[name] = _convert(key, value, hints[name], s)
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc)) from exc


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
        if value is None or (isinstance(value, str) and value == ""):
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
