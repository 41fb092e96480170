"""Command schemas: one dataclass per command, validated field by field on decode.

A command class declares its wire name (``TYPE``) and its fields with type hints. The
decorator :func:`command` turns it into a slotted dataclass, records which Python types each
field accepts (and, for a ``Literal`` field, which values), and registers it by ``TYPE``.

Invariants of :func:`decode_command`:
- required fields are present and every field has an accepted type, so a handler never sees
  a ``str`` where it expects an ``int``; ``bool`` is never accepted for ``int``;
- a ``Literal`` field (a wire enumeration: ``sub_type``, ``ack_type`` …) holds one of its
  values, so a handler never sees ``"Sharde"``;
- anything else is a :class:`MalformedCommandError` carrying the request's ``id`` when the
  map has a usable one; unknown extra keys are ignored, so a newer peer can add optional fields.

Speed: each class also gets two functions generated from its fields (as ``dataclasses``
generates ``__init__``): ``_decode_exact(wire)`` builds the command when every field is
present or defaulted and has *exactly* an accepted type (what msgpack produces), and returns
``None`` otherwise, so that the general path below decides and names what is wrong.
``to_wire`` is generated the same way. Both only unroll the loops over ``_FIELDS``: what is
accepted and what is sent are the same on both paths.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple, Protocol, TypeVar, cast, dataclass_transform

from minipulsar.errors import MalformedCommandError

_MISSING: Any = dataclasses.MISSING

Wire = dict[str, Any]
"""A command as msgpack carries it: the ``t`` key and one key per field that is not None."""


class FieldSpec(NamedTuple):
    """What :func:`decode_command` accepts for one field of a command."""

    name: str
    accepted: tuple[type, ...]
    """The runtime types a value may have (``object``: anything)."""
    default: Any
    """The default value, a factory (callable) making it, or ``dataclasses.MISSING`` (required)."""
    choices: frozenset[Any] | None
    """A ``Literal`` field's values; ``None``: any value of an accepted type."""


class Command:
    """Base of every command. ``TYPE`` is the wire name carried in the ``t`` key."""

    __slots__ = ()
    TYPE: ClassVar[str] = ""
    RESPONSE: ClassVar[bool] = False
    """True when the command answers a request carrying the same ``id`` (every response
    class has an ``id`` field: checked by :func:`command`)."""
    CARRIES_ID: ClassVar[bool] = False
    """True when the class has an ``id`` field (requests, responses, ERROR): see :func:`request_id`."""
    _FIELDS: ClassVar[tuple[FieldSpec, ...]] = ()
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    """Every registered command is a dataclass (made so by :func:`command`)."""
    _decode_exact: ClassVar[Callable[[Wire], Command | None]]
    """Generated per class: the fast path of :func:`decode_command` (see the module doc)."""

    def to_wire(self) -> Wire:
        """The msgpack map for this command; ``None`` fields are left out."""
        wire: Wire = {"t": self.TYPE}
        for spec in self._FIELDS:
            value = getattr(self, spec.name)
            if value is not None:
                wire[spec.name] = value
        return wire


REGISTRY: dict[str, type[Command]] = {}

C = TypeVar("C", bound=Command)


@dataclass_transform()
def command(type_name: str, *, response: bool = False) -> Callable[[type[C]], type[C]]:
    """Make ``cls`` a slotted dataclass command named ``type_name`` on the wire."""

    def wrap(cls: type[C]) -> type[C]:
        cls = dataclasses.dataclass(slots=True)(cls)
        cls.TYPE = type_name
        cls.RESPONSE = response
        hints = typing.get_type_hints(cls)
        cls._FIELDS = tuple(_field_spec(f, hints[f.name]) for f in dataclasses.fields(cls))
        cls.CARRIES_ID = any(spec.name == "id" for spec in cls._FIELDS)
        assert cls.CARRIES_ID or not response, f"response {type_name} has no id field"
        cls._decode_exact = staticmethod(_exact_decoder(cls))
        # Generated per class: the unrolled form of Command.to_wire, for speed.
        setattr(cls, "to_wire", _wire_encoder(cls))  # noqa: B010 -- a method assigned after the class exists
        assert type_name not in REGISTRY, f"duplicate command {type_name}"
        REGISTRY[type_name] = cls
        return cls

    return wrap


class _Identified(Protocol):
    @property
    def id(self) -> int | None: ...


def request_id(command: Command) -> int | None:
    """The request id ``command`` carries: None when its class has no ``id`` field (FLOW,
    MESSAGE …) or it is unset (an ERROR about the connection, an ACK nobody waits for)."""
    return cast(_Identified, command).id if command.CARRIES_ID else None


def _field_spec(f: dataclasses.Field[Any], hint: Any) -> FieldSpec:
    accepted, choices = _accepted(hint)
    return FieldSpec(f.name, accepted, _default_of(f), choices)


def _default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default is not _MISSING:
        return f.default
    if f.default_factory is not _MISSING:
        return f.default_factory
    return _MISSING


def _accepted(hint: Any) -> tuple[tuple[type, ...], frozenset[Any] | None]:
    """The runtime types a field accepts and, for a ``Literal``, its values.

    ``X | None`` adds ``NoneType``; ``float`` adds ``int``; ``Literal["a", "b"]`` accepts
    ``str`` values ``"a"`` and ``"b"``.
    """
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        parts = [_accepted(arg) for arg in typing.get_args(hint)]
        assert all(choices is None for _, choices in parts), f"{hint}: a Literal field takes a default, not None"
        return tuple(t for part_accepted, _ in parts for t in part_accepted), None
    if origin is typing.Literal:
        values = typing.get_args(hint)
        return tuple(dict.fromkeys(type(v) for v in values)), frozenset(values)
    if hint is Any:
        return (object,), None
    if hint is float:
        return (float, int), None
    if hint is type(None):
        return (type(None),), None
    return (origin or hint,), None


