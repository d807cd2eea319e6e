"""The peer core over every transport: lifecycle, tools, sampling, ping, cancel, progress.

Each test runs over the in-memory bus pair, a real stdio subprocess of
``examples/task_server.py``, and a real WebSocket on loopback.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

import trio_mcp

from tests.helpers import client_app, connect, example_app, seen_by
from tests.raw import open_raw


async def test_peer_initialize_exposes_both_sides_info_and_capabilities(transport: str) -> None:
    async with connect(transport) as client:
        assert client.protocol_version == "2025-11-25"
        assert client.remote_info is not None
        assert client.remote_info.name == "trio-mcp-example"
        caps = client.remote_server_capabilities
        assert caps is not None and caps.tools is not None
        assert caps.tasks == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        assert client.instructions == "Example tools for trio-mcp tasks."


async def test_peer_server_sees_client_info_and_capabilities() -> None:
    server_app = example_app()
    async with trio_mcp.open_memory_pair(server_app, client_app()) as (client, server):
        assert server.remote_info is not None and server.remote_info.name == "test-client"
        caps = server.remote_client_capabilities
        assert caps is not None
        assert caps.sampling == {} and caps.elicitation == {"form": {}}
        assert caps.tasks == {
            "list": {},
            "cancel": {},
            "requests": {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}},
        }
        assert client.local_capabilities == caps


async def test_peer_tools_list_and_plain_calls(transport: str) -> None:
    async with connect(transport) as client:
        tools = {t.name: t for t in await client.list_all_tools()}
        assert set(tools) == {
            "echo", "summarize", "sleep", "park", "fail", "approve", "resumable_sleep"
        }
        assert tools["echo"].execution is None  # forbidden is the default
        assert tools["sleep"].task_support == "optional"
        assert tools["approve"].task_support == "required"
        assert tools["echo"].input_schema == {
            "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"],
            "additionalProperties": False,
        }
        result = await client.call_tool("echo", {"text": "hello"})
        assert result.text == "hello" and not result.is_error
        # An argument the tool has no parameter for is refused, naming it (a tool execution
        # error, as the tools page files input validation errors), never dropped.
        refused = await client.call_tool("echo", {"text": "hello", "size": "big"})
        assert refused.is_error
        assert refused.text == (
            "Invalid arguments for tool echo: unexpected argument 'size' (it takes 'text')")


async def test_peer_tool_samples_from_the_client(transport: str) -> None:
    app = client_app(sampling_text="a summary", host_tasks=False)
    async with connect(transport, app) as client:
        result = await client.call_tool("summarize", {"text": "long text"})
        assert result.text == "a summary"
        kind, task_id, params = seen_by(app)[0]
        assert kind == "sampling" and task_id is None
        assert "long text" in params.messages[0].content["text"]


async def test_peer_ping_both_ways() -> None:
    async with trio_mcp.open_memory_pair(example_app(), client_app()) as (client, server):
        await client.ping()
        await server.ping()


async def test_peer_cancelled_request_stops_the_handler(transport: str) -> None:
    async with connect(transport) as client:
        with trio.move_on_after(0.5) as scope:
            await client.call_tool("sleep", {"seconds": 30})
        assert scope.cancelled_caught
        # The connection keeps working after the cancellation.
        await client.ping()
        assert (await client.call_tool("echo", {"text": "still here"})).text == "still here"


async def test_router_cancelled_request_is_never_answered(transport: str) -> None:
    async with open_raw(transport) as raw:
        await raw.initialize()
        await raw.send({"jsonrpc": "2.0", "id": 41, "method": "tools/call",
                        "params": {"name": "sleep", "arguments": {"seconds": 30}}})
        await trio.sleep(0.2)
        await raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 41, "reason": "test"}})
        assert await raw.ping_ok()
        await trio.sleep(0.2)
        assert await raw.ping_ok("ping2")
        assert all(m.get("id") != 41 for m in raw.received)


async def test_peer_progress_reaches_the_caller(transport: str) -> None:
    updates: list[trio_mcp.ProgressParams] = []
    async with connect(transport) as client:
        result = await client.call_tool("sleep", {"seconds": 0.05, "steps": 3},
                                        progress=updates.append)
    assert result.text == "slept 0.05 seconds"
    assert [u.progress for u in updates] == [1, 2, 3]
    assert all(u.total == 3 for u in updates)


async def test_peer_handler_reports_progress_to_a_server_request() -> None:
    """Progress flows server -> client requests too (the client reports)."""
    app = trio_mcp.App("c")

    @app.on_sampling
    async def sample(ctx: trio_mcp.RequestContext,
                     params: trio_mcp.CreateMessageParams) -> trio_mcp.CreateMessageResult:
        await ctx.report_progress(1, 2, "thinking")
        await ctx.report_progress(2, 2)
        return trio_mcp.CreateMessageResult("assistant", {"type": "text", "text": "x"}, "m")

    seen: list[float] = []
    async with trio_mcp.open_memory_pair(example_app(), app) as (_, server):
        params = trio_mcp.CreateMessageParams(messages=[], max_tokens=5)
        result = await server.request("sampling/createMessage", params,
                                      trio_mcp.CreateMessageResult,
                                      progress=lambda p: seen.append(p.progress))
    assert result.text == "x" and seen == [1, 2]


async def test_peer_unknown_tool_is_invalid_params(transport: str) -> None:
    async with connect(transport) as client:
        with pytest.raises(trio_mcp.RemoteError) as info:
            await client.call_tool("nope", {})
        assert info.value.code == trio_mcp.INVALID_PARAMS
        assert "nope" in info.value.message


async def test_peer_invalid_arguments_are_a_tool_execution_error(transport: str) -> None:
    """2025-11-25 (SEP-1303): input validation errors come back as isError results."""
    async with connect(transport) as client:
        result = await client.call_tool("echo", {"text": 5})
        assert result.is_error and "text" in result.text
        result = await client.call_tool("echo", {})
        assert result.is_error and "missing" in result.text


async def test_peer_tool_exception_is_an_is_error_result() -> None:
    app = example_app()

    @app.tool()
    async def broken() -> str:
        raise RuntimeError("disk on fire")

    async with trio_mcp.open_memory_pair(app) as (client, _):
        result = await client.call_tool("broken")
    assert result.is_error
    assert "disk on fire" in result.text and "Traceback" not in result.text


async def test_peer_structured_content_and_output_schema() -> None:
    app = trio_mcp.App("s")

    @app.tool(output_schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    async def count(word: str) -> dict[str, Any]:
        return {"n": len(word)}

    async with trio_mcp.open_memory_pair(app) as (client, _):
        tool = (await client.list_all_tools())[0]
        assert tool.output_schema == {"type": "object", "properties": {"n": {"type": "integer"}}}
        result = await client.call_tool("count", {"word": "trio"})
    assert result.structured_content == {"n": 4}
    assert '"n": 4' in result.text


async def test_peer_tools_list_paginates() -> None:
    app = trio_mcp.App("many")
    for i in range(250):
        async def tool(x: int = 0) -> str:
            return "ok"
        app.tool(name=f"tool{i:03d}")(tool)
    async with trio_mcp.open_memory_pair(app) as (client, _):
        first = await client.list_tools()
        assert len(first.tools) == 100 and first.next_cursor
        assert len(await client.list_all_tools()) == 250
        with pytest.raises(trio_mcp.RemoteError) as info:
            await client.list_tools("bogus")
        assert info.value.code == trio_mcp.INVALID_PARAMS


async def test_peer_elicitation_plain_from_a_server_handler() -> None:
    app = client_app(elicit_content={"approve": False}, host_tasks=False)
    async with trio_mcp.open_memory_pair(example_app(), app) as (client, _):
        # approve requires a task; with the task, elicitation rides the side channel.
        handle = await client.call_tool_task("approve", {"question": "ship?"})
        await handle.wait()
        result = await handle.result()
    assert result.text == "declined: ship?"


async def test_peer_connection_closed_wakes_every_waiter() -> None:
    server_app = example_app()
    async with trio_mcp.open_memory_pair(server_app) as (client, server):
        errors: list[BaseException] = []

        async def call() -> None:
            try:
                await client.call_tool("sleep", {"seconds": 60})
            except trio_mcp.ConnectionClosed as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(call)
            await trio.sleep(0.1)
            await server.aclose()
        assert len(errors) == 5
        with pytest.raises(trio_mcp.ConnectionClosed):
            await client.ping()


async def test_peer_stdio_server_exit_is_reported_as_connection_closed() -> None:
    import sys

    code = "import sys; sys.stdin.readline(); sys.exit(0)"
    with pytest.raises(trio_mcp.ConnectionClosed):
        async with trio_mcp.open_stdio_client([sys.executable, "-c", code]):
            pass  # pragma: no cover


async def test_peer_version_negotiation() -> None:
    async with open_raw("memory") as raw:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "old", "version": "1"}}}
        await raw.send(init)
        assert (await raw.recv_response(1))["result"]["protocolVersion"] == "2025-06-18"
    async with open_raw("memory") as raw:
        init["params"]["protocolVersion"] = "1999-01-01"  # type: ignore[index]
        await raw.send(init)
        assert (await raw.recv_response(1))["result"]["protocolVersion"] == "2025-11-25"


async def test_peer_logging_and_list_changes_are_declared_by_every_server(transport: str) -> None:
    """The tools-only example server still speaks logging and announces tool changes;
    the features it did not register answer -32601."""
    async with connect(transport) as client:
        caps = client.remote_server_capabilities
        assert caps is not None
        assert caps.logging == {} and caps.tools == {"listChanged": True}
        assert caps.resources is None and caps.prompts is None and caps.completions is None
        await client.set_logging_level("debug")
        with pytest.raises(ValueError):
            await client.set_logging_level("loud")  # refused before anything is sent
        for call in (client.list_resources, client.list_prompts):
            with pytest.raises(trio_mcp.RemoteError) as info:
                await call()
            assert info.value.code == trio_mcp.METHOD_NOT_FOUND
