"""The NDJSON transport over OS pipes (trio FdStream), read and written directly.

The reader takes one schedule point per read (so a flood cannot starve other
tasks), the writer joins queued messages into one write (order kept) and
finishes writes larger than the pipe buffer.
"""

from __future__ import annotations

import os
import subprocess
from functools import partial

import trio
import trio.lowlevel

from trio_mcp.peer._messages._jsonrpc import Notification, Request
from trio_mcp.peer._session import open_bus
from trio_mcp.transports._stdio import run_stream_transport


def _pipe() -> tuple[trio.lowlevel.FdStream, trio.lowlevel.FdStream]:
    r, w = os.pipe()
    return trio.lowlevel.FdStream(r), trio.lowlevel.FdStream(w)


async def test_stdio_pipes_flood_does_not_starve_other_tasks() -> None:
    """A process writing a newline-free flood as fast as it can: other tasks still run."""
    proc = await trio.lowlevel.open_process(
        ["cat", "/dev/zero"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    )
    assert isinstance(proc.stdout, trio.lowlevel.FdStream)
    _, our_out = _pipe()
    _, ends = open_bus()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.lowlevel.checkpoint()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(run_stream_transport, proc.stdout, our_out, ends, max_line=1024))
            nursery.start_soon(ticker)
            await trio.sleep(0.3)
            nursery.cancel_scope.cancel()
    finally:
        proc.kill()
        await proc.wait()
    assert ticks > 10


async def test_stdio_pipes_batched_writes_keep_order_and_large_messages() -> None:
    """Many queued messages, some far larger than a pipe buffer, arrive whole and in order."""
    a_in, b_out = _pipe()
    b_in, a_out = _pipe()
    bus_a, ends_a = open_bus()
    bus_b, ends_b = open_bus()
    sizes = [10, 200_000, 5, 1_000_000, 7] * 4
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_stream_transport, a_in, a_out, ends_a)
        nursery.start_soon(run_stream_transport, b_in, b_out, ends_b)

        async def send_all() -> None:
            for i, size in enumerate(sizes):
                await bus_a.outgoing.send(Request(i, "x" * size))
            await bus_a.outgoing.send(Notification("done"))

        nursery.start_soon(send_all)
        got = []
        async for item in bus_b.incoming:
            if isinstance(item, Notification):
                break
            assert isinstance(item, Request)
            got.append((item.id, len(item.method)))
        assert got == list(enumerate(sizes))
        nursery.cancel_scope.cancel()


async def test_stdio_pipes_eof_ends_the_incoming_stream() -> None:
    our_in, their_out = _pipe()
    _, our_out = _pipe()
    bus, ends = open_bus()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_stream_transport, our_in, our_out, ends)
        await their_out.send_all(b'{"jsonrpc":"2.0","method":"a"}\n{"jsonrpc":"2.0","method":"b"}')
        await their_out.aclose()
        items = [item async for item in bus.incoming]
        assert items == [Notification("a"), Notification("b")]
        nursery.cancel_scope.cancel()


async def test_stdio_pipes_write_soon_never_overtakes_the_bus() -> None:
    """Answers collected with write_soon go out before what is queued after them, and
    once anything went to the bus (a write_now refused) nothing more is collected."""
    from trio_mcp.peer._messages._jsonrpc import Response
    from trio_mcp.transports._pipes import DirectWriter

    read_end, write_end = _pipe()
    _bus, ends = open_bus()
    direct = DirectWriter(write_end, ends)
    direct.idle = True  # as the writer task sets it while it waits on an empty bus
    assert direct.write_soon(Response(1, {}))  # opens a collection, wakes the writer
    assert not direct.idle
    assert not direct.write_now(Notification("notifications/progress", {}))  # to the bus
    assert not direct.write_soon(Response(2, {}))  # must not jump ahead of it
    assert direct.take_unwritten() == b""  # the writer's pass writes the collection first
    data = os.read(read_end.fileno(), 65536)
    assert data == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    direct.idle = True  # the writer waits again
    for i in range(64):  # a full collection is written at once, in order
        assert direct.write_soon(Response(i, {}))
    data = os.read(read_end.fileno(), 1 << 20)
    assert [line[:20] for line in data.splitlines()] == [
        f'{{"jsonrpc":"2.0","id":{i},'.encode()[:20] for i in range(64)]
    # A full pipe (an unwritten rest) ends collecting: the bus's backpressure takes over.
    direct.idle = True
    direct.leftover = b"rest"
    assert not direct.write_soon(Response(99, {})) and not direct.write_now(Response(99, {}))
    assert direct.take_unwritten() == b"rest"
    await read_end.aclose()
    await write_end.aclose()
