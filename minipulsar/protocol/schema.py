"""Command schemas: one dataclass per command, validated field by field on decode.

A command class declares its wire name (``TYPE``) and its fields with type hints. The
decorator :func:`command` turns it into a slotted dataclass, records which Python types each
field accepts, and registers it by ``TYPE``. Decoding checks that required fields are present
and that every field has an accepted type, so a handler never sees a ``str`` where it expects
an ``int``; unknown extra keys are ignored, so a newer peer can add optional fields.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, ClassVar, TypeVar

from minipulsar.errors import InvalidCommandError

_MISSING = dataclasses.MISSING


class Command:
    """Base of every command. ``TYPE`` is the wire name carried in the ``t`` key."""

    __slots__ = ()
    TYPE: ClassVar[str] = ""
    RESPONSE: ClassVar[bool] = False
    """True when the command answers a request carrying the same ``id``."""
    _FIELDS: ClassVar[tuple[tuple[str, tuple[type, ...], Any], ...]] = ()

    def to_wire(self) -> dict[str, Any]:
        """The msgpack map for this command; ``None`` fields are left out."""
        wire: dict[str, Any] = {"t": self.TYPE}
        for name, _, _ in self._FIELDS:
            value = getattr(self, name)
            if value is not None:
                wire[name] = value
        return wire


REGISTRY: dict[str, type[Command]] = {}

C = TypeVar("C", bound=type[Command])


def command(type_name: str, *, response: bool = False):
    """Make ``cls`` a slotted dataclass command named ``type_name`` on the wire."""

    def wrap(cls: C) -> C:
        cls = dataclasses.dataclass(slots=True)(cls)
        cls.TYPE = type_name
        cls.RESPONSE = response
        hints = typing.get_type_hints(cls)
        cls._FIELDS = tuple(
            (f.name, _accepted_types(hints[f.name]), _default_of(f)) for f in dataclasses.fields(cls)
        )
        assert type_name not in REGISTRY, f"duplicate command {type_name}"
        REGISTRY[type_name] = cls
        return cls

    return wrap


def _default_of(f: dataclasses.Field) -> Any:
    if f.default is not _MISSING:
        return f.default
    if f.default_factory is not _MISSING:
        return f.default_factory
    return _MISSING


def _accepted_types(hint: Any) -> tuple[type, ...]:
    """The runtime types a field accepts; ``X | None`` adds ``NoneType``, ``float`` adds ``int``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        accepted: tuple[type, ...] = ()
        for arg in typing.get_args(hint):
            accepted += _accepted_types(arg)
        return accepted
    if hint is Any:
        return (object,)
    if hint is float:
        return (float, int)
    if hint is type(None):
        return (type(None),)
    return (origin or hint,)


def decode_command(wire: Any) -> Command:
    """Build the command described by a decoded msgpack map.

    Raises:
        InvalidCommandError: not a map, unknown ``t``, a missing field or a wrong type.
    """
    if not isinstance(wire, dict):
        raise InvalidCommandError(f"a frame must hold a map, got {type(wire).__name__}")
    request_id = wire.get("id")
    if not isinstance(request_id, int) or isinstance(request_id, bool):
        request_id = None
    type_name = wire.get("t")
    # Check the type before the lookup: an unhashable ``t`` (a list, a map) would make the
    # dict lookup raise TypeError instead of a ProtocolError.
    cls = REGISTRY.get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        # Bounded: the text is logged and echoed in the ERROR, and ``t`` may be megabytes.
        raise InvalidCommandError(f"unknown command {repr(type_name)[:80]}", request_id)
    values = []
    for name, accepted, default in cls._FIELDS:
        value = wire.get(name, _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                raise InvalidCommandError(f"{cls.TYPE}: missing field {name!r}", request_id)
            value = default() if callable(default) else default
        elif not _is_accepted(value, accepted):
            raise InvalidCommandError(
                f"{cls.TYPE}.{name}: expected {_names(accepted)}, got {type(value).__name__}",
                request_id,
            )
        values.append(value)
    return cls(*values)


def _is_accepted(value: Any, accepted: tuple[type, ...]) -> bool:
    # bool is an int subclass, but a peer sending true for an entry id is a bug: bool is
    # only accepted where the schema names it (or takes Any).
    if isinstance(value, bool):
        return bool in accepted or object in accepted
    return isinstance(value, accepted)


def _names(accepted: tuple[type, ...]) -> str:
    return " or ".join("None" if t is type(None) else t.__name__ for t in accepted)
