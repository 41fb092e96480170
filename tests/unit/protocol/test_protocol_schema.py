"""Goal: decoding validates every field: wrong types and missing fields are MalformedCommandError
carrying the request id (so the peer's request can be answered), bool is never an int, and
unknown extra keys are ignored (a newer peer may add optional fields)."""

from __future__ import annotations

import dataclasses

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minipulsar.errors import MalformedCommandError
from minipulsar.protocol.codec import decode_body
from minipulsar.protocol.commands import Flow, Lookup, ReadEntry
from minipulsar.protocol.schema import Command, decode_command
from tests.support.protocol_strategies import (
    COMMAND_CLASSES,
    WRONG_VALUES,
    commands_of,
    is_accepted,
    msgpack_values,
)

SCHEMA = settings(max_examples=12, deadline=None)


def expected_request_id(wire: dict) -> int | None:
    request_id = wire.get("id")
    return request_id if isinstance(request_id, int) and not isinstance(request_id, bool) else None


def over_the_wire(wire: dict) -> Command:
    return decode_body(msgpack.packb(wire, use_bin_type=True))


@pytest.mark.parametrize("cls", [cls for cls in COMMAND_CLASSES if cls._FIELDS], ids=lambda cls: cls.TYPE)
@SCHEMA
@given(data=st.data())
def test_wrong_field_type_is_invalid_command_with_request_id(cls: type[Command], data: st.DataObject) -> None:
    command = data.draw(commands_of(cls, payload_bytes_max=16))
    name, accepted, _, _ = data.draw(st.sampled_from(cls._FIELDS))
    wrong = data.draw(st.sampled_from([v for v in WRONG_VALUES if not is_accepted(v, accepted)]))
    wire = {**command.to_wire(), name: wrong}
    with pytest.raises(MalformedCommandError) as caught:
        over_the_wire(wire)
    assert caught.value.request_id == expected_request_id(wire)
    assert name in str(caught.value)


@pytest.mark.parametrize(
    "cls",
    [cls for cls in COMMAND_CLASSES if any(spec.default is dataclasses.MISSING for spec in cls._FIELDS)],
    ids=lambda cls: cls.TYPE,
)
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_missing_required_field_is_invalid_command_with_request_id(cls: type[Command], data: st.DataObject) -> None:
    command = data.draw(commands_of(cls, payload_bytes_max=16))
    required = [spec.name for spec in cls._FIELDS if spec.default is dataclasses.MISSING]
    missing = data.draw(st.sampled_from(required))
    wire = command.to_wire()
    del wire[missing]
    with pytest.raises(MalformedCommandError) as caught:
        over_the_wire(wire)
    assert caught.value.request_id == expected_request_id(wire)
    assert f"missing field {missing!r}" in str(caught.value)


@pytest.mark.parametrize("cls", COMMAND_CLASSES, ids=lambda cls: cls.TYPE)
@SCHEMA
@given(data=st.data())
def test_unknown_extra_keys_are_ignored(cls: type[Command], data: st.DataObject) -> None:
    command = data.draw(commands_of(cls, payload_bytes_max=16))
    known = {"t", *(spec.name for spec in cls._FIELDS)}
    extra = data.draw(
        st.dictionaries(st.text(max_size=12).filter(lambda k: k not in known), msgpack_values, max_size=4)
    )
    assert over_the_wire({**extra, **command.to_wire()}) == command


@pytest.mark.parametrize(
    "wire",
    [
        {"t": "FLOW", "consumer_id": True, "permits": 1},
        {"t": "FLOW", "consumer_id": 1, "permits": False},
        {"t": "READ_ENTRY", "id": 3, "ledger_id": 1, "first_entry_id": True},
        {"t": "ADD_ENTRY", "id": 4, "ledger_id": 1, "entry_id": 0, "payload": b"", "lac": False},
    ],
    ids=["flow-consumer", "flow-permits", "read-first-entry", "add-lac"],
)
def test_bool_is_not_accepted_as_int(wire: dict) -> None:
    with pytest.raises(MalformedCommandError) as caught:
        over_the_wire(wire)
    assert caught.value.request_id == expected_request_id(wire)
    assert "got bool" in str(caught.value)


def test_int_is_not_accepted_as_bool() -> None:
    with pytest.raises(MalformedCommandError, match="fence"):
        over_the_wire({"t": "READ_ENTRY", "id": 1, "ledger_id": 1, "first_entry_id": 0, "fence": 1})


