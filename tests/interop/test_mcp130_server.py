"""Our client -> a server of the Python SDK ``mcp`` 1.30.0, over stdio and WebSocket.

``py/mcp_server.py`` runs in its own venv (``.interop/mcp130``): the low-level ``Server``
with ``experimental.enable_tasks()`` and ``run_task()``, over ``stdio_server`` or, for
WebSocket, its ``websocket_server`` ASGI transport under uvicorn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest
import trio

import trio_mcp

from ..helpers import client_app, seen_by
from . import _support

pytestmark = pytest.mark.interop

Connect = Callable[..., AbstractAsyncContextManager[trio_mcp.Peer]]


@pytest.fixture(scope="module")
def ws_url(mcp130: Path) -> Iterator[str]:
    port = _support.free_port()
    argv = [str(mcp130), str(_support.MCP130_SERVER), "--ws", str(port)]
    with _support.background_server(argv, port) as url:
        yield url


@pytest.fixture(params=["stdio", "ws"])
def connect(request: pytest.FixtureRequest, mcp130: Path) -> Connect:
    """Open a client connection to the mcp 1.30.0 server over the parameter's transport."""

    @asynccontextmanager
    async def open_(app: trio_mcp.App | None = None) -> AsyncIterator[trio_mcp.Peer]:
        app = app if app is not None else client_app()
        if request.param == "stdio":
            command = [str(mcp130), str(_support.MCP130_SERVER)]
            async with trio_mcp.open_stdio_client(command, app) as peer:
                yield peer
        else:
            url = request.getfixturevalue("ws_url")
            async with trio_mcp.open_websocket_client(url, app) as peer:
                yield peer

    return open_


def text_of(result: trio_mcp.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, trio_mcp.TextContent))


async def test_initialize_tools_and_plain_calls(connect: Connect) -> None:
    async with connect() as peer:
        assert peer.remote_info is not None and peer.remote_info.name == "mcp130-interop-server"
        caps = peer.remote_server_capabilities
        assert caps is not None and caps.tasks is not None
        assert caps.tasks["requests"]["tools"]["call"] == {}
        tools = {t.name: t.task_support for t in await peer.list_all_tools()}
        assert tools == {
            "echo": "forbidden", "slow": "optional", "needs-task": "required",
            "flaky": "optional", "ask": "required", "sample": "required",
            "sample-as-task": "required", "elicit-as-task": "required",
        }
        assert text_of(await peer.call_tool("echo", {"text": "hi"})) == "hi"
        assert text_of(await peer.call_tool("slow", {"seconds": 0.01})) == "slept 0.01 seconds"
        await peer.ping()


async def test_task_lifecycle_and_list(connect: Connect) -> None:
    async with connect() as peer:
        handle = await peer.call_tool_task("slow", {"seconds": 0.1}, ttl=60_000)
        assert handle.task.status is trio_mcp.TaskStatus.WORKING and handle.task.ttl == 60_000
        assert (await handle.wait()).status is trio_mcp.TaskStatus.COMPLETED
        result = await handle.result()
        assert text_of(result) == "slept 0.1 seconds"
        assert result.meta == {trio_mcp.RELATED_TASK_META: {"taskId": handle.task_id}}
        other = await peer.call_tool_task("needs-task", {"text": "x"}, ttl=60_000)
        await other.wait()
        assert text_of(await other.result()) == "done: x"
        assert (await peer.get_task(other.task_id)).status is trio_mcp.TaskStatus.COMPLETED
        listed = {t.task_id: t.status async for t in peer.iter_tasks()}
        assert listed == {handle.task_id: trio_mcp.TaskStatus.COMPLETED,
                          other.task_id: trio_mcp.TaskStatus.COMPLETED}
        # DEVIATION (mcp 1.30.0): tasks/list ignores the cursor (it always answers every
        # task in one page) where an unknown cursor should be -32602.
        bogus = await peer.list_tasks("not-a-cursor")
        assert {t.task_id for t in bogus.tasks} == set(listed) and bogus.next_cursor is None
        with pytest.raises(trio_mcp.RemoteError) as unknown:
            await peer.get_task("no-such-task")
        assert unknown.value.code == -32602


async def test_task_with_ttl_omitted(connect: Connect) -> None:
    async with connect() as peer:
        # DEVIATION (mcp 1.30.0): asked without ttl, the task's ttl is unlimited and the SDK
        # omits `ttl` instead of writing `"ttl": null`.
        raw = await peer.request_raw(
            "tools/call", {"name": "slow", "arguments": {"seconds": 0}, "task": {}})
        assert "ttl" not in raw["task"]
        handle = await peer.call_tool_task("slow", {"seconds": 0})
        assert handle.task.ttl is None
        await handle.wait()
        assert text_of(await handle.result()) == "slept 0 seconds"


