"""Goal: CoalescingWriter's flow control — writers wait while the transport is paused and are
released on resume or when the connection is lost, never left hanging. Pure logic: a fake
transport stands in for the socket."""

from __future__ import annotations

import asyncio

from minipulsar.net.writer import CoalescingWriter


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[list[bytes]] = []
        self.closing = False

    def writelines(self, buffers) -> None:
        self.written.append(list(buffers))

    def is_closing(self) -> bool:
        return self.closing


def make_writer() -> tuple[CoalescingWriter, FakeTransport]:
    transport = FakeTransport()
    return CoalescingWriter(transport, asyncio.get_running_loop()), transport  # type: ignore[arg-type]


async def test_frames_of_one_iteration_flush_together_on_the_next() -> None:
    writer, transport = make_writer()
    for i in range(3):
        writer.write(b"h%d" % i, b"b%d" % i)
    assert transport.written == []
    await asyncio.sleep(0)  # one loop iteration: the call_soon flush runs
    assert transport.written == [[b"h0", b"b0", b"h1", b"b1", b"h2", b"b2"]]


async def test_drain_waits_while_paused_and_returns_on_resume() -> None:
    writer, _ = make_writer()
    await asyncio.wait_for(writer.drain(), 1)  # not paused: immediate
    writer.pause()
    waiting = asyncio.ensure_future(writer.drain())
    resumed: list[int] = []
    writer.call_when_writable(lambda: resumed.append(1))
    await asyncio.sleep(0)
    assert not waiting.done() and resumed == []
    writer.resume()
    await asyncio.wait_for(waiting, 1)
    assert resumed == [1]
    writer.call_when_writable(lambda: resumed.append(2))
    assert resumed == [1, 2]  # writable: runs at once


async def test_close_releases_waiters_and_later_drains() -> None:
    """A writer paused when its connection drops is released: a drain() after the drop returns
    at once instead of waiting for a resume that never comes."""
    writer, _ = make_writer()
    writer.pause()
    waiting = asyncio.ensure_future(writer.drain())
    await asyncio.sleep(0)
    writer.close()
    await asyncio.wait_for(waiting, 1)
    await asyncio.wait_for(writer.drain(), 1)


async def test_flush_on_a_closing_transport_drops_the_frames() -> None:
    writer, transport = make_writer()
    writer.write(b"h", b"b")
    transport.closing = True
    writer.flush()
    assert transport.written == []
    transport.closing = False
    writer.flush()
    assert transport.written == []  # dropped, not kept for later
