"""Our client -> ``@modelcontextprotocol/server-everything`` (built on the TS SDK), over stdio.

Its task tools: ``simulate-research-query`` (taskSupport required; goes ``input_required``
and elicits through the task's queue when ``ambiguous`` is true), and the server-to-client
task requests ``trigger-sampling-request-async`` / ``trigger-elicitation-request-async``,
which our client answers as a task receiver (``host_tasks``).

server-everything does not exit when its stdin closes (its task store's timers keep node
alive), so each connection ends with our client's SIGTERM after the grace period.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

import trio_mcp

from . import _support

pytestmark = pytest.mark.interop

SAMPLED = "sampled by trio-mcp"


def everything_client() -> tuple[trio_mcp.App, list[tuple[str, str | None, Any]]]:
    """A client App hosting sampling/elicitation tasks, answering by the requested schema."""
    app = trio_mcp.App("trio-mcp-interop", "1.0", host_tasks=True)
    seen: list[tuple[str, str | None, Any]] = []

    @app.on_sampling
    async def sample(ctx: trio_mcp.RequestContext,
                     params: trio_mcp.CreateMessageParams) -> trio_mcp.CreateMessageResult:
        seen.append(("sampling", ctx.task_id, params))
        return trio_mcp.CreateMessageResult(
            role="assistant", content={"type": "text", "text": SAMPLED}, model="trio-model")

    @app.on_elicitation
    async def elicit(ctx: trio_mcp.RequestContext,
                     params: trio_mcp.ElicitParams) -> trio_mcp.ElicitResult:
        seen.append(("elicitation", ctx.task_id, params))
        properties = (params.requested_schema or {}).get("properties", {})
        if "interpretation" in properties:
            return trio_mcp.ElicitResult(action="accept", content={"interpretation": "historical"})
        return trio_mcp.ElicitResult(
            action="accept", content={"name": "Ada", "favoriteColor": "Blue", "agreeToTerms": True})

    return app, seen


@asynccontextmanager
async def everything(node: str, app: trio_mcp.App) -> AsyncIterator[trio_mcp.Peer]:
    async with trio_mcp.open_stdio_client([node, str(_support.SERVER_EVERYTHING), "stdio"],
                                          app) as peer:
        yield peer


def text_of(result: trio_mcp.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, trio_mcp.TextContent))


async def test_tools_and_plain_calls(node: str) -> None:
    app, _ = everything_client()
    async with everything(node, app) as peer:
        assert peer.remote_info is not None and peer.remote_info.name == "mcp-servers/everything"
        caps = peer.remote_server_capabilities
        assert caps is not None and caps.tasks is not None
        assert caps.tasks["requests"]["tools"]["call"] == {}
        tools = {t.name: t.task_support for t in await peer.list_all_tools()}
        assert tools["simulate-research-query"] == "required"
        # Registered because our client declared sampling/elicitation task support.
        assert tools["trigger-sampling-request-async"] == "forbidden"
        assert tools["trigger-elicitation-request-async"] == "forbidden"
        assert text_of(await peer.call_tool("echo", {"message": "hi"})) == "Echo: hi"
        # DEVIATION (TS SDK McpServer): a plain call of a `required` tool is an isError
        # result instead of the -32601 error the spec asks for.
        plain = await peer.request_raw(
            "tools/call", {"name": "simulate-research-query", "arguments": {"topic": "x"}})
        assert plain["isError"] is True and "-32601" in plain["content"][0]["text"]
        with pytest.raises(trio_mcp.LocalUsageError):  # our client knows better
            await peer.call_tool("simulate-research-query", {"topic": "x"})


async def test_research_query_input_required(node: str) -> None:
    app, seen = everything_client()
    async with everything(node, app) as peer:
        with _support.our_wire() as wire:
            handle = await peer.call_tool_task(
                "simulate-research-query", {"topic": "python", "ambiguous": True}, ttl=60_000)
            snapshots = [task async for task in handle]
            result = await handle.result()
        statuses = [t.status for t in snapshots]
        assert trio_mcp.TaskStatus.INPUT_REQUIRED in statuses
        assert statuses[-1] is trio_mcp.TaskStatus.COMPLETED
        asking = next(t for t in snapshots if t.status is trio_mcp.TaskStatus.INPUT_REQUIRED)
        assert "clarification" in (asking.status_message or "")
        # The elicitation is queued on the task and delivered only inside our tasks/result.
        [(kind, hosted, params)] = seen
        assert kind == "elicitation" and hosted is None
        assert params.meta == {trio_mcp.RELATED_TASK_META: {"taskId": handle.task_id}}
        assert _support.delivered_inside_tasks_result(wire, "elicitation/create", handle.task_id)
        assert "python (historical)" in text_of(result)
        assert result.meta == {trio_mcp.RELATED_TASK_META: {"taskId": handle.task_id}}


async def test_research_query_cancel_and_list(node: str) -> None:
    app, seen = everything_client()
    async with everything(node, app) as peer:
        handle = await peer.call_tool_task("simulate-research-query", {"topic": "tea"})
        assert (await handle.status()).status is trio_mcp.TaskStatus.WORKING
        cancelled = await handle.cancel()
        assert cancelled.status is trio_mcp.TaskStatus.CANCELLED
        with pytest.raises(trio_mcp.RemoteError) as again:
            await handle.cancel()
        assert again.value.code == -32602
        listed = {t.task_id: t.status async for t in peer.iter_tasks()}
        assert listed[handle.task_id] is trio_mcp.TaskStatus.CANCELLED
        # The server's work goes on after the cancel but the task stays cancelled.
        assert (await peer.get_task(handle.task_id)).status is trio_mcp.TaskStatus.CANCELLED
        with pytest.raises(trio_mcp.RemoteError) as unknown:
            await peer.get_task("no-such-task")
        assert unknown.value.code == -32602
        assert seen == []


async def test_server_to_client_task_requests(node: str) -> None:
    """server-everything sends task-augmented sampling and elicitation to our client,
    which hosts them as tasks; the server polls our tasks/get, then reads tasks/result."""
    app, seen = everything_client()
    async with everything(node, app) as peer:
        with _support.our_wire() as wire:
            sampled = await peer.call_tool(
                "trigger-sampling-request-async", {"prompt": "hello", "maxTokens": 20})
            elicited = await peer.call_tool("trigger-elicitation-request-async", {})
    text = text_of(sampled)
    assert text.startswith("[COMPLETED]"), text
    raw = json.loads(text.split("**Result:**", 1)[1])
    assert raw["content"] == {"type": "text", "text": SAMPLED}
    text = text_of(elicited)
    assert text.startswith("[COMPLETED]") and "- Name: Ada" in text, text
    [(kind1, sampling_task, sampling), (kind2, elicit_task, elicitation)] = seen
    assert (kind1, kind2) == ("sampling", "elicitation")
    assert sampling_task is not None and elicit_task is not None  # hosted as our tasks
    assert sampling.task is not None and sampling.task.ttl == 300_000
    assert elicitation.task is not None and elicitation.task.ttl == 600_000
    assert raw["_meta"] == {trio_mcp.RELATED_TASK_META: {"taskId": sampling_task}}
    for task_id in (sampling_task, elicit_task):
        for method in ("tasks/get", "tasks/result"):
            assert any(m["params"]["taskId"] == task_id
                       for m in _support.requests_in(wire, "in", method)), method
