"""Garbage on raw sockets to a real bookie process: each bad connection gets an ERROR or is
closed, the process keeps running, and a normal client on another connection keeps working."""

from __future__ import annotations

import asyncio
import random
import struct
from pathlib import Path

import pytest

from minipulsar.net import Connection, connect
from minipulsar.protocol.commands import AddEntry, BookieInfo, Connected, ReadEntry, ReadLac
from tests.support.fixtures import bookie_fixture
from tests.support.process import ServerProcess, wait_for
from tests.support.raw_client import RawClient, RawPeer, wire_frame
from tests.support.servers import bookie_beside_metastore, bookie_process
from tests.support.web import metric_value

REPLY_TIMEOUT_S = 5.0
BUSY_BOOKIE = {"zkTimeout": 30_000}
"""BookKeeper's session timeout, not the tests' 2 s: a bookie kept busy by peers that do not
read must not lose its registration meanwhile."""


async def replies(host: str, port: int, data: bytes, handshake: bool = False) -> list[dict] | str:
    """Send ``data`` (after a CONNECT if ``handshake``) and collect what comes back: the decoded
    frames up to the first ERROR or until the server goes quiet, or ``"closed"`` if it hung up."""
    peer = await RawPeer.open(host, port)
    try:
        if handshake:
            assert isinstance(await peer.handshake(), Connected)
        await peer.send(data)
        got: list[dict] = []
        while True:
            try:
                body = await peer.receive_map(timeout_s=1.0 if got else REPLY_TIMEOUT_S)
            except TimeoutError:
                return got
            if body is None:
                return got or "closed"
            got.append(body)
            if body.get("t") == "ERROR":
                return got
    finally:
        peer.close()


def is_error_or_closed(result: list[dict] | str) -> bool:
    return result == "closed" or any(body.get("t") == "ERROR" for body in result)


