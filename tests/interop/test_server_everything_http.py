"""Our ``open_http_client`` -> ``@modelcontextprotocol/server-everything`` over Streamable HTTP.

server-everything's own streamable HTTP server (``dist/index.js streamableHttp``: express,
the TS SDK's ``StreamableHTTPServerTransport`` with an in-memory event store, one server per
session, ``PORT`` from the environment), started through ``node/ts_server.mjs --everything
PORT`` only to make it listen on 127.0.0.1 (by itself it binds every interface). Checked:
tools, the task tool ``simulate-research-query`` (``input_required`` answered inside our
``tasks/result``, cancel, list), the server-to-client task requests, resources, templates,
subscriptions, prompts, completion and logging.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
import trio

import trio_mcp

from ..everything import feature_client
from . import _support
from .test_server_everything import SAMPLED, everything_client, text_of

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def everything_url(node: str) -> Iterator[str]:
    port = _support.free_port()
    proc = subprocess.Popen([node, str(_support.TS_SERVER), "--everything", str(port)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        _support._wait_listening(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait()


@asynccontextmanager
async def everything(url: str, app: trio_mcp.App) -> AsyncIterator[trio_mcp.Peer]:
    async with trio_mcp.open_http_client(url, app) as peer:
        yield peer


async def test_http_everything_tools_and_plain_calls(everything_url: str) -> None:
    app, _ = everything_client()
    async with everything(everything_url, app) as peer:
        assert peer.remote_info is not None and peer.remote_info.name == "mcp-servers/everything"
        caps = peer.remote_server_capabilities
        assert caps is not None and caps.tasks is not None
        assert caps.tasks["requests"]["tools"]["call"] == {}
        tools = {t.name: t.task_support for t in await peer.list_all_tools()}
        assert tools["simulate-research-query"] == "required"
        assert tools["trigger-sampling-request-async"] == "forbidden"
        assert tools["trigger-elicitation-request-async"] == "forbidden"
        assert text_of(await peer.call_tool("echo", {"message": "hi"})) == "Echo: hi"
        # T1 over HTTP too: a plain call of a `required` tool is an isError result.
        plain = await peer.request_raw(
            "tools/call", {"name": "simulate-research-query", "arguments": {"topic": "x"}})
        assert plain["isError"] is True and "-32601" in plain["content"][0]["text"]
        summed = await peer.call_tool("get-sum", {"a": 2, "b": 3})
        assert "5" in text_of(summed)
        await peer.ping()


async def test_http_everything_research_query_input_required(everything_url: str) -> None:
    app, seen = everything_client()
    async with everything(everything_url, app) as peer:
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
        [(kind, hosted, params)] = seen
        assert kind == "elicitation" and hosted is None
        assert params.meta == {trio_mcp.RELATED_TASK_META: {"taskId": handle.task_id}}
        # Queued on the task, handed out on the SSE stream of our tasks/result POST.
        assert _support.delivered_inside_tasks_result(wire, "elicitation/create", handle.task_id)
        assert "python (historical)" in text_of(result)
        assert result.meta == {trio_mcp.RELATED_TASK_META: {"taskId": handle.task_id}}


async def test_http_everything_research_query_cancel_and_list(everything_url: str) -> None:
    app, seen = everything_client()
    async with everything(everything_url, app) as peer:
        handle = await peer.call_tool_task("simulate-research-query", {"topic": "tea"})
        assert (await handle.status()).status is trio_mcp.TaskStatus.WORKING
        cancelled = await handle.cancel()
        assert cancelled.status is trio_mcp.TaskStatus.CANCELLED
        with pytest.raises(trio_mcp.RemoteError) as again:
            await handle.cancel()
        assert again.value.code == -32602
        listed = {t.task_id: t.status async for t in peer.iter_tasks()}
        assert listed[handle.task_id] is trio_mcp.TaskStatus.CANCELLED
        with pytest.raises(trio_mcp.RemoteError) as unknown:
            await peer.get_task("no-such-task")
        assert unknown.value.code == -32602
        assert seen == []


async def test_http_everything_server_to_client_task_requests(everything_url: str) -> None:
    """Task-augmented sampling and elicitation hosted by our HTTP client, which answers the
    server's tasks/get and tasks/result polls (requests that reach it on SSE streams; its
    answers go back as POSTs)."""
    app, seen = everything_client()
    async with everything(everything_url, app) as peer:
        with _support.our_wire() as wire:
            with trio.fail_after(60):
                sampled = await peer.call_tool(
                    "trigger-sampling-request-async", {"prompt": "hello", "maxTokens": 20})
                elicited = await peer.call_tool("trigger-elicitation-request-async", {})
    text = text_of(sampled)
    assert text.startswith("[COMPLETED]"), text
    raw = json.loads(text.split("**Result:**", 1)[1])
    assert raw["content"] == {"type": "text", "text": SAMPLED}
    text = text_of(elicited)
    assert text.startswith("[COMPLETED]") and "- Name: Ada" in text, text
    [(kind1, sampling_task, sampling), (kind2, elicit_task, _)] = seen
    assert (kind1, kind2) == ("sampling", "elicitation")
    assert sampling_task is not None and elicit_task is not None
    assert sampling.task is not None and sampling.task.ttl == 300_000
    assert raw["_meta"] == {trio_mcp.RELATED_TASK_META: {"taskId": sampling_task}}
    for task_id in (sampling_task, elicit_task):
        for method in ("tasks/get", "tasks/result"):
            assert any(m["params"]["taskId"] == task_id
                       for m in _support.requests_in(wire, "in", method)), method


async def test_http_everything_resources_subscriptions_and_logging(everything_url: str) -> None:
    app, seen = feature_client()
    async with everything(everything_url, app) as peer:
        caps = peer.remote_server_capabilities
        assert caps is not None and caps.resources == {"subscribe": True, "listChanged": True}
        resources = await peer.list_all_resources()
        docs = [r for r in resources if r.uri.startswith("demo://resource/static/document/")]
        assert docs
        read = await peer.read_resource(docs[0].uri)
        assert read.contents[0].uri == docs[0].uri and read.text
        templates = {t.uri_template for t in await peer.list_all_resource_templates()}
        assert "demo://resource/dynamic/text/{resourceId}" in templates
        assert (await peer.read_resource("demo://resource/dynamic/text/7")).text.startswith(
            "Resource 7: ")
        with pytest.raises(trio_mcp.RemoteError) as info:
            await peer.read_resource("demo://nope")
        assert info.value.code == trio_mcp.INVALID_PARAMS and info.value.data is None  # T8
        # Updates and log messages come unrelated to any request: on our GET stream.
        await peer.set_logging_level("debug")
        uri = "demo://resource/dynamic/text/1"
        await peer.subscribe_resource(uri)
        await peer.call_tool("toggle-subscriber-updates")
        with trio.fail_after(30):
            await seen.wait_for(lambda: uri in seen.updated)
        await peer.unsubscribe_resource(uri)
        assert any(str(m.data).startswith("Received Subscribe Resource request for URI: " + uri)
                   for m in seen.logs)


async def test_http_everything_prompts_and_completion(everything_url: str) -> None:
    app, _ = feature_client()
    async with everything(everything_url, app) as peer:
        prompts = {p.name: p for p in await peer.list_all_prompts()}
        assert {"simple-prompt", "args-prompt", "completable-prompt"} <= set(prompts)
        got = await peer.get_prompt("args-prompt", {"city": "Paris"})
        assert [m.content.text for m in got.messages
                if isinstance(m.content, trio_mcp.TextContent)] == ["What's weather in Paris?"]
        with pytest.raises(trio_mcp.RemoteError) as info:
            await peer.get_prompt("args-prompt", {})
        assert info.value.code == trio_mcp.INVALID_PARAMS
        ref = trio_mcp.PromptReference("completable-prompt")
        assert (await peer.complete(ref, "department", "E")).values == ["Engineering"]
        team = await peer.complete(ref, "name", "", context={"department": "Sales"})
        assert team.values == ["David", "Eve", "Frank"]


async def test_http_everything_sessions_are_separate(everything_url: str) -> None:
    """Each of our connections is its own HTTP session there: a task of one is unknown to
    the other (their task store binds tasks to the session)."""
    app, _ = everything_client()
    async with everything(everything_url, app) as first, everything(everything_url, app) as other:
        handle = await first.call_tool_task("simulate-research-query", {"topic": "one"})
        with pytest.raises(trio_mcp.RemoteError) as foreign:
            await other.get_task(handle.task_id)
        assert foreign.value.code == -32602
        await handle.cancel()
