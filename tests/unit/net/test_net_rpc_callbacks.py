"""Goal: a request waiting on a callback (the ledger handle's adds) is answered exactly once,
as a future would be: by its response, by the typed error of an ERROR, by its deadline, or by
the connection's loss."""

from __future__ import annotations

import asyncio

import pytest

from minipulsar.errors import ConnectionClosedError, MiniPulsarError, RequestTimeoutError, ServerError
from minipulsar.net.rpc import RequestTable
from minipulsar.protocol.commands import AddEntryResponse, Error
from minipulsar.protocol.schema import Command

Answers = list[tuple[Command | None, MiniPulsarError | None]]


def recorder() -> tuple[Answers, object]:
    answers: Answers = []
    return answers, lambda response, error: answers.append((response, error))


async def test_a_response_calls_the_callback_once_and_a_late_duplicate_is_unknown() -> None:
    table = RequestTable(asyncio.get_running_loop())
    answers, callback = recorder()
    rid = table.new_id()
    table.register_callback(rid, "ADD_ENTRY", 30.0, callback)  # type: ignore[arg-type]
    response = AddEntryResponse(id=rid, ledger_id=1, entry_id=2)
    assert table.complete(rid, response)
    assert not table.complete(rid, response)
    assert answers == [(response, None)]
    assert len(table) == 0


async def test_an_error_answer_gives_the_typed_error() -> None:
    table = RequestTable(asyncio.get_running_loop())
    answers, callback = recorder()
    table.register_callback(1, "ADD_ENTRY", 30.0, callback)  # type: ignore[arg-type]
    table.complete(1, Error(code="LedgerFenced", message="fenced", id=1))
    [(response, error)] = answers
    assert response is None and isinstance(error, ServerError) and "fenced" in str(error)


async def test_connection_loss_fails_callbacks_and_futures_alike() -> None:
    table = RequestTable(asyncio.get_running_loop())
    answers, callback = recorder()
    table.register_callback(1, "ADD_ENTRY", 30.0, callback)  # type: ignore[arg-type]
    future = table.register(2, "READ_ENTRY", 30.0)
    table.fail_all(ConnectionClosedError("gone"))
    [(response, error)] = answers
    assert response is None and isinstance(error, ConnectionClosedError) and "ADD_ENTRY" in str(error)
    with pytest.raises(ConnectionClosedError):
        await future


async def test_a_deadline_fails_the_callback_with_a_timeout() -> None:
    table = RequestTable(asyncio.get_running_loop())
    answers, callback = recorder()
    expired = asyncio.get_running_loop().create_future()
    table.register_callback(1, "ADD_ENTRY", 0.0, lambda r, e: (callback(r, e), expired.set_result(None)))  # type: ignore[operator]
    await asyncio.wait_for(expired, 5)
    [(response, error)] = answers
    assert response is None and isinstance(error, RequestTimeoutError)
    assert len(table) == 0
