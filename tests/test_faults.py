"""Faults: a transport dying mid-task, handlers raising, a killed server process,
a slow reader, and a storm of cancels racing completions.

What the runtime promises, and these tests hold it to:

* requestor side: when the transport dies, every waiter (a plain call, a
  ``tasks/result``, a follower polling ``tasks/get``) wakes at once with
  :class:`trio_mcp.ConnectionClosed`, and later calls fail the same way;
* receiver side: the task outlives the connection; its result stays
  retrievable for its TTL by the same identity over a new connection;
* a slow reader: responses and requests WAIT for room on the bounded bus
  (backpressure); a peer handles at most ``MAX_CONCURRENT_REQUESTS`` requests
  of the other side at once, and beyond that it answers -32000 *and stops
  reading* until the answer is written, so memory stays bounded and the
  sender waits; optional notifications queue up to ``NOTIFICATION_QUEUE``,
  then are DROPPED with a logged warning.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

import trio_mcp
from trio_mcp import TaskStatus
from trio_mcp.peer._messages._jsonrpc import ErrorResponse, Notification, Request, Response
from trio_mcp.peer._session import _outbound, memory_bus_pair, open_bus, run_memory_link
from trio_mcp.peer._session import _session as _session_module

from tests.fuzz_wire import StdioTarget
from tests.helpers import ROOT, client_app
from tests.reliability.apps import build_fuzz_app, trio_task_count

pytestmark = pytest.mark.timeout(90)
TOKENS = {"token-alice": "alice", "token-bob": "bob"}
FAULTS_SERVER = [sys.executable, "-m", "tests.reliability.apps", "faults"]


def gated_app(limits: trio_mcp.TaskLimits | None = None) -> tuple[trio_mcp.App, trio.Event]:
    """An App with ``gated`` (a task that ends when the event is set) and ``slow``."""
    app = trio_mcp.App("gated", limits=limits or trio_mcp.TaskLimits())
    gate = trio.Event()

    @app.tool(task_support="optional")
    async def gated() -> str:
        await gate.wait()
        return "gate opened"

    @app.tool(task_support="optional")
    async def slow() -> str:
        await trio.sleep(3600)
        return "never"  # pragma: no cover

    return app, gate


@asynccontextmanager
async def killable(kind: str, app: trio_mcp.App) -> AsyncIterator[tuple[trio_mcp.Peer, Any]]:
    """A client peer plus a function that kills its transport abruptly."""
    if kind == "memory":
        client_bus, server_bus, client_ends, server_ends = memory_bus_pair()
        async with trio.open_nursery() as nursery:
            link = trio.CancelScope()

            async def run_link() -> None:
                with link:
                    await run_memory_link(client_ends, server_ends)

            nursery.start_soon(run_link)
            server = trio_mcp.Peer(app, server_bus, trio_mcp.Role.SERVER)
            await nursery.start(server.run)
            async with trio_mcp.open_peer(client_app(), client_bus,
                                          trio_mcp.Role.CLIENT) as client:
                yield client, link.cancel
            nursery.cancel_scope.cancel()
    elif kind == "stdio":
        async with trio_mcp.open_stdio_client(FAULTS_SERVER, client_app(), cwd=str(ROOT)) as client:
            pid = client.bus.info["pid"]
            yield client, partial(os.kill, pid, signal.SIGKILL)
        # Reaped: no zombie is left behind.
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # noqa: ASYNC222 - WNOHANG never blocks
    else:
        async with trio.open_nursery() as nursery:
            server_scope = trio.CancelScope()

            async def serve(task_status: trio.TaskStatus[trio_mcp.WebSocketAddress]) -> None:
                with server_scope:
                    await trio_mcp.serve_websocket(app, "127.0.0.1", 0, task_status=task_status)

            address = await nursery.start(serve)
            async with trio_mcp.open_websocket_client(address.url, client_app()) as client:
                yield client, server_scope.cancel
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("kind", ["memory", "stdio", "ws"])
async def test_faults_transport_dies_mid_task_every_waiter_gets_connection_closed(
    kind: str,
) -> None:
    app, _ = gated_app()
    baseline = trio_task_count()
    outcomes: list[tuple[str, BaseException | None]] = []
    async with killable(kind, app) as (client, kill):
        handles = [await client.call_tool_task("slow", {}) for _ in range(2)]

        async def waiter(name: str, fn: Any) -> None:
            try:
                await fn()
            except trio_mcp.ConnectionClosed as exc:
                outcomes.append((name, exc))
            else:  # pragma: no cover - a bug
                outcomes.append((name, None))

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(waiter, "plain call", partial(client.call_tool, "slow", {}))
                nursery.start_soon(waiter, "follower", handles[0].wait)
                nursery.start_soon(waiter, "result", handles[1].result)
                await trio.testing.wait_all_tasks_blocked()
                kill()
        for fn in (client.ping, handles[0].status, handles[1].result,
                   partial(client.call_tool_task, "slow", {})):
            with pytest.raises(trio_mcp.ConnectionClosed):
                await fn()
        assert not client.is_open and not client.session.pending._pending
    names = sorted(name for name, exc in outcomes if isinstance(exc, trio_mcp.ConnectionClosed))
    assert names == ["follower", "plain call", "result"], outcomes
    assert trio_task_count() == baseline


async def test_faults_receiver_keeps_the_task_and_its_result_over_a_new_websocket() -> None:
    """The requestor's connection drops abruptly (no closing handshake) while it
    waits on tasks/result; the task finishes anyway, and the same identity reads
    the result over a new connection until the TTL runs out."""
    app, gate = gated_app(trio_mcp.TaskLimits(default_ttl=1_500, max_ttl=1_500))
    async with trio.open_nursery() as nursery:
        address = await nursery.start(partial(trio_mcp.serve_websocket, app, tokens=TOKENS))
        woken: list[BaseException] = []

        async def wait_for_result(handle: trio_mcp.TaskHandle[Any]) -> None:
            try:
                await handle.result()
            except trio_mcp.ConnectionClosed as exc:
                woken.append(exc)

        with trio.CancelScope() as dropped:
            async with trio_mcp.open_websocket_client(address.url, token="token-alice") as alice:
                handle = await alice.call_tool_task("gated", {})
                task_id = handle.task_id
                # A tasks/result held open on the server.
                nursery.start_soon(wait_for_result, handle)
                await trio.sleep(0.05)
                dropped.cancel()  # the TCP connection is closed at once (1006)
                await trio.sleep_forever()
        await trio.testing.wait_all_tasks_blocked()
        assert len(woken) == 1
        with trio.fail_after(10):
            while app.registry.live_peer("identity:alice") is not None:  # noqa: ASYNC110
                await trio.sleep(0.01)  # the server notices the drop on its own time
        (actor,) = app.registry.actors()
        assert actor.record.status is TaskStatus.WORKING
        gate.set()
        with trio.fail_after(10):
            await actor.done.wait()
        record = app.registry.records.get(task_id)
        assert record is not None and record.status is TaskStatus.COMPLETED

        async with trio_mcp.open_websocket_client(address.url, token="token-alice") as alice:
            assert (await alice.get_task(task_id)).status is TaskStatus.COMPLETED
            result = await alice.task_handle(task_id, trio_mcp.CallToolResult).result()
            assert result.text == "gate opened"
        async with trio_mcp.open_websocket_client(address.url, token="token-bob") as bob:
            with pytest.raises(trio_mcp.RemoteError) as got:
                await bob.task_result(task_id)
            assert got.value.code == trio_mcp.INVALID_PARAMS
        # Retrievable for its TTL, and not after.
        await trio.sleep_until(record.deadline)
        async with trio_mcp.open_websocket_client(address.url, token="token-alice") as alice:
            with pytest.raises(trio_mcp.RemoteError) as got:
                await alice.task_result(task_id)
            assert got.value.code == trio_mcp.INVALID_PARAMS
        assert app.registry.records.get(task_id) is None
        nursery.cancel_scope.cancel()


# --- handlers that raise ------------------------------------------------------------------


def raising_app() -> trio_mcp.App:
    app = trio_mcp.App("raising")

    @app.tool(task_support="optional")
    async def boom() -> str:
        raise RuntimeError("boom")

    @app.tool(task_support="optional")
    async def refuse() -> str:
        raise trio_mcp.McpError(trio_mcp.INVALID_PARAMS, "refused on purpose")

    @app.tool(task_support="optional")
    async def nan() -> dict[str, Any]:
        return {"x": math.nan}

    @app.tool(task_support="optional")
    async def ask(ctx: trio_mcp.RequestContext) -> str:
        reply = await ctx.sample("hi", as_task=False)
        return reply.text  # pragma: no cover - the client's handler raises

    return app


async def test_faults_handlers_that_raise_are_answered_and_the_connection_lives() -> None:
    client = trio_mcp.App("client-with-a-bug")

    @client.on_sampling
    async def sample(ctx: trio_mcp.RequestContext,
                     params: trio_mcp.CreateMessageParams) -> trio_mcp.CreateMessageResult:
        raise KeyError("client handler bug")

    async with trio_mcp.open_memory_pair(raising_app(), client) as (peer, server):
        # A tool raising is a tool error (isError), not a protocol error.
        result = await peer.call_tool("boom")
        assert result.is_error and "RuntimeError" in result.text
        with pytest.raises(trio_mcp.RemoteError) as got:
            await peer.call_tool("refuse")
        assert (got.value.code, got.value.message) == (trio_mcp.INVALID_PARAMS,
                                                       "refused on purpose")
        # The client's handler raising: the server's request gets -32603, the
        # tool turns that into its own error result.
        result = await peer.call_tool("ask")
        assert result.is_error and "Internal error" in result.text
        # The same as tasks.
        boom = await peer.call_tool_task("boom")
        assert (await boom.wait()).status is TaskStatus.FAILED
        assert (await boom.result()).is_error
        refuse = await peer.call_tool_task("refuse")
        assert (await refuse.wait()).status is TaskStatus.FAILED
        with pytest.raises(trio_mcp.RemoteError) as got:
            await refuse.result()
        assert got.value.message == "refused on purpose"
        # A progress callback raising is logged; the call still completes.
        outcome = await peer.call_tool("boom", progress=lambda p: 1 / 0)
        assert outcome.is_error
        await peer.ping()
        await server.ping()
        assert not server.session._inflight and not peer.session.pending._pending


@pytest.mark.parametrize("kind", ["memory", "ws"])
async def test_regression_unencodable_result_does_not_break_the_memory_link(kind: str) -> None:
    """A handler result that is not JSON (NaN) is answered -32603 for its id, once,
    on every transport. The in-memory link used to encode with ``encode_message``
    and die with ValueError, taking both peers of ``open_memory_pair`` down;
    it now encodes with ``encode_for_wire`` like the stdio and WebSocket ones."""
    async with trio.open_nursery() as nursery:
        if kind == "memory":
            peer, _ = await nursery.start(_hold, trio_mcp.open_memory_pair(raising_app()))
        else:
            address = await nursery.start(partial(trio_mcp.serve_websocket, raising_app()))
            peer = await nursery.start(_hold, trio_mcp.open_websocket_client(address.url))
        with pytest.raises(trio_mcp.RemoteError) as got:
            await peer.call_tool("nan")
        assert got.value.code == trio_mcp.INTERNAL_ERROR
        nan = await peer.call_tool_task("nan")
        assert (await nan.wait()).status is TaskStatus.COMPLETED
        with pytest.raises(trio_mcp.RemoteError) as got:
            await nan.result()
        assert got.value.code == trio_mcp.INTERNAL_ERROR
        await peer.ping()
        nursery.cancel_scope.cancel()


async def test_faults_stdio_task_that_raises_fails_cleanly() -> None:
    async with trio_mcp.open_stdio_client(FAULTS_SERVER, cwd=str(ROOT)) as peer:
        handle = await peer.call_tool_task("crash", {"message": "on purpose"})
        assert (await handle.wait()).status is TaskStatus.FAILED
        result = await handle.result()
        assert result.is_error and "tool crashed: on purpose" in result.text
        await peer.ping()


async def test_faults_stdio_server_killed_between_calls_is_reported_and_cleaned_up() -> None:
    baseline = trio_task_count()
    async with trio_mcp.open_stdio_client(FAULTS_SERVER, cwd=str(ROOT)) as peer:
        pid = peer.bus.info["pid"]
        await peer.ping()
        os.kill(pid, signal.SIGKILL)
        with trio.fail_after(10):
            with pytest.raises(trio_mcp.ConnectionClosed):
                while True:
                    await peer.ping()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # noqa: ASYNC222 - WNOHANG never blocks
    assert not await trio.Path(f"/proc/{pid}").exists()
    assert trio_task_count() == baseline


# --- slow readers -------------------------------------------------------------------------


async def test_regression_slow_reader_cannot_grow_handler_tasks_without_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A peer that sends requests but never reads the answers used to make the
    other side start one Trio task per request, each waiting to send its
    answer: 50,000 pings cost ~160 MB. Now at most MAX_CONCURRENT_REQUESTS are
    handled at once; beyond that the peer answers -32000 itself, which waits
    for room like every answer, and so stops reading: the sender waits."""
    monkeypatch.setattr(_session_module, "MAX_CONCURRENT_REQUESTS", 100)
    bus, ends = open_bus(capacity=16)
    async with trio.open_nursery() as nursery:
        peer = trio_mcp.Peer(build_fuzz_app(), bus, trio_mcp.Role.SERVER)
        await nursery.start(peer.run)
        baseline = trio_task_count()
        sent = 0
        while sent <= 10_000:
            try:
                ends.to_peer.send_nowait(Request(sent, "ping"))
            except trio.WouldBlock:
                # Full: let the peer run until everything waits, then retry once.
                await trio.testing.wait_all_tasks_blocked()
                try:
                    ends.to_peer.send_nowait(Request(sent, "ping"))
                except trio.WouldBlock:
                    break  # the peer stopped reading: the sender must wait
            sent += 1
        assert sent <= 10_000, "the sender never had to wait"
        # Bounded: the handlers, one bus of answers, one of requests.
        assert sent <= 100 + 16 + 16 + 2
        assert trio_task_count() - baseline <= 100 + 2
        # Reading again drains everything: one answer per request.
        answers: Counter[str] = Counter()
        seen: set[int] = set()
        while len(seen) < sent:
            msg = await ends.from_peer.receive()
            assert isinstance(msg, Response | ErrorResponse)
            assert isinstance(msg.id, int) and msg.id not in seen
            seen.add(msg.id)
            if isinstance(msg, ErrorResponse):
                assert msg.error.code == trio_mcp.RESOURCE_LIMIT
                assert "Too many concurrent requests" in msg.error.message
                answers["busy"] += 1
            else:
                answers["pong"] += 1
        assert answers["pong"] >= 100 and answers["busy"] >= 1
        await ends.to_peer.send(Request("after", "ping"))
        assert await ends.from_peer.receive() == Response("after", {})
        nursery.cancel_scope.cancel()