bookie = bookie_fixture(settings=BUSY_BOOKIE)


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
    wrong_types = wire_frame({"t": "ADD_ENTRY", "id": 7, "ledger_id": "one", "entry_id": [1], "payload": 5})
    cases = {
        "random bytes": rng.randbytes(4096),
        "random bytes after CONNECT": rng.randbytes(4096),
        "random body in a well-sized frame": struct.pack(">I", 200) + rng.randbytes(200),
        "random body in a well-sized frame after CONNECT": struct.pack(">I", 200) + rng.randbytes(200),
        "2 GiB length prefix": struct.pack(">I", 2**31) + b"\x00" * 64,
        "2 GiB length prefix after CONNECT": struct.pack(">I", 2**31) + b"\x00" * 64,
        "unknown command": wire_frame({"t": "NO_SUCH_COMMAND", "id": 3}),
        "unknown command after CONNECT": wire_frame({"t": "NO_SUCH_COMMAND", "id": 3}),
        "ADD_ENTRY with wrong types": wrong_types,
        "ADD_ENTRY with wrong types after CONNECT": wrong_types,
        "not a map after CONNECT": wire_frame([1, 2, 3]),
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


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def test_a_client_that_never_reads_its_answers_does_not_grow_the_bookie(bookie: ServerProcess) -> None:
    """Goal: a peer that sends READ_ENTRY requests and never reads the answers gets TCP
    back-pressure: the bookie answers about READS_IN_FLIGHT_MAX of them and no more while
    nobody reads (it answered all: +600 MB for 30 KB of requests), other connections are served
    meanwhile, and once the peer reads, every answer comes, in order. Method: one 1 MiB entry;
    600 reads of it sent at once on a raw socket; answered reads (pendingReads of BOOKIE_INFO)
    and the bookie's RSS watched for 3 s after the first 64 were answered; then the answers."""
    peer = await RawPeer.open(bookie.host, bookie.port)
    checker = await connect(RawClient, bookie.host, bookie.port)
    try:
        assert isinstance(await peer.handshake(), Connected)
        payload = bytes(range(256)) * 4096
        await peer.send({"t": "ADD_ENTRY", "id": 2, "ledger_id": 77, "entry_id": 0, "lac": -1, "payload": payload})
        assert (await peer.receive_map())["t"] == "ADD_ENTRY_RESPONSE"
        before = _rss_bytes(bookie.proc.pid)
        reads = 600
        await peer.send(_reads_of_entry_77_0(reads))

        async def answered() -> int:
            return reads - (await checker.request(BookieInfo)).info["pendingReads"]

        await wait_for(lambda: _at_least(answered(), 64), 20, message="the first reads were not answered")
        deadline = asyncio.get_running_loop().time() + 3.0
        while asyncio.get_running_loop().time() < deadline:  # an invariant over a window, not a sleep
            done = await answered()
            grown = _rss_bytes(bookie.proc.pid) - before
            assert done <= 64 + 32, f"{done} reads answered while nobody reads the answers"
            assert grown < 250 * 1024 * 1024, f"the bookie grew by {grown >> 20} MiB for answers nobody reads"
            lac = await checker.request(ReadLac, ledger_id=77)
            assert lac.last_entry_id == 0, "another connection is served meanwhile"
        for i in range(reads):
            answer = await peer.receive_map(timeout_s=20)
            assert answer is not None and answer["t"] == "READ_ENTRY_RESPONSE" and answer["id"] == 10 + i
            assert answer["entries"] == [[0, payload]]
    finally:
        peer.close()
        checker.close()


async def _at_least(count, minimum: int) -> bool:
    return await count >= minimum


async def _no_read_pending(checker: Connection) -> bool:
    """No read is in progress or holds a read-thread place (BOOKIE_INFO on another connection)."""
    info = (await checker.request(BookieInfo)).info
    return info["pendingReads"] == 0 and info["readPoolPending"] == 0


async def test_a_client_that_never_reads_does_not_hold_up_shutdown(bookie: ServerProcess) -> None:
    """Goal: SIGTERM stops the bookie cleanly (exit 0, after deleting its registration) even while a
    peer that stopped reading holds MiBs of unsent answers: closing waited for them until the
    keep-alive gave up (~60 s), past the supervisor's SIGKILL. Method: 20 reads of a 1 MiB
    entry nobody reads, then stop()."""
    peer = await _send_unread_reads(bookie, 20)
    checker = await connect(RawClient, bookie.host, bookie.port)
    try:
        await wait_for(lambda: _no_read_pending(checker), 20, message="the bookie's reads did not settle")
        checker.close()
        assert await asyncio.to_thread(bookie.stop, 12.0) == 0, "SIGKILLed: the bookie did not stop in time"
        tail = bookie.log_tail(80)
        assert "did not take its last responses" in tail and "stopped" in tail
    finally:
        peer.close()
        checker.close()


async def test_an_entry_too_big_to_be_read_back_is_refused_not_acknowledged(bookie: ServerProcess) -> None:
    """Goal: an ADD_ENTRY whose frame fits but whose READ_ENTRY_RESPONSE would not (it was
    acknowledged, and every peer then refused the answer as too large, dropping the whole
    connection) is refused with InvalidCommand; the largest entry accepted reads back.
    Method: payloads just above and just below maxFrameSize - 1 KiB, on the project's client."""
    max_frame = 5 * 1024 * 1024 + 64 * 1024
    client = await connect(RawClient, bookie.host, bookie.port)
    try:
        refused = await replies(
            bookie.host,
            bookie.port,
            wire_frame(
                {
                    "t": "ADD_ENTRY",
                    "id": 2,
                    "ledger_id": 9,
                    "entry_id": 0,
                    "lac": -1,
                    "payload": b"z" * (max_frame - 512),
                }
            ),
            handshake=True,
        )
        assert isinstance(refused, list) and refused[-1]["t"] == "ERROR"
        assert refused[-1]["code"] == "InvalidCommand" and "largest entry" in refused[-1]["message"]
        payload = b"a" * (max_frame - 1024)
        await client.request(AddEntry, ledger_id=9, entry_id=0, lac=-1, payload=payload)
        answer = await client.request(ReadEntry, ledger_id=9, first_entry_id=0)
        assert answer.entries == [[0, payload]]
    finally:
        client.close()


@pytest.mark.expect_error_log(r"bookie cannot start")
@pytest.mark.parametrize("damage", ["metadata-url", "index-db"])
async def test_a_bookie_that_cannot_start_says_why_in_one_line_and_exits_2(tmp_path: Path, damage: str) -> None:
    """Goal: an unknown metadataServiceUri scheme or a damaged index.db ends the start with
    exit code 2 and one clear line (they ended it with a traceback and exit code 1)."""
    url = "etcd://127.0.0.1:2379" if damage == "metadata-url" else "memory://robustness"
    if damage == "index-db":
        (tmp_path / "ledgers" / "current").mkdir(parents=True)
        (tmp_path / "ledgers" / "current" / "index.db").write_bytes(b"not a database, " * 512)
    process = bookie_process(tmp_path, url)
    try:
        with pytest.raises(RuntimeError, match="exited with 2"):
            await asyncio.to_thread(process.start)
    finally:
        await asyncio.to_thread(process.stop)
    log_text = process.log_path.read_text()
    assert "Traceback" not in log_text
    expected = "unsupported metadata store URL" if damage == "metadata-url" else "index.db is damaged"
    assert expected in log_text and "bookie cannot start" in log_text


async def _send_unread_reads(bookie: ServerProcess, reads: int, payload: bytes = b"z" * (1024 * 1024)) -> RawPeer:
    """A raw peer that added ``payload`` (1 MiB) to ledger 77 and sent ``reads`` reads of it
    (ids 10, 11, …) without reading any answer."""
    peer = await RawPeer.open(bookie.host, bookie.port)
    assert isinstance(await peer.handshake(), Connected)
    await peer.send({"t": "ADD_ENTRY", "id": 2, "ledger_id": 77, "entry_id": 0, "lac": -1, "payload": payload})
    assert (await peer.receive_map())["t"] == "ADD_ENTRY_RESPONSE"
    await peer.send(_reads_of_entry_77_0(reads))
    return peer


def _reads_of_entry_77_0(count: int) -> bytes:
    """``count`` READ_ENTRY frames of entry 77:0 (ids 10, 11, …), to send in one write."""
    read = {"t": "READ_ENTRY", "ledger_id": 77, "first_entry_id": 0}
    return b"".join(wire_frame({**read, "id": 10 + i}) for i in range(count))


async def _dropped_responses(bookie: ServerProcess) -> float:
    dropped = await metric_value(bookie, "bookkeeper_server_CHANNEL_WRITE_count", {"success": "false"})
    return dropped or 0.0


async def test_reads_of_a_peer_that_does_not_take_its_responses_are_dropped_after_the_wait_timeout(
    tmp_path: Path,
) -> None:
    """Goal: with waitTimeoutOnResponseBackpressureMs, a peer that stops taking its responses
    stops holding read-thread places: its waiting reads are dropped, unanswered
    (bookkeeper_server_CHANNEL_WRITE{success="false"}), while the connection stays open; once it
    takes what was sent, its new reads are answered again. Method: 300 reads of a 1 MiB entry,
    nothing read back; the bookie's pending reads watched; then the peer reads everything."""
    async with bookie_beside_metastore(tmp_path, {**BUSY_BOOKIE, "waitTimeoutOnResponseBackpressureMs": 300}) as bookie:
        peer = await _send_unread_reads(bookie, 300)
        checker = await connect(RawClient, bookie.host, bookie.port)
        try:
            await wait_for(lambda: _no_read_pending(checker), 20, message="the waiting reads kept their places")
            assert await _dropped_responses(bookie) > 0
            assert "waitTimeoutOnResponseBackpressureMs" in bookie.log_tail(40)
            ids = []
            while True:  # what was sent before the timeout, in order, then nothing more
                try:
                    answer = await peer.receive_map(timeout_s=2.0)
                except TimeoutError:
                    break
                assert answer is not None and answer["t"] == "READ_ENTRY_RESPONSE", answer
                ids.append(answer["id"])
            assert ids == list(range(10, 10 + len(ids))) and 0 < len(ids) < 300, ids
            await peer.send({"t": "READ_ENTRY", "id": 1000, "ledger_id": 77, "first_entry_id": 0})
            answer = await peer.receive_map(timeout_s=10)
            assert answer is not None and answer["id"] == 1000 and answer["entries"] == [[0, b"z" * (1024 * 1024)]]
        finally:
            peer.close()
            checker.close()


async def test_close_channel_on_response_timeout_closes_a_peer_that_does_not_take_its_responses(tmp_path: Path) -> None:
    """Goal: with closeChannelOnResponseTimeout, the peer is disconnected instead, its reads give
    their places back, and other connections are served. Method: as above, then read until the
    connection ends."""
    settings = {**BUSY_BOOKIE, "waitTimeoutOnResponseBackpressureMs": 300, "closeChannelOnResponseTimeout": True}
    async with bookie_beside_metastore(tmp_path, settings) as bookie:
        peer = await _send_unread_reads(bookie, 300)
        checker = await connect(RawClient, bookie.host, bookie.port)
        try:
            await wait_for(lambda: _no_read_pending(checker), 20, message="the closed peer's reads kept their places")
            answered = 0
            while await peer.receive_map(timeout_s=10) is not None:  # None: disconnected
                answered += 1
                assert answered < 300, "every read was answered: the peer was not disconnected"
            assert "closeChannelOnResponseTimeout" in bookie.log_tail(40)
            lac = await checker.request(ReadLac, ledger_id=77)
            assert lac.last_entry_id == 0
        finally:
            peer.close()
            checker.close()
