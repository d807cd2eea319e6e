"""The stdio reader lends its task to the requests it dispatches (``ReaderTask``).

An ``async def`` tool that does not wait is answered in the reader's own task: no Trio
task per call. One that waits keeps that task and reading goes on in a new one, so the
tool runs where its traps and cancel scopes were recorded, and ``notifications/cancelled``
still stops it with a real cancel scope at whatever it awaits (MCP 2025-11-25,
basic/utilities/cancellation: the receiver "SHOULD stop processing the cancelled request"
and "not send a response"). Served over OS pipes by the real transport and session.
"""

from __future__ import annotations

import contextvars
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel

import trio_mcp
from trio_mcp.peer import Peer, Role, open_bus
from trio_mcp.transports._stdio import run_stream_transport

pytestmark = pytest.mark.timeout(30)


def _pipe() -> tuple[trio.lowlevel.FdStream, trio.lowlevel.FdStream]:
    r, w = os.pipe()
    return trio.lowlevel.FdStream(r), trio.lowlevel.FdStream(w)


@attrs.define(eq=False)
class Wire:
    """The client's end of the pipes: NDJSON lines written and read by the test."""

    out: trio.lowlevel.FdStream
    into: trio.lowlevel.FdStream
    _buffer: bytes = b""

    async def send(self, *messages: dict[str, Any]) -> None:
        """Write ``messages`` in one write (a pipelining client)."""
        await self.out.send_all(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            data = await self.into.receive_some()
            assert data, "the server closed its output"
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    async def initialize(self) -> None:
        """The 2025-11-25 handshake."""
        await self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "wire", "version": "1"}}})  # fmt: skip
        assert "result" in await self.receive()
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self, request_id: int, name: str, **arguments: Any) -> None:
        await self.send(_call(request_id, name, **arguments))


def _call(request_id: int, name: str, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}  # fmt: skip


def _cancel(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "test"}}  # fmt: skip


def _text(answer: dict[str, Any]) -> str:
    text: str = answer["result"]["content"][0]["text"]
    return text


class Spawned(trio.abc.Instrument):
    """Counts the Trio tasks spawned while installed."""

    def __init__(self) -> None:
        self.count = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.count += 1


@asynccontextmanager
async def served(app: trio_mcp.App) -> AsyncIterator[Wire]:
    """``app`` served over a pair of OS pipes, initialized."""
    server_in, client_out = _pipe()
    client_in, server_out = _pipe()
    bus, ends = open_bus(info={"transport": "stdio"})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_stream_transport, server_in, server_out, ends)
        await nursery.start(Peer(app, bus, Role.SERVER).run)
        wire = Wire(client_out, client_in)
        await wire.initialize()
        yield wire
        nursery.cancel_scope.cancel()


def _app() -> tuple[trio_mcp.App, list[trio.lowlevel.Task]]:
    app = trio_mcp.App("reader-task")
    tasks: list[trio.lowlevel.Task] = []

    @app.tool()
    async def echo(text: str) -> str:
        tasks.append(trio.lowlevel.current_task())
        return text

    return app, tasks


async def test_an_async_tool_that_does_not_wait_runs_in_the_readers_task() -> None:
    app, tasks = _app()
    async with served(app) as wire:
        await wire.call(1, "echo", text="warm")
        await wire.receive()
        spawned = Spawned()
        trio.lowlevel.add_instrument(spawned)
        try:
            await wire.call(2, "echo", text="one")
            assert _text(await wire.receive()) == "one"
            # 50 calls in one write: each answered in the reader's task too
            await wire.send(*(_call(10 + i, "echo", text=str(i)) for i in range(50)))
            answers = [await wire.receive() for _ in range(50)]
        finally:
            trio.lowlevel.remove_instrument(spawned)
    assert spawned.count == 0
    assert [a["id"] for a in answers] == list(range(10, 60))
    assert [_text(a) for a in answers] == [str(i) for i in range(50)]
    assert len({id(task) for task in tasks}) == 1  # the one reader's
    assert tasks[0].coro.cr_code.co_qualname == "_LineReader.run"


async def test_a_tool_that_waits_keeps_the_task_and_reading_goes_on_in_a_new_one() -> None:
    app, tasks = _app()
    release = trio.Event()
    waited_in: list[trio.lowlevel.Task] = []

    @app.tool()
    async def wait() -> str:
        waited_in.append(trio.lowlevel.current_task())
        await release.wait()
        waited_in.append(trio.lowlevel.current_task())
        return "released"

    async with served(app) as wire:
        spawned = Spawned()
        trio.lowlevel.add_instrument(spawned)
        try:
            # the waiting call and two more in one write: the two are the next reader's
            await wire.send(_call(1, "wait"), _call(2, "echo", text="a"), _call(3, "echo", text="b"))
            assert [_text(await wire.receive()) for _ in range(2)] == ["a", "b"]
            release.set()
            assert await wire.receive() == {"jsonrpc": "2.0", "id": 1, "result": {
                "content": [{"type": "text", "text": "released"}], "isError": False}}  # fmt: skip
        finally:
            trio.lowlevel.remove_instrument(spawned)
    assert spawned.count == 1  # the reader that went on
    assert waited_in[0] is waited_in[1]  # the tool never moved
    assert waited_in[0].coro.cr_code.co_qualname == "_LineReader.run"
    assert all(task is not waited_in[0] for task in tasks)


