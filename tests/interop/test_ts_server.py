"""Our client -> a TypeScript SDK server (``@modelcontextprotocol/sdk`` 1.32.x), over stdio.

``node/ts_server.mjs`` is an ``McpServer`` with the SDK's experimental tasks API
(``registerToolTask``, ``InMemoryTaskStore``, ``InMemoryTaskMessageQueue``). The TS SDK
has no WebSocket server transport, so this direction is stdio only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

import trio_mcp

from ..helpers import client_app, seen_by
from . import _support

pytestmark = pytest.mark.interop


@asynccontextmanager
async def ts_server(node: str, app: trio_mcp.App | None = None) -> AsyncIterator[trio_mcp.Peer]:
    async with trio_mcp.open_stdio_client(
        [node, str(_support.TS_SERVER)], app if app is not None else client_app()
    ) as peer:
        yield peer


def text_of(result: trio_mcp.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, trio_mcp.TextContent))


async def test_initialize_tools_and_plain_call(node: str) -> None:
    async with ts_server(node) as peer:
        assert peer.remote_info is not None and peer.remote_info.name == "ts-sdk-interop-server"
        caps = peer.remote_server_capabilities
        assert caps is not None and caps.tasks is not None
        assert caps.tasks["requests"]["tools"]["call"] == {}
        tools = {t.name: t.task_support for t in await peer.list_all_tools()}
        assert tools == {
            "echo": "forbidden", "slow": "optional", "needs-task": "required",
            "flaky": "optional", "ask": "required", "sample-as-task": "forbidden",
            "elicit-as-task": "forbidden",
        }
        assert text_of(await peer.call_tool("echo", {"text": "hi"})) == "hi"
        await peer.ping()


async def test_task_lifecycle(node: str) -> None:
    async with ts_server(node) as peer:
        await peer.list_all_tools()
        handle = await peer.call_tool_task("slow", {"ms": 100}, ttl=60_000)
        assert handle.task.status is trio_mcp.TaskStatus.WORKING and handle.task.ttl == 60_000
        final = await handle.wait()
        assert final.status is trio_mcp.TaskStatus.COMPLETED
        result = await handle.result()
        assert text_of(result) == "slept 100 ms"
        assert result.meta == {trio_mcp.RELATED_TASK_META: {"taskId": handle.task_id}}
        assert (await peer.get_task(handle.task_id)).status is trio_mcp.TaskStatus.COMPLETED
        raw = await peer.task_result(handle.task_id)
        assert raw["content"] == [{"type": "text", "text": "slept 100 ms"}]

        # Without a ttl the SDK stores ttl null (unlimited): our client reads it.
        handle = await peer.call_tool_task("slow", {"ms": 10})
        assert handle.task.ttl is None
        await handle.wait()
        assert text_of(await handle.result()) == "slept 10 ms"

        handle = await peer.call_tool_task("needs-task", {"text": "x"})
        await handle.wait()
        assert text_of(await handle.result()) == "done: x"


async def test_failed_task(node: str) -> None:
    async with ts_server(node) as peer:
        handle = await peer.call_tool_task("flaky", {"message": "bad"})
        assert (await handle.wait()).status is trio_mcp.TaskStatus.FAILED
        result = await handle.result()
        assert result.is_error is True and text_of(result) == "bad"


async def test_cancel(node: str) -> None:
    async with ts_server(node) as peer:
        handle = await peer.call_tool_task("slow", {"ms": 60_000})
        cancelled = await handle.cancel()
        assert cancelled.status is trio_mcp.TaskStatus.CANCELLED
        assert (await handle.status()).status is trio_mcp.TaskStatus.CANCELLED
        with pytest.raises(trio_mcp.RemoteError) as again:
            await handle.cancel()
        assert again.value.code == -32602
        # A cancelled task has no result; the SDK answers tasks/result with -32603
        # ("has no result stored"); the spec leaves the error open.
        with pytest.raises(trio_mcp.RemoteError) as no_result:
            await handle.result()
        assert no_result.value.code == -32603
        with pytest.raises(trio_mcp.RemoteError) as unknown:
            await peer.get_task("no-such-task")
        assert unknown.value.code == -32602


async def test_list_pages(node: str) -> None:
    async with ts_server(node) as peer:
        ids = set()
        for i in range(12):
            handle = await peer.call_tool_task("needs-task", {"text": str(i)}, ttl=60_000)
            ids.add(handle.task_id)
        # The SDK's InMemoryTaskStore pages by 10 and hands out a cursor.
        first = await peer.list_tasks()
        assert len(first.tasks) == 10 and first.next_cursor
        assert {t.task_id async for t in peer.iter_tasks()} == ids


async def test_input_required_elicitation_through_tasks_result(node: str) -> None:
    app = client_app()
    async with ts_server(node, app) as peer:
        handle = await peer.call_tool_task("ask", {"question": "ok?"})
        statuses = [task.status async for task in handle]
        assert trio_mcp.TaskStatus.INPUT_REQUIRED in statuses
        assert statuses[-1] is trio_mcp.TaskStatus.COMPLETED
        assert text_of(await handle.result()) == "approved: ok?"
        # The SDK queues the elicitation and delivers it only inside tasks/result: it
        # reached our handler, tied to the task by the related-task _meta.
        [(kind, hosted, params)] = seen_by(app)
        assert kind == "elicitation" and hosted is None
        assert params.meta == {trio_mcp.RELATED_TASK_META: {"taskId": handle.task_id}}


@pytest.mark.parametrize(("tool", "kind", "expected"), [
    ("sample-as-task", "sampling", {"content": {"type": "text", "text": "sampled text"}}),
    ("elicit-as-task", "elicitation", {"action": "accept", "content": {"approve": True}}),
])
async def test_server_to_client_task(node: str, tool: str, kind: str,
                                     expected: dict[str, Any]) -> None:
    """The SDK server asks our client to host a task (createMessageStream /
    elicitInputStream with `task`), polls our tasks/get and reads our tasks/result."""
    app = client_app()
    async with ts_server(node, app) as peer:
        result = await peer.call_tool(tool, {"prompt": "p", "question": "q"})
        assert result.is_error is False, result
        outcome = result.structured_content
        assert outcome is not None and outcome["error"] is None
        assert outcome["seen"][0] == "taskCreated" and outcome["seen"][-1] == "completed"
        got = outcome["result"]
        for key, value in expected.items():
            assert got[key] == value
        [(seen_kind, hosted_task, params)] = seen_by(app)
        assert seen_kind == kind and hosted_task is not None  # our client hosted it
        assert got["_meta"] == {trio_mcp.RELATED_TASK_META: {"taskId": hosted_task}}
        assert params.task is not None and params.task.ttl == 60_000


async def test_sdk_deviations_on_task_modes(node: str) -> None:
    async with ts_server(node) as peer:
        # DEVIATION (TS SDK): a plain call of a `required` tool should be -32601; McpServer
        # turns its own McpError into an isError tool result instead.
        plain = await peer.request_raw(
            "tools/call", {"name": "needs-task", "arguments": {"text": "x"}})
        assert plain["isError"] is True and "-32601" in plain["content"][0]["text"]
        # DEVIATION (TS SDK): a task-augmented call of a `forbidden` tool should be -32601;
        # the SDK runs the tool and fails to validate its result as a CreateTaskResult.
        with pytest.raises(trio_mcp.RemoteError) as forbidden:
            await peer.request_raw(
                "tools/call", {"name": "echo", "arguments": {"text": "x"}, "task": {}})
        assert forbidden.value.code == -32602
        # Our own client refuses both before sending, once it has listed the tools.
        await peer.list_all_tools()
        with pytest.raises(trio_mcp.LocalUsageError):
            await peer.call_tool("needs-task", {"text": "x"})
        with pytest.raises(trio_mcp.LocalUsageError):
            await peer.call_tool_task("echo", {"text": "x"})