def _exact_decoder(cls: type[Command]) -> Callable[[Wire], Command | None]:
    """``decode(wire) -> cls | None``: the unrolled, exact-type-only form of the general loop.

    A field passes when its value's type is one of the accepted types exactly (no subclass:
    bool never passes for int) and, for a ``Literal`` field, its value is one of the choices;
    or when it is absent and has a default (computed as the general path does). Anything else
    returns None and the general path decides.
    """
    namespace: dict[str, Any] = {"cls": cls, "MISSING": _MISSING}
    required: list[str] = []
    checks: list[str] = []
    for i, (name, accepted, default, choices) in enumerate(cls._FIELDS):
        value = f"v{i}"
        # One accepted type (the common case) is an identity test, cheaper than ``in`` a tuple.
        if object in accepted:
            wrong = ""
        elif len(accepted) == 1:
            namespace[f"T{i}"] = accepted[0]
            wrong = f"{value}.__class__ is not T{i}"
        else:
            namespace[f"T{i}"] = accepted
            wrong = f"{value}.__class__ not in T{i}"
        if choices is not None:
            namespace[f"K{i}"] = choices
            wrong = f"{wrong} or {value} not in K{i}" if wrong else f"{value} not in K{i}"
        if default is _MISSING:
            required.append(f"        {value} = wire[{name!r}]")
            if wrong:
                checks.append(f"    if {wrong}: return None")
            continue
        # Whether the default is a factory is known now; the general path calls it per decode too.
        namespace[f"D{i}"] = default
        checks.append(f"    {value} = get({name!r}, MISSING)")
        checks.append(f"    if {value} is MISSING: {value} = {f'D{i}()' if callable(default) else f'D{i}'}")
        if wrong:
            checks.append(f"    elif {wrong}: return None")
    lines = ["def decode(wire):", "    get = wire.get"]
    if required:  # subscripts, not get(): a missing field is rare, and then the general path names it
        lines += ["    try:", *required, "    except KeyError:", "        return None"]
    lines += checks
    lines.append(f"    return cls({', '.join(f'v{i}' for i in range(len(cls._FIELDS)))})")
    exec("\n".join(lines), namespace)
    decode: Callable[[Wire], Command | None] = namespace["decode"]
    return decode


def _wire_encoder(cls: type[Command]) -> Callable[[Command], Wire]:
    """``to_wire(self) -> dict``: :meth:`Command.to_wire` unrolled for ``cls``'s fields."""
    lines = ["def to_wire(self):", "    wire = {'t': self.TYPE}"]
    for spec in cls._FIELDS:
        lines.append(f"    value = self.{spec.name}")
        lines.append(f"    if value is not None: wire[{spec.name!r}] = value")
    lines.append("    return wire")
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)
    to_wire: Callable[[Command], Wire] = namespace["to_wire"]
    to_wire.__doc__ = Command.to_wire.__doc__
    to_wire.__qualname__ = f"{cls.__qualname__}.to_wire"
    return to_wire


def decode_command(wire: Any) -> Command:
    """Build the command described by a decoded msgpack map.

    Raises:
        MalformedCommandError: not a map, unknown ``t``, a missing field, a wrong type, or a
            value outside a ``Literal`` field's choices.
    """
    if wire.__class__ is dict:
        type_name = wire.get("t")
        if type_name.__class__ is str:
            cls = REGISTRY.get(type_name)
            if cls is not None:
                command = cls._decode_exact(wire)
                if command is not None:
                    return command
    return _decode_checked(wire)


def _decode_checked(wire: Any) -> Command:
    """The general path: accepts subclasses of the accepted types, and names what is wrong."""
    if not isinstance(wire, dict):
        raise MalformedCommandError(f"a frame must hold a map, got {type(wire).__name__}")
    request_id = wire.get("id")
    if not isinstance(request_id, int) or isinstance(request_id, bool):
        request_id = None
    type_name = wire.get("t")
    # Check the type before the lookup: an unhashable ``t`` (a list, a map) would make the
    # dict lookup raise TypeError instead of a ProtocolError.
    cls = REGISTRY.get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        # Bounded: the text is logged and echoed in the ERROR, and ``t`` may be megabytes.
        raise MalformedCommandError(f"unknown command {repr(type_name)[:80]}", request_id)
    values = []
    for name, accepted, default, choices in cls._FIELDS:
        value = wire.get(name, _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                raise MalformedCommandError(f"{cls.TYPE}: missing field {name!r}", request_id)
            value = default() if callable(default) else default
        elif not _is_accepted(value, accepted):
            raise MalformedCommandError(
                f"{cls.TYPE}.{name}: expected {_names(accepted)}, got {type(value).__name__}",
                request_id,
            )
        elif choices is not None and value not in choices:
            # Bounded like an unknown ``t``: the value may be megabytes.
            raise MalformedCommandError(
                f"{cls.TYPE}.{name}: expected one of {_choice_names(choices)}, got {repr(value)[:80]}",
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


def _choice_names(choices: frozenset[Any]) -> str:
    return ", ".join(sorted(repr(choice) for choice in choices))
