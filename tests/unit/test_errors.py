"""Goal: wire error codes and typed errors map one-to-one, so a client re-raises exactly the
type the server raised; an unknown code degrades to UnknownServerError, never a crash."""

from __future__ import annotations

import pytest

from minipulsar import errors
from minipulsar.errors import (
    ConnectionClosedError,
    ErrorCode,
    FrameTooLargeError,
    MalformedCommandError,
    MiniPulsarError,
    ProtocolError,
    RequestTimeoutError,
    ServerError,
    UnknownServerError,
    code_for_error,
    error_for_code,
)


def server_error_classes() -> list[type[ServerError]]:
    found, pending = [], list(ServerError.__subclasses__())
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return [cls for cls in found if cls.__module__ == errors.__name__]


def test_every_error_code_has_exactly_one_class() -> None:
    by_code: dict[ErrorCode, list[type[ServerError]]] = {}
    for cls in server_error_classes():
        by_code.setdefault(cls.code, []).append(cls)
    assert set(by_code) == set(ErrorCode)
    assert {code: classes for code, classes in by_code.items() if len(classes) != 1} == {}


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda code: code.value)
def test_code_round_trips_through_its_class(code: ErrorCode) -> None:
    error = error_for_code(code.value, "the message")
    assert isinstance(error, ServerError)
    assert error.code is code
    assert str(error) == "the message"
    assert code_for_error(error) is code
    assert type(error_for_code(code_for_error(error).value)) is type(error)


@pytest.mark.parametrize("cls", server_error_classes(), ids=lambda cls: cls.__name__)
def test_class_round_trips_through_its_code(cls: type[ServerError]) -> None:
    assert type(error_for_code(code_for_error(cls("x")).value, "x")) is cls


@pytest.mark.parametrize("code", ["NoSuchCode", "", "unknownerror", "TOO_LARGE"])
def test_unknown_code_is_unknown_server_error(code: str) -> None:
    error = error_for_code(code, "details")
    assert type(error) is UnknownServerError
    assert code_for_error(error) is ErrorCode.UNKNOWN_ERROR
    assert "details" in str(error) and code in str(error)


@pytest.mark.parametrize(
    "error, code",
    [
        (RuntimeError("bug"), ErrorCode.UNKNOWN_ERROR),
        (ConnectionClosedError("gone"), ErrorCode.UNKNOWN_ERROR),
        (MalformedCommandError("bad", 3), ErrorCode.INVALID_COMMAND),
        (FrameTooLargeError("big"), ErrorCode.TOO_LARGE),
    ],
)
def test_local_errors_map_to_a_wire_code(error: BaseException, code: ErrorCode) -> None:
    assert code_for_error(error) is code


def test_error_hierarchy() -> None:
    assert issubclass(FrameTooLargeError, ProtocolError) and issubclass(MalformedCommandError, ProtocolError)
    assert issubclass(ProtocolError, MiniPulsarError) and issubclass(ServerError, MiniPulsarError)
    assert ConnectionClosedError.retriable and RequestTimeoutError.retriable
    assert not ProtocolError.retriable
    assert MalformedCommandError("x").request_id is None and MalformedCommandError("x", 4).request_id == 4


def test_wire_codes_are_unique_strings() -> None:
    values = [code.value for code in ErrorCode]
    assert len(values) == len(set(values))
    assert ErrorCode("TooLarge") is ErrorCode.TOO_LARGE
