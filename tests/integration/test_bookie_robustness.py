"""Garbage on raw sockets to a real bookie process: each bad connection gets an ERROR or is
closed, the process keeps running, and a normal client on another connection keeps working."""

from __future__ import annotations

import asyncio
import random
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import msgpack
import pytest_asyncio

from minipulsar.net import Connection, connect
from minipulsar.protocol.commands import PROTOCOL_VERSION, AddEntry, ReadEntry
from tests.support.process import ServerProcess, started

REPLY_TIMEOUT_S = 5.0


class RawClient(Connection):
    def command_received(self, command) -> None:  # noqa: ANN001
        pass


def frame(body: dict) -> bytes:
    data = msgpack.packb(body, use_bin_type=True)
    return struct.pack(">I", len(data)) + data


CONNECT = frame({"t": "CONNECT", "id": 1, "protocol_version": PROTOCOL_VERSION, "client_version": "fuzz"})


async def replies(host: str, port: int, data: bytes, handshake: bool = False) -> list[dict] | str:
    """Send ``data`` (after a CONNECT if ``handshake``) and collect what comes back: the decoded
    frames up to the first ERROR or until the server goes quiet, or ``"closed"`` if it hung up."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        if handshake:
            writer.write(CONNECT)
            assert (await _read_frame(reader))["t"] == "CONNECTED"
        writer.write(data)
        await writer.drain()
        got: list[dict] = []
        while True:
            try:
                body = await asyncio.wait_for(_read_frame(reader), 1.0 if got else REPLY_TIMEOUT_S)
            except (asyncio.IncompleteReadError, ConnectionError):
                return got or "closed"
            except asyncio.TimeoutError:
                return got
            got.append(body)
            if body.get("t") == "ERROR":
                return got
    finally:
        writer.close()


async def _read_frame(reader: asyncio.StreamReader) -> dict:
    (length,) = struct.unpack(">I", await reader.readexactly(4))
    return msgpack.unpackb(await reader.readexactly(length), raw=False)


def is_error_or_closed(result: list[dict] | str) -> bool:
    return result == "closed" or any(body.get("t") == "ERROR" for body in result)


@pytest_asyncio.fixture
async def bookie(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    metastore = ServerProcess("metastore", ["--port", "0", "--data-dir", str(tmp_path / "metastore")],
                              tmp_path / "metastore.log")
    async with started(metastore):
        process = ServerProcess("bookie", [
            "--port", "0", "--http-port", "0", "--journal-dir", str(tmp_path / "journal"),
            "--ledger-dirs", str(tmp_path / "ledgers"), "--metadata-url", f"metastore://{metastore.address}",
            "--set", "journalPreAllocSizeMB=1",
        ], tmp_path / "bookie.log")
        async with started(process):
            yield process


async def test_garbage_gets_an_error_or_a_closed_connection_and_service_goes_on(bookie: ServerProcess) -> None:
    good = await connect(RawClient, bookie.host, bookie.port)
    entry_id = 0

    async def still_serving() -> None:
        nonlocal entry_id
        await good.request(AddEntry, ledger_id=1, entry_id=entry_id, payload=b"ok")
        response = await good.request(ReadEntry, ledger_id=1, first_entry_id=entry_id)
        assert response.entries == [[entry_id, b"ok"]]
        entry_id += 1

    rng = random.Random(42)
    wrong_types = frame({"t": "ADD_ENTRY", "id": 7, "ledger_id": "one", "entry_id": [1], "payload": 5})
    cases = {
        "random bytes": rng.randbytes(4096),
        "random bytes after CONNECT": rng.randbytes(4096),
        "random body in a well-sized frame": struct.pack(">I", 200) + rng.randbytes(200),
        "random body in a well-sized frame after CONNECT": struct.pack(">I", 200) + rng.randbytes(200),
        "2 GiB length prefix": struct.pack(">I", 2**31) + b"\x00" * 64,
        "2 GiB length prefix after CONNECT": struct.pack(">I", 2**31) + b"\x00" * 64,
        "unknown command": frame({"t": "NO_SUCH_COMMAND", "id": 3}),
        "unknown command after CONNECT": frame({"t": "NO_SUCH_COMMAND", "id": 3}),
        "ADD_ENTRY with wrong types": wrong_types,
        "ADD_ENTRY with wrong types after CONNECT": wrong_types,
        "not a map after CONNECT": frame([1, 2, 3]),  # type: ignore[arg-type]
    }
    await still_serving()
    for name, data in cases.items():
        result = await replies(bookie.host, bookie.port, data, handshake="after CONNECT" in name)
        assert is_error_or_closed(result), f"{name}: {result!r}"
        assert bookie.running, f"the bookie died on {name}"
        await still_serving()
    typed = await replies(bookie.host, bookie.port, wrong_types, handshake=True)
    assert typed != "closed" and typed[0]["code"] == "InvalidCommand" and typed[0]["id"] == 7
    too_large = await replies(bookie.host, bookie.port, struct.pack(">I", 2**31), handshake=True)
    assert too_large == "closed" or too_large[0]["code"] == "TooLarge"
    good.close()
