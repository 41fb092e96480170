"""Goal: the DelayProxy adds latency without corrupting the stream: every byte arrives, in
order, both ways, while the delay changes mid-stream; the end of a stream passes through.

Method: an in-process echo server behind a DelayProxy on 127.0.0.1; a client writes numbered
chunks while the test moves the delay between 0, 20 and 5 ms, then ends its side; it must read
back exactly what it wrote, then the end of the stream."""

from __future__ import annotations

import asyncio

from tests.support.delay_proxy import DelayProxy

CHUNKS = 300


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(4096):
        writer.write(data)
        await writer.drain()
    writer.close()


async def test_bytes_arrive_whole_and_in_order_while_the_delay_changes() -> None:
    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy = await DelayProxy(("127.0.0.1", 0), lambda: ("127.0.0.1", port)).start()
    try:
        reader, writer = await asyncio.open_connection(*proxy.listen)
        sent = bytearray()
        for i in range(CHUNKS):
            proxy.set_delay((0.0, 0.02, 0.005)[i % 3])
            proxy.to_client_s = 0.0 if i % 7 == 0 else proxy.to_client_s  # directions apart
            chunk = b"%06d:" % i + b"x" * (i % 50)
            writer.write(chunk)
            sent += chunk
            await writer.drain()
        writer.write_eof()
        echoed = await asyncio.wait_for(reader.read(), 30)  # to the end of the stream
        assert echoed == bytes(sent)
        writer.close()
    finally:
        await proxy.close()
        server.close()
        await server.wait_closed()