async def test_faults_stdio_slow_reader_backpressure_reaches_the_writer() -> None:
    """Over a real pipe: the client writes 20,000 pings without reading (without
    the concurrency bound, the server parked all 20,000 answers: +26 MB peak). The
    server's memory stays flat (it stops reading once its answers back up, so
    the client's writes wait in the pipe), and once the client reads, every
    ping gets exactly one answer (a pong, or -32000 past the concurrency bound)."""
    n = 20_000
    target = StdioTarget()
    await target.start()
    try:
        await target.initialize()
        before = await target.settle()

        async def write_all() -> None:
            data = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i
                            for i in range(n))
            await target.write(data)

        seen: Counter[str] = Counter()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write_all)
            await trio.sleep(0.5)  # not reading: let the server back up
            with trio.fail_after(60):
                while sum(seen.values()) < n:
                    msg = await target.read()
                    assert isinstance(msg["id"], int)
                    seen["pong" if msg.get("result") == {} else msg["error"]["code"]] += 1
        after = await target.settle()
    finally:
        await target.stop()
    assert sum(seen.values()) == n and set(seen) <= {"pong", trio_mcp.RESOURCE_LIMIT}, seen
    assert after["trio_tasks"] == before["trio_tasks"]
    # 20,000 parked answers used to cost ~64 MB; now at most 1,024 are.
    assert after["rss_peak_kib"] - before["rss_peak_kib"] < 16 * 1024, (before, after, seen)