def test_bool_request_id_is_not_a_request_id() -> None:
    with pytest.raises(MalformedCommandError) as caught:
        over_the_wire({"t": "LOOKUP", "id": True, "topic": 5})
    assert caught.value.request_id is None


def test_unknown_command_carries_the_request_id() -> None:
    with pytest.raises(MalformedCommandError, match="unknown command 'NOPE'") as caught:
        over_the_wire({"t": "NOPE", "id": 41})
    assert caught.value.request_id == 41


def test_non_map_body_is_an_invalid_command() -> None:
    with pytest.raises(MalformedCommandError, match="must hold a map"):
        decode_command([1, 2, 3])


def test_defaults_fill_missing_optional_fields() -> None:
    assert over_the_wire({"t": "LOOKUP", "id": 1, "topic": "t"}) == Lookup(id=1, topic="t")
    read = over_the_wire({"t": "READ_ENTRY", "id": 2, "ledger_id": 3, "first_entry_id": 4})
    assert read == ReadEntry(id=2, ledger_id=3, first_entry_id=4, count=1, max_bytes=0, fence=False)
    add = over_the_wire({"t": "ADD_ENTRY", "id": 5, "ledger_id": 6, "entry_id": 7, "payload": b"p"})
    assert (add.lac, add.recovery) == (-1, False)
    assert over_the_wire({"t": "FLOW", "consumer_id": 1, "permits": 2, "future_field": [1]}) == Flow(1, 2)


def test_default_factories_give_fresh_values() -> None:
    first = over_the_wire({"t": "READ_ENTRY_RESPONSE", "id": 1, "ledger_id": 1})
    second = over_the_wire({"t": "READ_ENTRY_RESPONSE", "id": 2, "ledger_id": 1})
    assert first.entries == [] and first.entries is not second.entries


def test_payload_must_be_bin_not_str() -> None:
    with pytest.raises(MalformedCommandError, match="payload"):
        over_the_wire({"t": "SEND", "producer_id": 1, "sequence_id": 1, "payload": "text"})


ENUMERATED_FIELDS = [(cls, spec.name) for cls in COMMAND_CLASSES for spec in cls._FIELDS if spec.choices is not None]


def test_wire_enumerations_are_checked_fields() -> None:
    assert {(cls.TYPE, name) for cls, name in ENUMERATED_FIELDS} == {
        ("LOOKUP_RESPONSE", "kind"),
        ("GET_TOPICS_OF_NAMESPACE", "mode"),
        ("SUBSCRIBE", "sub_type"),
        ("SUBSCRIBE", "initial_position"),
        ("SUBSCRIBE", "key_shared_mode"),
        ("ACK", "ack_type"),
        ("PRODUCER", "access_mode"),
        ("MD_NOTIFICATION", "kind"),
    }


@pytest.mark.parametrize(("cls", "name"), ENUMERATED_FIELDS, ids=lambda v: v if isinstance(v, str) else v.TYPE)
@SCHEMA
@given(data=st.data())
def test_value_outside_a_wire_enumeration_is_invalid_command_with_request_id(
    cls: type[Command], name: str, data: st.DataObject
) -> None:
    command = data.draw(commands_of(cls, payload_bytes_max=16))
    choices = next(spec.choices for spec in cls._FIELDS if spec.name == name)
    outside = data.draw(st.text(max_size=12).filter(lambda v: v not in choices))
    wire = {**command.to_wire(), name: outside}
    with pytest.raises(MalformedCommandError) as caught:
        over_the_wire(wire)
    assert caught.value.request_id == expected_request_id(wire)
    assert f"{cls.TYPE}.{name}: expected one of" in str(caught.value)


def test_wire_enumeration_values_decode_unchanged() -> None:
    wire = {"t": "SUBSCRIBE", "id": 1, "topic": "t", "subscription": "s", "consumer_id": 2}
    for sub_type in ("Exclusive", "Shared", "Failover", "Key_Shared"):
        assert over_the_wire({**wire, "sub_type": sub_type, "initial_position": "Earliest"}).sub_type == sub_type
    with pytest.raises(
        MalformedCommandError, match=r"SUBSCRIBE.sub_type: expected one of .*'Key_Shared'.*got 'KeyShared'"
    ):
        over_the_wire({**wire, "sub_type": "KeyShared"})
    with pytest.raises(MalformedCommandError, match="initial_position"):
        over_the_wire({**wire, "initial_position": "latest"})
