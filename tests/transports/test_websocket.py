"""The WebSocket transport, over real sockets on 127.0.0.1 (port 0)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
import trio_websocket

import trio_mcp
from trio_mcp import TaskStatus
from trio_mcp._util import unwrap_group
from trio_mcp.transports._websocket_client import _header_value

from tests.helpers import TASK_SERVER, client_app, connect, example_app

pytestmark = pytest.mark.timeout(60)

TOKENS = {"token-alice": "alice", "token-bob": "bob"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": trio_mcp.LATEST_PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "raw-test-client", "version": "1.0"},
    },
}


# --- helpers ---------------------------------------------------------------------------------


@asynccontextmanager
async def serving(app: trio_mcp.App, **kwargs: Any) -> AsyncIterator[trio_mcp.WebSocketAddress]:
    """Run ``serve_websocket(app, **kwargs)`` on 127.0.0.1 for the block."""
    async with trio.open_nursery() as nursery:
        address: trio_mcp.WebSocketAddress = await nursery.start(
            partial(trio_mcp.serve_websocket, app, **kwargs)
        )
        yield address
        nursery.cancel_scope.cancel()


def gated_app(**kwargs: Any) -> tuple[trio_mcp.App, trio.Event]:
    """The example app plus a ``gated`` tool that finishes when the event is set."""
    app = example_app(**kwargs)
    gate = trio.Event()

    @app.tool(task_support="optional")
    async def gated() -> str:
        """Finish when the test opens the gate."""
        await gate.wait()
        return "gate opened"

    return app, gate


async def receive_json(connection: trio_websocket.WebSocketConnection) -> Any:
    with trio.fail_after(10):
        return json.loads(await connection.get_message())


@asynccontextmanager
async def raw_connection(
    address: trio_mcp.WebSocketAddress,
    *,
    subprotocols: list[str] | None = None,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> AsyncIterator[trio_websocket.WebSocketConnection]:
    """A bare trio-websocket client connection to ``address``.

    The test owns the TCP stream and closes it: trio-websocket's own client
    leaves it open when the server rejects the handshake or closes first.
    """
    stream = await trio.open_tcp_stream("127.0.0.1", address.port)
    try:
        with unwrap_group():
            async with trio.open_nursery() as nursery:
                connection = await trio_websocket.wrap_client_stream(
                    nursery,
                    stream,
                    f"127.0.0.1:{address.port}",
                    "/",
                    subprotocols=["mcp"] if subprotocols is None else subprotocols,
                    extra_headers=headers,
                )
                try:
                    yield connection
                finally:
                    with trio.move_on_after(5):
                        await connection.aclose()
    finally:
        await trio.aclose_forcefully(stream)


@asynccontextmanager
async def raw_session(
    address: trio_mcp.WebSocketAddress, *, subprotocols: list[str] | None = None
) -> AsyncIterator[trio_websocket.WebSocketConnection]:
    """A bare WebSocket connection on which ``initialize`` was done by hand."""
    async with raw_connection(address, subprotocols=subprotocols) as connection:
        await connection.send_message(json.dumps(INITIALIZE))
        answer = await receive_json(connection)
        assert answer["id"] == 0 and "result" in answer, answer
        await connection.send_message('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        yield connection


async def assert_ping_works(connection: trio_websocket.WebSocketConnection, id: int) -> None:
    await connection.send_message(json.dumps({"jsonrpc": "2.0", "id": id, "method": "ping"}))
    assert await receive_json(connection) == {"jsonrpc": "2.0", "id": id, "result": {}}


async def rejection(
    address: trio_mcp.WebSocketAddress, headers: list[tuple[bytes, bytes]]
) -> trio_websocket.ConnectionRejected:
    """Open a handshake with ``headers`` and return how the server refused it."""
    with pytest.raises(trio_websocket.ConnectionRejected) as got:
        async with raw_connection(address, headers=headers):
            pass  # pragma: no cover
    return got.value


def text_of(result: trio_mcp.CallToolResult) -> str:
    """The text of a one-text-block tool result."""
    (block,) = result.content
    assert isinstance(block, trio_mcp.TextContent)
    return block.text


def all_tasks() -> set[trio.lowlevel.Task]:
    """Every Trio task alive in this run."""
    found: set[trio.lowlevel.Task] = set()
    todo = [trio.lowlevel.current_root_task()]
    while todo:
        task = todo.pop()
        if task is None or task in found:
            continue
        found.add(task)
        for nursery in task.child_nurseries:
            todo.extend(nursery.child_tasks)
    return found


# --- connecting --------------------------------------------------------------------------------


async def test_websocket_client_negotiates_mcp_subprotocol() -> None:
    app = example_app()
    async with serving(app) as address, trio_mcp.open_websocket_client(
        address.url, client_app()
    ) as client:
        assert address.host == "127.0.0.1" and address.port > 0
        assert address.url == f"ws://127.0.0.1:{address.port}/"
        assert client.bus.info["transport"] == "websocket"
        assert client.bus.info["subprotocol"] == "mcp"
        result = await client.call_tool("echo", {"text": "over websocket"})
        assert text_of(result) == "over websocket"
        assert client.remote_info is not None and client.remote_info.name == "trio-mcp-example"


async def test_websocket_connect_helper_runs_the_example_tools() -> None:
    async with connect("ws") as client:
        await client.ping()
        names = {tool.name for tool in await client.list_all_tools()}
        assert {"echo", "sleep", "fail", "approve", "summarize"} <= names


@pytest.mark.parametrize(
    ("offered", "selected"), [([], None), (["other"], None), (["other", "mcp"], "mcp")]
)
async def test_websocket_server_selects_mcp_only_when_offered(
    offered: list[str], selected: str | None
) -> None:
    async with serving(example_app()) as address, raw_session(
        address, subprotocols=offered
    ) as connection:
        assert connection.subprotocol == selected
        await assert_ping_works(connection, 1)


async def test_websocket_example_server_serves_over_websocket_with_a_token() -> None:
    proc = await trio.lowlevel.open_process(
        [sys.executable, str(TASK_SERVER), "--ws", "127.0.0.1:0", "--token", "t0k", "-v"],
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        seen = b""
        with trio.fail_after(20):
            while b"serving MCP over WebSocket at " not in seen or not seen.endswith(b"\n"):
                chunk = await proc.stderr.receive_some()
                assert chunk, seen
                seen += chunk
        url = seen.split(b"serving MCP over WebSocket at ")[1].split()[0].decode()
        async with trio_mcp.open_websocket_client(url, token="t0k") as client:
            handle = await client.call_tool_task("sleep", {"seconds": 0})
            assert text_of(await handle.result()) == "slept 0 seconds"
        refused = await rejection(
            trio_mcp.WebSocketAddress("127.0.0.1", int(url.rsplit(":", 1)[1].strip("/"))), []
        )
        assert refused.status_code == 401
    finally:
        proc.kill()
        with trio.CancelScope(shield=True):
            await proc.wait()
            if proc.stderr is not None:
                await proc.stderr.aclose()


async def test_websocket_wrap_runs_a_peer_over_an_existing_connection() -> None:
    async with serving(example_app()) as address, raw_connection(
        address
    ) as connection, trio.open_nursery() as nursery:
        bus = trio_mcp.wrap_websocket(connection, nursery, context="someone")
        assert bus.context == "someone"
        async with trio_mcp.open_peer(client_app(), bus, trio_mcp.Role.CLIENT) as client:
            result = await client.call_tool("echo", {"text": "low level"})
            assert text_of(result) == "low level"
    # Leaving the peer closed the bus, which closed the WebSocket.
    assert connection.closed is not None


async def test_websocket_serve_on_a_busy_port_raises_oserror() -> None:
    async with serving(example_app()) as address:
        with pytest.raises(OSError):
            await trio_mcp.serve_websocket(example_app(), "127.0.0.1", address.port)


async def test_websocket_server_survives_a_connection_that_is_not_http() -> None:
    async with serving(example_app()) as address:
        stream = await trio.open_tcp_stream("127.0.0.1", address.port)
        await stream.send_all(b"\x00\x01 this is not an HTTP request\r\n\r\n")
        await stream.aclose()
        async with trio_mcp.open_websocket_client(address.url) as client:
            await client.ping()


# --- many clients ------------------------------------------------------------------------------


async def test_websocket_twenty_clients_run_tasks_at_once() -> None:
    app = example_app()
    outcomes: dict[int, dict[str, Any]] = {}

    async def one_client(n: int, url: str) -> None:
        async with trio_mcp.open_websocket_client(url, client_app(sampling_text=f"s{n}")) as c:
            progress: list[float] = []
            sleep = await c.call_tool_task(
                "sleep",
                {"seconds": 0.02, "steps": 2},
                progress=lambda p: progress.append(p.progress),
            )
            approve = await c.call_tool_task("approve", {"question": f"q{n}"})
            summary = await c.call_tool_task("summarize", {"text": f"text {n}"})
            fail = await c.call_tool_task("fail", {"message": f"boom {n}"})
            listed = {task.task_id async for task in c.iter_tasks()}
            outcomes[n] = {
                "sleep": text_of(await sleep.result()),
                "approve": text_of(await approve.result()),
                "summarize": text_of(await summary.result()),
                "fail": (await fail.wait()).status,
                "ids": {sleep.task_id, approve.task_id, summary.task_id, fail.task_id},
                "listed": listed,
                "progress": progress,
            }

    async with serving(app) as address, trio.open_nursery() as nursery:
        for n in range(20):
            nursery.start_soon(one_client, n, address.url)

    assert sorted(outcomes) == list(range(20))
    every_id: set[str] = set()
    for n, out in outcomes.items():
        assert out["sleep"] == "slept 0.02 seconds"
        assert out["approve"] == f"approved: q{n}"
        assert out["summarize"] == f"s{n}"
        assert out["fail"] is TaskStatus.FAILED
        assert set(out["progress"]) <= {1, 2} and out["progress"] == sorted(out["progress"])
        # Without authentication each connection sees only its own tasks.
        assert out["listed"] == out["ids"]
        every_id |= out["ids"]
    assert len(every_id) == 80


# --- task ownership by identity ----------------------------------------------------------------


async def test_websocket_reconnect_collects_a_result_produced_while_away() -> None:
    app, gate = gated_app()
    async with serving(app, tokens=TOKENS) as address:
        async with trio_mcp.open_websocket_client(address.url, token="token-alice") as client:
            handle = await client.call_tool_task("gated", {}, ttl=60_000)
            task_id = handle.task_id
            assert (await handle.status()).status is TaskStatus.WORKING
        (actor,) = app.registry.actors()
        assert actor.record.owner == "identity:alice"

        # Alice is gone (the close handshake is over; once the server has
        # caught up it has no connection of hers); the task runs on and
        # finishes while she is away.
        await trio.testing.wait_all_tasks_blocked()
        assert app.registry.live_peer("identity:alice") is None
        gate.set()
        with trio.fail_after(10):
            await actor.done.wait()
        assert app.registry.live_peer("identity:alice") is None

        async with trio_mcp.open_websocket_client(address.url, token="token-alice") as client:
            task = await client.get_task(task_id)
            assert task.status is TaskStatus.COMPLETED
            result = await client.task_result(task_id)
            assert result["content"] == [{"type": "text", "text": "gate opened"}]
            assert result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == task_id
            assert [t.task_id async for t in client.iter_tasks()] == [task_id]
            typed = await client.task_handle(task_id, trio_mcp.CallToolResult).result()
            assert text_of(typed) == "gate opened"


async def test_websocket_tokens_isolate_tasks_between_identities() -> None:
    app, gate = gated_app()
    async with serving(app, tokens=TOKENS) as address, trio_mcp.open_websocket_client(
        address.url, token="token-alice"
    ) as alice, trio_mcp.open_websocket_client(address.url, token="token-bob") as bob:
        handle = await alice.call_tool_task("gated", {})
        task_id = handle.task_id

        with pytest.raises(trio_mcp.RemoteError) as got:
            await bob.get_task(task_id)
        assert got.value.code == trio_mcp.INVALID_PARAMS
        with pytest.raises(trio_mcp.RemoteError) as got:
            await bob.task_result(task_id)
        assert got.value.code == trio_mcp.INVALID_PARAMS
        with pytest.raises(trio_mcp.RemoteError) as got:
            await bob.cancel_task(task_id)
        assert got.value.code == trio_mcp.INVALID_PARAMS
        assert (await bob.list_tasks()).tasks == []

        # Bob's attempts changed nothing for Alice.
        assert (await alice.get_task(task_id)).status is TaskStatus.WORKING
        assert [t.task_id for t in (await alice.list_tasks()).tasks] == [task_id]
        assert (await handle.cancel()).status is TaskStatus.CANCELLED
        gate.set()


async def test_websocket_two_tokens_of_one_identity_share_tasks() -> None:
    app, gate = gated_app()
    tokens = {"laptop": "carol", "phone": "carol"}
    async with serving(app, tokens=tokens) as address, trio_mcp.open_websocket_client(
        address.url, token="laptop"
    ) as laptop, trio_mcp.open_websocket_client(address.url, token="phone") as phone:
        handle = await laptop.call_tool_task("gated", {})
        assert (await phone.get_task(handle.task_id)).task_id == handle.task_id
        gate.set()
        assert (await phone.task_result(handle.task_id))["content"][0]["text"] == "gate opened"


async def test_websocket_authenticate_callback_maps_tokens_to_identities() -> None:
    app = example_app()
    seen: list[str] = []

    def authenticate(token: str) -> str | None:
        seen.append(token)
        return f"user-{token[4:]}" if token.startswith("key-") else None

    async with serving(app, authenticate=authenticate) as address:
        async with trio_mcp.open_websocket_client(address.url, token="key-42") as client:
            handle = await client.call_tool_task("sleep", {"seconds": 0})
            await handle.result()
        record = app.registry.records.get(handle.task_id)
        assert record is not None and record.owner == "identity:user-42"
        with pytest.raises(trio_websocket.ConnectionRejected) as got:
            async with trio_mcp.open_websocket_client(address.url, token="nope"):
                pass  # pragma: no cover
        assert got.value.status_code == 401
    assert seen == ["key-42", "nope"]


async def test_websocket_failing_authenticate_callback_is_a_500() -> None:
    def authenticate(token: str) -> str | None:
        raise RuntimeError("the user database is down")

    async with serving(example_app(), authenticate=authenticate) as address:
        refused = await rejection(address, [(b"Authorization", b"Bearer anything")])
        assert refused.status_code == 500
        assert b"database" not in (refused.body or b"")


async def test_websocket_rate_limit_applies_per_identity_across_connections() -> None:
    limits = trio_mcp.TaskLimits(rate_per_second=0.001, rate_burst=2)
    async with serving(example_app(limits), tokens=TOKENS) as address:
        async with trio_mcp.open_websocket_client(address.url, token="token-alice") as alice:
            await alice.list_tasks()
            await alice.list_tasks()
        async with trio_mcp.open_websocket_client(address.url, token="token-alice") as alice:
            with pytest.raises(trio_mcp.RemoteError) as got:
                await alice.list_tasks()
            assert got.value.code == trio_mcp.RESOURCE_LIMIT
            assert "Rate limit" in got.value.message
        async with trio_mcp.open_websocket_client(address.url, token="token-bob") as bob:
            assert (await bob.list_tasks()).tasks == []


# --- handshake security ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "null", "http://localhost.evil.example", "https://127.0.0.1.nip.io"],
)
async def test_websocket_foreign_origin_is_refused_with_403(origin: str) -> None:
    async with serving(example_app()) as address:
        with pytest.raises(trio_websocket.ConnectionRejected) as got:
            async with trio_mcp.open_websocket_client(address.url, origin=origin):
                pass  # pragma: no cover
        assert got.value.status_code == 403


@pytest.mark.parametrize(
    "origin",
    [None, "http://localhost:3000", "http://127.0.0.1", "https://[::1]:8443", "HTTP://LOCALHOST"],
)
async def test_websocket_default_origins_are_allowed(origin: str | None) -> None:
    async with serving(example_app()) as address, trio_mcp.open_websocket_client(
        address.url, origin=origin
    ) as client:
        await client.ping()


async def test_websocket_allowed_origins_extend_the_defaults() -> None:
    allowed = ["https://app.example"]
    async with serving(example_app(), allowed_origins=allowed) as address:
        for origin in ("https://app.example", "https://app.example/", "http://localhost:1"):
            async with trio_mcp.open_websocket_client(address.url, origin=origin) as client:
                await client.ping()
        with pytest.raises(trio_websocket.ConnectionRejected) as got:
            async with trio_mcp.open_websocket_client(address.url, origin="http://app.example"):
                pass  # pragma: no cover
        assert got.value.status_code == 403


def test_websocket_origin_policy() -> None:
    assert trio_mcp.origin_allowed(None)
    assert trio_mcp.origin_allowed("http://localhost:8080")
    assert trio_mcp.origin_allowed("http://[::1]")
    assert not trio_mcp.origin_allowed("http://evil.example")
    assert not trio_mcp.origin_allowed("file://localhost")
    assert not trio_mcp.origin_allowed("http://localhost:notaport")
    assert not trio_mcp.origin_allowed("null")
    assert trio_mcp.origin_allowed("null", ["null"])
    assert trio_mcp.origin_allowed("http://anything.example", ["*"])


@pytest.mark.parametrize("headers", [[], [(b"Authorization", b"Bearer wrong")],
                                     [(b"Authorization", b"Basic dG9rZW4tYWxpY2U=")],
                                     [(b"Authorization", b"Bearer")]])
async def test_websocket_missing_or_wrong_token_is_refused_with_401(
    headers: list[tuple[bytes, bytes]],
) -> None:
    async with serving(example_app(), tokens=TOKENS) as address:
        refused = await rejection(address, headers)
        assert refused.status_code == 401
        # RFC 6750 3.1: a presented bearer token that is refused is invalid_token.
        bearer = any(k.lower() == b"authorization" and v.startswith(b"Bearer ")
                     for k, v in headers)
        challenge = b'Bearer realm="mcp"' + (b', error="invalid_token"' if bearer else b"")
        assert (b"www-authenticate", challenge) in refused.headers
        # The right token still gets in; the bearer scheme is case-insensitive.
        async with raw_connection(
            address, headers=[(b"Authorization", b"bearer token-bob")]
        ) as connection:
            assert connection.closed is None


async def test_websocket_origin_is_checked_before_the_token() -> None:
    async with serving(example_app(), tokens=TOKENS) as address:
        with pytest.raises(trio_websocket.ConnectionRejected) as got:
            async with trio_mcp.open_websocket_client(
                address.url, token="token-alice", origin="http://evil.example"
            ):
                pass  # pragma: no cover
        assert got.value.status_code == 403


def test_websocket_client_refuses_a_token_that_would_break_the_header() -> None:
    with pytest.raises(ValueError, match="token"):
        _header_value("token", "abc\r\nX-Evil: 1")


# --- frames ------------------------------------------------------------------------------------


async def test_websocket_oversized_frame_closes_with_1009() -> None:
    async with serving(example_app(), max_message_size=1024) as address:
        async with raw_session(address) as connection:
            await assert_ping_works(connection, 1)
            await connection.send_message(json.dumps({
                "jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"pad": "x" * 2000}
            }))
            with trio.fail_after(10), pytest.raises(trio_websocket.ConnectionClosed) as got:
                await connection.get_message()
            assert got.value.reason is not None and got.value.reason.code == 1009
        # The server itself carries on.
        async with raw_session(address) as connection:
            await assert_ping_works(connection, 3)


async def test_websocket_client_closes_with_1009_on_an_oversized_answer() -> None:
    async with serving(example_app()) as address, trio_mcp.open_websocket_client(
        address.url, max_message_size=512
    ) as client:
        with pytest.raises(trio_mcp.ConnectionClosed):
            await client.call_tool("echo", {"text": "y" * 2000})
        assert not client.is_open


async def test_websocket_malformed_frame_answers_parse_error_and_carries_on() -> None:
    async with serving(example_app()) as address, raw_session(address) as connection:
        await connection.send_message('{"jsonrpc": "2.0", "id": 1, "method": ')
        answer = await receive_json(connection)
        assert answer["id"] is None
        assert answer["error"]["code"] == trio_mcp.PARSE_ERROR
        await connection.send_message('["a", "batch"]')
        answer = await receive_json(connection)
        assert answer["id"] is None and answer["error"]["code"] == trio_mcp.INVALID_REQUEST
        await assert_ping_works(connection, 2)


async def test_websocket_binary_frame_answers_an_error_and_carries_on() -> None:
    async with serving(example_app()) as address, raw_session(address) as connection:
        await connection.send_message(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        answer = await receive_json(connection)
        assert answer["id"] is None
        assert answer["error"]["code"] == trio_mcp.INVALID_REQUEST
        assert "binary frames are not supported" in answer["error"]["message"]
        await assert_ping_works(connection, 2)


async def test_websocket_each_message_is_one_text_frame() -> None:
    async with serving(example_app()) as address, raw_session(address) as connection:
        # Two requests in one frame are not two messages.
        await connection.send_message(
            '{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"jsonrpc":"2.0","id":2,"method":"ping"}'
        )
        answer = await receive_json(connection)
        assert answer["error"]["code"] == trio_mcp.PARSE_ERROR
        await connection.send_message('{"jsonrpc":"2.0","id":3,"method":"tools/list"}')
        frame = await connection.get_message()
        assert isinstance(frame, str) and "\n" not in frame
        assert json.loads(frame)["id"] == 3


# --- shutdown ----------------------------------------------------------------------------------


async def test_websocket_server_shutdown_with_tasks_running_leaves_no_task_behind() -> None:
    app = example_app()
    before = all_tasks()
    server_scope = trio.CancelScope()
    server_done = trio.Event()
    closed: list[int] = []
    working: list[str] = []
    all_working = trio.Event()

    async def run_server(*, task_status: trio.TaskStatus[trio_mcp.WebSocketAddress]) -> None:
        with server_scope:
            await trio_mcp.serve_websocket(app, task_status=task_status)
        server_done.set()

    async def one_client(n: int, url: str, token: str | None = None) -> None:
        try:
            async with trio_mcp.open_websocket_client(url, client_app()) as client:
                handle = await client.call_tool_task("sleep", {"seconds": 3600, "steps": 2})
                working.append(handle.task_id)
                if len(working) == 3:
                    all_working.set()
                await handle.wait()
        except trio_mcp.ConnectionClosed:
            closed.append(n)

    async with trio.open_nursery() as nursery:
        address = await nursery.start(run_server)
        for n in range(3):
            nursery.start_soon(one_client, n, address.url)
        with trio.fail_after(10):
            await all_working.wait()
        assert app.registry.live_count() == 3
        actors = list(app.registry.actors())
        assert {a.record.status for a in actors} == {TaskStatus.WORKING}

        server_scope.cancel()
        with trio.fail_after(10):
            await server_done.wait()
        assert not app.registry.is_running
        leftovers = [
            t.name for t in all_tasks() - before
            if "_WebSocketServer" in t.name or "TaskActor" in t.name or "serve_listeners" in t.name
        ]
        assert leftovers == []

    assert sorted(closed) == [0, 1, 2]
    assert all_tasks() == before
    # The actors were stopped by the shutdown, not finished: no result was made.
    assert all(actor.record.outcome is None for actor in actors)
