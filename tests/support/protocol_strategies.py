"""Hypothesis strategies for wire commands, derived from each command class's ``_FIELDS``.

A field's strategy comes from the runtime types its schema accepts (and a ``Literal`` field's
values), so a command added to
:mod:`minipulsar.protocol.commands` is covered without touching the tests. Values stay in
what msgpack carries losslessly: ints in [-2**63, 2**64 - 1], finite floats, lists (never
tuples), maps with ``str`` keys.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from minipulsar.protocol.frames import LENGTH
from minipulsar.protocol.schema import REGISTRY, Command, FieldSpec

COMMAND_CLASSES: list[type[Command]] = sorted(REGISTRY.values(), key=lambda cls: cls.TYPE)

INT_MIN, INT_MAX = -(2**63), 2**64 - 1
ints = st.integers(INT_MIN, INT_MAX)
texts = st.text(max_size=40)

msgpack_values = st.recursive(
    st.none() | st.booleans() | ints | st.floats(allow_nan=False) | texts | st.binary(max_size=64),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=10,
)
"""Any value msgpack round-trips to an equal Python value."""


def strategy_for(spec: FieldSpec, payload_bytes_max: int) -> st.SearchStrategy[Any]:
    """Values a field accepts: one of its choices, or of exactly the runtime types it accepts."""
    if spec.choices is not None:
        return st.sampled_from(sorted(spec.choices, key=repr))
    options: list[st.SearchStrategy[Any]] = []
    for accepted_type in spec.accepted:
        if accepted_type is type(None):
            options.append(st.none())
        elif accepted_type is bool:
            options.append(st.booleans())
        elif accepted_type is int:
            options.append(ints)
        elif accepted_type is float:
            options.append(st.floats(allow_nan=False))
        elif accepted_type is str:
            options.append(texts)
        elif accepted_type is bytes:
            options.append(st.binary(max_size=payload_bytes_max))
        elif accepted_type is list:
            options.append(st.lists(msgpack_values, max_size=5))
        elif accepted_type is dict:
            options.append(st.dictionaries(texts, msgpack_values, max_size=5))
        elif accepted_type is object:
            options.append(msgpack_values)
        else:
            raise AssertionError(f"no strategy for field type {accepted_type}")
    return st.one_of(options)


def commands_of(cls: type[Command], payload_bytes_max: int = 4096) -> st.SearchStrategy[Command]:
    """Valid instances of ``cls``; a field with a default is sometimes left at it."""
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for spec in cls._FIELDS:
        values = strategy_for(spec, payload_bytes_max)
        if spec.default is not dataclasses.MISSING:
            fields[spec.name] = values | st.just(_NOT_SET)
        else:
            fields[spec.name] = values
    return st.fixed_dictionaries(fields).map(
        lambda values: cls(**{k: v for k, v in values.items() if v is not _NOT_SET})
    )


_NOT_SET = object()


def any_command(payload_bytes_max: int = 4096) -> st.SearchStrategy[Command]:
    return st.sampled_from(COMMAND_CLASSES).flatmap(lambda cls: commands_of(cls, payload_bytes_max))


WRONG_VALUES: list[Any] = [True, False, 7, -1, 1.5, "text", b"bytes", [1, 2], {"k": 1}, None]
"""Candidates for a wrong-type field: each field gets those its schema does not accept."""


def framed(body: bytes) -> bytes:
    """``body`` behind its length prefix: one frame."""
    return LENGTH.pack(len(body)) + body


def is_accepted(value: Any, accepted: tuple[type, ...]) -> bool:
    """The schema's rule: an instance of an accepted type, and bool only where bool is named."""
    if isinstance(value, bool):
        return bool in accepted or object in accepted
    return isinstance(value, accepted)