async def _nursery_child(reached: trio.Event) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.sleep_forever)
        reached.set()


async def _after_a_first_wait(reached: trio.Event) -> None:
    await trio.sleep(0.01)  # a first wait that ends
    await trio.lowlevel.checkpoint()
    reached.set()
    await trio.sleep_forever()


async def _in_its_own_scope(reached: trio.Event) -> None:
    with trio.move_on_after(3600):  # entered before the first wait, in the reader's task
        reached.set()
        await trio.sleep(3600)


async def _at_an_event(reached: trio.Event) -> None:
    never = trio.Event()
    reached.set()
    await never.wait()


async def _in_a_thread(reached: trio.Event) -> None:
    reached.set()
    await trio.to_thread.run_sync(time.sleep, 2, abandon_on_cancel=True)  # (left to end)
    await trio.sleep_forever()


async def _at_a_lock(reached: trio.Event) -> None:
    lock = trio.Lock()
    async with trio.open_nursery() as nursery:
        await lock.acquire()
        nursery.start_soon(lock.acquire)  # (waits for ever: the other holds it)
        reached.set()
        await trio.sleep_forever()


WAITS: dict[str, Callable[[trio.Event], Awaitable[None]]] = {
    "event": _at_an_event,
    "after a first wait": _after_a_first_wait,
    "own cancel scope": _in_its_own_scope,
    "nursery child": _nursery_child,
    "thread": _in_a_thread,
    "lock": _at_a_lock,
}


@pytest.mark.parametrize("where", list(WAITS))
async def test_notifications_cancelled_stops_a_tool_waiting_in_the_readers_task(
    where: str,
) -> None:
    """Cancelled at every kind of await point, the tool stops (its ``finally`` runs with
    ``Cancelled``), the request is never answered, and the connection keeps working."""
    app, _ = _app()
    reached = trio.Event()
    ended: list[str] = []

    @app.tool()
    async def blocked() -> str:
        try:
            await WAITS[where](reached)
        except BaseException as exc:  # Cancelled (from a nursery: a group of them)
            only_cancelled = isinstance(exc, BaseExceptionGroup) and (
                exc.split(trio.Cancelled)[1] is None
            )
            ended.append("cancelled" if isinstance(exc, trio.Cancelled) or only_cancelled
                         else repr(exc))  # fmt: skip
            raise
        return "finished?"  # pragma: no cover

    async with served(app) as wire:
        await wire.call(1, "blocked")
        with trio.fail_after(10):
            await reached.wait()
        await wire.send(_cancel(1))
        await wire.call(2, "echo", text="still here")
        answer = await wire.receive()  # the first answer after the cancel: not request 1's
        assert (answer["id"], _text(answer)) == (2, "still here")
        with trio.fail_after(10):
            while not ended:  # noqa: ASYNC110
                await trio.sleep(0.01)
    assert ended == ["cancelled"]


async def test_a_variable_a_tool_sets_before_waiting_stays_its_own() -> None:
    """The request runs in a copy of the reader's context: what it sets there is not
    seen by the requests the next reader dispatches."""
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    app = trio_mcp.App("context")
    release = trio.Event()

    @app.tool()
    async def set_then_wait() -> str:
        var.set("set by the first")
        await release.wait()
        return var.get()

    @app.tool()
    async def read() -> str:
        return var.get()

    async with served(app) as wire:
        await wire.send(_call(1, "set_then_wait"), _call(2, "read"))
        assert _text(await wire.receive()) == "unset"  # request 2, while 1 waits
        release.set()
        assert _text(await wire.receive()) == "set by the first"
        await wire.call(3, "read")
        assert _text(await wire.receive()) == "unset"


async def test_end_of_input_cancels_a_tool_that_holds_the_readers_task() -> None:
    app, _ = _app()
    reached = trio.Event()
    ended: list[str] = []

    @app.tool()
    async def forever() -> str:
        try:
            reached.set()
            await trio.sleep_forever()
        finally:
            ended.append("ended")
        return "never"  # pragma: no cover

    server_in, client_out = _pipe()
    client_in, server_out = _pipe()
    bus, ends = open_bus()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_stream_transport, server_in, server_out, ends)
            nursery.start_soon(Peer(app, bus, Role.SERVER).run)
            wire = Wire(client_out, client_in)
            await wire.initialize()
            await wire.call(1, "forever")
            await reached.wait()
            await client_out.aclose()  # EOF: the transport and the peer end on their own
    assert ended == ["ended"]