async def test_faults_slow_reader_notifications_are_dropped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Optional notifications never make a handler wait: past the bus and
    NOTIFICATION_QUEUE they are dropped and each drop is logged. The response
    itself waits for room and is delivered."""
    caplog.set_level(logging.WARNING, logger="trio_mcp.peer")
    app = trio_mcp.App("chatty")
    flood = _outbound.NOTIFICATION_QUEUE + 500

    @app.tool()
    async def chatter(ctx: trio_mcp.RequestContext) -> str:
        for i in range(flood):
            ctx.peer.notify_soon("notifications/message", {"level": "info", "data": i})
        return "said it all"

    bus, ends = open_bus(capacity=16)
    async with trio.open_nursery() as nursery:
        peer = trio_mcp.Peer(app, bus, trio_mcp.Role.SERVER)
        await nursery.start(peer.run)
        for msg in (Request(0, "initialize", {"protocolVersion": "2025-11-25",
                                              "capabilities": {},
                                              "clientInfo": {"name": "c", "version": "1"}}),):
            await ends.to_peer.send(msg)
        assert isinstance(await ends.from_peer.receive(), Response)
        await ends.to_peer.send(Notification("notifications/initialized"))
        await ends.to_peer.send(Request(1, "tools/call", {"name": "chatter", "arguments": {}}))
        await trio.testing.wait_all_tasks_blocked()
        # Nothing has been read: the queues are full, and bounded.
        assert peer.session._notes_send.statistics().current_buffer_used == _outbound.NOTIFICATION_QUEUE
        assert ends.from_peer.statistics().current_buffer_used == 16
        drops = [r for r in caplog.records if "notification queue full" in r.getMessage()]
        # The bus, the queue, and the one the queue's pump holds, waiting for room.
        accepted = _outbound.NOTIFICATION_QUEUE + 16 + 1
        assert len(drops) == flood - accepted
        notes = 0
        response = None
        while response is None or notes < flood - len(drops):
            msg = await ends.from_peer.receive()
            if isinstance(msg, Notification):
                notes += 1
            else:
                assert response is None
                response = msg
        assert isinstance(response, Response)
        assert response.result["content"][0]["text"] == "said it all"
        assert notes == accepted
        nursery.cancel_scope.cancel()


# --- cancellation storms --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "ws"])
async def test_faults_1000_cancels_racing_1000_completions(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Every task ends in exactly one terminal state, each cancel either wins
    (the task is cancelled) or is refused because the task already completed,
    and no exception escapes."""
    caplog.set_level(logging.INFO, logger="trio_mcp.audit")
    n = 1000
    app, gate = gated_app(trio_mcp.TaskLimits(max_live_per_requestor=n))
    async with trio.open_nursery() as nursery:
        if kind == "memory":
            connected = trio_mcp.open_memory_pair(app)
            client, _ = await nursery.start(_hold, connected)
        else:
            address = await nursery.start(partial(trio_mcp.serve_websocket, app))
            client = await nursery.start(_hold, trio_mcp.open_websocket_client(address.url))
        handles = []
        for _ in range(n):
            handles.append(await client.call_tool_task("gated", {}))
        cancels: dict[str, Any] = {}

        async def cancel(handle: trio_mcp.TaskHandle[Any]) -> None:
            try:
                cancels[handle.task_id] = (await handle.cancel()).status
            except trio_mcp.RemoteError as exc:
                cancels[handle.task_id] = exc

        with trio.fail_after(60):
            async with trio.open_nursery() as storm:
                for i, handle in enumerate(handles):
                    storm.start_soon(cancel, handle)
                    if i == n // 2:
                        storm.start_soon(_open, gate)
                    if i % 50 == 0:
                        await trio.lowlevel.checkpoint()
        terminal = Counter[str]()
        for handle in handles:
            final = await handle.wait()
            assert final.status in (TaskStatus.CANCELLED, TaskStatus.COMPLETED)
            outcome = cancels[handle.task_id]
            if outcome is TaskStatus.CANCELLED:
                assert final.status is TaskStatus.CANCELLED
                with pytest.raises(trio_mcp.RemoteError):
                    await handle.result()
            else:
                assert isinstance(outcome, trio_mcp.RemoteError)
                assert outcome.code == trio_mcp.INVALID_PARAMS
                assert "already in terminal status 'completed'" in outcome.message
                assert final.status is TaskStatus.COMPLETED
                assert (await handle.result()).text == "gate opened"
            terminal[final.status.value] += 1
        assert sum(terminal.values()) == n
        nursery.cancel_scope.cancel()
    # The audit log shows one terminal transition per task, never two.
    per_task = Counter[str]()
    for record in caplog.records:
        words = record.getMessage().split()
        if len(words) > 2 and words[0] == "task" and words[1] in ("completed", "cancelled"):
            per_task[words[2]] += 1
    assert len(per_task) == n and set(per_task.values()) == {1}
    assert app.registry.live_count() == 0


async def _open(gate: trio.Event) -> None:
    gate.set()


async def _hold(manager: Any, *, task_status: trio.TaskStatus[Any]) -> None:
    """Enter an async context manager in a nursery task; hand back its value."""
    async with manager as value:
        task_status.started(value)
        await trio.sleep_forever()


def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)