async def test_input_required_through_tasks_result(connect: Connect) -> None:
    app = client_app()
    async with connect(app) as peer:
        with _support.our_wire() as wire:
            ask = await peer.call_tool_task("ask", {"question": "ok?"}, ttl=60_000)
            statuses = [task.status async for task in ask]
            answer = await ask.result()
            sample = await peer.call_tool_task("sample", {"prompt": "p"}, ttl=60_000)
            await sample.wait()
            sampled = await sample.result()
        assert trio_mcp.TaskStatus.INPUT_REQUIRED in statuses
        assert statuses[-1] is trio_mcp.TaskStatus.COMPLETED
        assert text_of(answer) == "approved: ok?"
        assert text_of(sampled) == "sampled: sampled text"
        [(kind1, hosted1, elicit), (kind2, hosted2, sampling)] = seen_by(app)
        assert (kind1, kind2) == ("elicitation", "sampling")
        assert hosted1 is None and hosted2 is None  # plain requests, tied to the tasks
        assert elicit.meta == {trio_mcp.RELATED_TASK_META: {"taskId": ask.task_id}}
        assert sampling.meta == {trio_mcp.RELATED_TASK_META: {"taskId": sample.task_id}}
        # The SDK queues them on the task: they come only through our tasks/result.
        assert _support.delivered_inside_tasks_result(wire, "elicitation/create", ask.task_id)
        assert _support.delivered_inside_tasks_result(
            wire, "sampling/createMessage", sample.task_id)


@pytest.mark.parametrize(("tool", "kind", "expected"), [
    ("sample-as-task", "sampling", "sampled as task: sampled text"),
    ("elicit-as-task", "elicitation", "elicited as task: accept {'approve': True}"),
])
async def test_server_to_client_task(connect: Connect, tool: str, kind: str,
                                     expected: str) -> None:
    """create_message_as_task / elicit_as_task: the server asks our client to host a task
    (through the tasks/result side channel of its own task), then polls ours."""
    app = client_app()
    async with connect(app) as peer:
        with _support.our_wire() as wire:
            handle = await peer.call_tool_task(tool, {"prompt": "p", "question": "q"},
                                               ttl=60_000)
            await handle.wait()
            result = await handle.result()
    assert text_of(result) == expected
    [(seen_kind, hosted, params)] = seen_by(app)
    assert seen_kind == kind and hosted is not None  # hosted as our task
    assert params.task is not None and params.task.ttl == 60_000
    assert params.meta == {trio_mcp.RELATED_TASK_META: {"taskId": handle.task_id}}
    for method in ("tasks/get", "tasks/result"):
        assert any(m["params"]["taskId"] == hosted
                   for m in _support.requests_in(wire, "in", method)), method


async def test_failed_task(connect: Connect) -> None:
    async with connect() as peer:
        handle = await peer.call_tool_task("flaky", {"message": "bad"}, ttl=60_000)
        final = await handle.wait()
        assert final.status is trio_mcp.TaskStatus.FAILED and final.status_message == "bad"
        # DEVIATION (mcp 1.30.0): tasks/result of a failed task is an empty result (only the
        # related-task _meta): neither the tool's result nor a JSON-RPC error.
        raw = await peer.task_result(handle.task_id)
        assert raw == {"_meta": {trio_mcp.RELATED_TASK_META: {"taskId": handle.task_id}}}


async def test_task_mode_deviations(connect: Connect) -> None:
    async with connect() as peer:
        # DEVIATION (mcp 1.30.0): validate_task_mode() raises the right -32601, but the
        # low-level call_tool() wraps every exception into an isError result.
        plain = await peer.request_raw(
            "tools/call", {"name": "needs-task", "arguments": {"text": "x"}})
        assert plain["isError"] is True
        forbidden = await peer.request_raw(
            "tools/call", {"name": "echo", "arguments": {"text": "x"}, "task": {"ttl": 1000}})
        assert forbidden["isError"] is True and "task" not in forbidden
        # Before listing, our client cannot know: the plain result is no CreateTaskResult.
        with pytest.raises(trio_mcp.RemoteProtocolError):
            await peer.call_tool_task("echo", {"text": "x"})
        # After listing, it refuses both itself.
        await peer.list_all_tools()
        with pytest.raises(trio_mcp.LocalUsageError):
            await peer.call_tool("needs-task", {"text": "x"})
        with pytest.raises(trio_mcp.LocalUsageError):
            await peer.call_tool_task("echo", {"text": "x"})


async def test_cancel_then_the_server_crashes(connect: Connect) -> None:
    async with connect() as peer:
        handle = await peer.call_tool_task("slow", {"seconds": 0.5}, ttl=60_000)
        cancelled = await handle.cancel()
        assert cancelled.status is trio_mcp.TaskStatus.CANCELLED
        with pytest.raises(trio_mcp.RemoteError) as again:
            await handle.cancel()
        assert again.value.code == -32602
        # DEVIATION (mcp 1.30.0): a cancelled task's result is an empty result.
        assert await peer.task_result(handle.task_id) == {
            "_meta": {trio_mcp.RELATED_TASK_META: {"taskId": handle.task_id}}}
        # DEVIATION (mcp 1.30.0): cancelling does not stop the work; when it finishes,
        # run_task() tries to complete the cancelled task, the store refuses, and the
        # exception takes the whole session down. Our side sees the connection close.
        with trio.fail_after(30):
            while peer.is_open:
                try:
                    await peer.ping()
                except trio_mcp.ConnectionClosed:
                    break
                await trio.sleep(0.1)
        assert not peer.is_open
