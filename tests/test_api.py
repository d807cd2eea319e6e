"""The public API a newcomer reaches for (the "sharp edges" issue).

Each test pins one defect found by trying trio-mcp as a new user would.
"""

from __future__ import annotations

import inspect
import pydoc
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_mcp
from trio_mcp import McpError

ROOT = Path(__file__).resolve().parent.parent


# --- 1. decorators work bare and called -----------------------------------------------


async def test_api_bare_tool_decorator_registers_the_tool() -> None:
    app = trio_mcp.App("bare")

    @app.tool
    async def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    assert inspect.iscoroutinefunction(shout)  # the function itself, unchanged
    assert list(app.tools) == ["shout"]
    async with trio_mcp.open_memory_pair(app) as (client, _):
        (tool,) = await client.list_all_tools()
        assert (tool.name, tool.description) == ("shout", "Upper-case the text.")
        assert (await client.call_tool("shout", {"text": "hi"})).text == "HI"


async def test_api_client_handler_decorators_work_bare_and_called() -> None:
    bare, called = trio_mcp.App("a"), trio_mcp.App("b")

    @bare.on_sampling
    async def sample_a(ctx: Any, params: trio_mcp.CreateMessageParams) -> Any:
        raise AssertionError

    @called.on_sampling()
    async def sample_b(ctx: Any, params: trio_mcp.CreateMessageParams) -> Any:
        raise AssertionError

    @bare.on_elicitation
    async def elicit_a(ctx: Any, params: trio_mcp.ElicitParams) -> Any:
        raise AssertionError

    @called.on_elicitation()
    async def elicit_b(ctx: Any, params: trio_mcp.ElicitParams) -> Any:
        raise AssertionError

    for app, sample, elicit in ((bare, sample_a, elicit_a), (called, sample_b, elicit_b)):
        assert app.sampling_handler is sample and app.elicitation_handler is elicit
        caps = app.client_capabilities()
        assert caps.sampling == {} and caps.elicitation == {"form": {}}


# --- 5. help(trio_mcp) shows the API ----------------------------------------------------


def test_api_all_lists_every_public_name_with_a_docstring() -> None:
    assert "App" in trio_mcp.__all__ and "TaskHandle" in trio_mcp.__all__
    for name in trio_mcp.__all__:
        value = getattr(trio_mcp, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"trio_mcp.{name} has no docstring"
    text = pydoc.render_doc(trio_mcp, renderer=pydoc.plaintext)
    for name in ("App", "Peer", "TaskHandle", "open_stdio_client", "serve_websocket"):
        assert name in text


# --- 6. open_memory_pair's order is obvious ------------------------------------------------


async def test_api_memory_pair_has_named_client_and_server() -> None:
    server_app, client_app = trio_mcp.App("server"), trio_mcp.App("client")
    async with trio_mcp.open_memory_pair(server_app, client_app) as pair:
        assert pair.client.role is trio_mcp.Role.CLIENT and pair.client.app is client_app
        assert pair.server.role is trio_mcp.Role.SERVER and pair.server.app is server_app
        client, server = pair
        assert (client, server) == (pair.client, pair.server)


# --- 8. async progress callbacks are awaited ------------------------------------------------


def _progress_app() -> trio_mcp.App:
    app = trio_mcp.App("progress")

    @app.tool(task_support="optional")
    async def steps(ctx: trio_mcp.RequestContext, n: int) -> str:
        for i in range(n):
            await ctx.report_progress(i + 1, n)
        return "done"

    return app


async def test_api_async_progress_callback_is_awaited() -> None:
    seen: list[float] = []

    async def on_progress(update: trio_mcp.ProgressParams) -> None:
        await trio.lowlevel.checkpoint()
        seen.append(update.progress)

    async with trio_mcp.open_memory_pair(_progress_app()) as (client, _):
        result = await client.call_tool("steps", {"n": 3}, progress=on_progress)
        assert result.text == "done"
        await trio.testing.wait_all_tasks_blocked()
    assert seen == [1, 2, 3]


async def test_api_async_progress_callback_of_a_task_is_awaited() -> None:
    seen: list[float] = []

    async def on_progress(update: trio_mcp.ProgressParams) -> None:
        seen.append(update.progress)

    async with trio_mcp.open_memory_pair(_progress_app()) as (client, _):
        handle = await client.call_tool_task("steps", {"n": 2}, progress=on_progress)
        await handle.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert (await handle.result()).text == "done"
    assert seen == [1, 2]


# --- 9. TaskHandle: short repr, typed outcomes --------------------------------------------


def _outcome_app() -> trio_mcp.App:
    app = trio_mcp.App("outcomes")

    @app.tool(task_support="optional")
    async def wait_forever() -> str:
        await trio.sleep_forever()
        raise AssertionError

    @app.tool(task_support="optional")
    async def refuse() -> str:
        raise McpError(-32602, "refused on purpose", {"why": "test"})

    @app.tool(task_support="optional")
    async def report_failure() -> trio_mcp.CallToolResult:
        return trio_mcp.CallToolResult([trio_mcp.TextContent("it broke")], is_error=True)

    return app


async def test_api_task_handle_repr_is_short() -> None:
    async with trio_mcp.open_memory_pair(_outcome_app()) as (client, _):
        handle = await client.call_tool_task("wait_forever")
        text = repr(handle)
        assert handle.task_id in text and "_pending" not in text and len(text) < 600
        await handle.cancel()


async def test_api_cancelled_task_result_raises_task_cancelled() -> None:
    async with trio_mcp.open_memory_pair(_outcome_app()) as (client, _):
        handle = await client.call_tool_task("wait_forever")
        await handle.cancel()
        with pytest.raises(trio_mcp.TaskCancelled) as info:
            await handle.result()
        assert isinstance(info.value, trio_mcp.RemoteError)  # old handlers still match
        assert info.value.task.status is trio_mcp.TaskStatus.CANCELLED


async def test_api_task_cancelled_elsewhere_is_told_by_one_status_check() -> None:
    async with trio_mcp.open_memory_pair(_outcome_app()) as (client, _):
        handle = await client.call_tool_task("wait_forever")
        await client.cancel_task(handle.task_id)  # not through the handle
        with pytest.raises(trio_mcp.TaskCancelled):
            await handle.result()


async def test_api_task_failed_with_an_error_raises_task_failed() -> None:
    async with trio_mcp.open_memory_pair(_outcome_app()) as (client, _):
        handle = await client.call_tool_task("refuse")
        with pytest.raises(trio_mcp.TaskFailed) as info:
            await handle.result()
        assert (info.value.code, info.value.message, info.value.data) == (
            -32602,
            "refused on purpose",
            {"why": "test"},
        )


async def test_api_task_that_reports_failure_returns_its_result() -> None:
    async with trio_mcp.open_memory_pair(_outcome_app()) as (client, _):
        handle = await client.call_tool_task("report_failure")
        result = await handle.result()
        assert result.is_error and result.text == "it broke"
        assert handle.task.status is trio_mcp.TaskStatus.FAILED or (
            await handle.status()
        ).status is trio_mcp.TaskStatus.FAILED


# --- 12. app.run() ----------------------------------------------------------------------


SCRIPT = textwrap.dedent(
    """
    import sys
    import trio_mcp

    app = trio_mcp.App("one-liner")

    @app.tool
    async def hello(name: str) -> str:
        return f"hello {name}"

    app.run(*sys.argv[1:2], **({"port": 0} if sys.argv[1:2] in (["ws"], ["http"]) else {}))
    """
)


async def test_api_app_run_serves_stdio(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SCRIPT)
    async with trio_mcp.open_stdio_client([sys.executable, str(script)]) as client:
        assert (await client.call_tool("hello", {"name": "stdio"})).text == "hello stdio"


@asynccontextmanager
async def _served_by_app_run(tmp_path: Path, transport: str) -> AsyncIterator[str]:
    """Run SCRIPT with ``app.run(transport, port=0)``; yield the URL it prints."""
    script = tmp_path / "server.py"
    script.write_text(SCRIPT)
    proc = await trio.lowlevel.open_process(
        [sys.executable, str(script), transport], stderr=subprocess.PIPE
    )
    try:
        assert proc.stderr is not None
        line = b""
        with trio.fail_after(30):
            while b"\n" not in line:
                line += await proc.stderr.receive_some(1024)
        yield line.decode().split("serving on ", 1)[1].split()[0]
    finally:
        proc.terminate()
        await proc.wait()
        if proc.stderr is not None:
            await proc.stderr.aclose()


async def test_api_app_run_serves_websocket(tmp_path: Path) -> None:
    async with _served_by_app_run(tmp_path, "ws") as url:
        async with trio_mcp.open_websocket_client(url) as client:
            assert (await client.call_tool("hello", {"name": "ws"})).text == "hello ws"


async def test_api_app_run_serves_streamable_http(tmp_path: Path) -> None:
    async with _served_by_app_run(tmp_path, "http") as url:
        async with trio_mcp.open_http_client(url) as client:
            assert (await client.call_tool("hello", {"name": "http"})).text == "hello http"


def test_api_app_run_rejects_an_unknown_transport() -> None:
    with pytest.raises(ValueError, match="transport"):
        trio_mcp.App("x").run("carrier-pigeon")  # type: ignore[arg-type]


# --- 7. every awaitable says what cancelling it does ------------------------------------------


@pytest.mark.parametrize(
    "awaitable",
    [
        trio_mcp.Peer.call_tool,
        trio_mcp.Peer.call_tool_task,
        trio_mcp.Peer.request,
        trio_mcp.Peer.request_raw,
        trio_mcp.Peer.ping,
        trio_mcp.Peer.get_task,
        trio_mcp.Peer.task_result,
        trio_mcp.Peer.cancel_task,
        trio_mcp.Peer.list_tasks,
        trio_mcp.Peer.list_tools,
        trio_mcp.Peer.notify,
        trio_mcp.Peer.aclose,
        trio_mcp.Peer.run,
        trio_mcp.TaskHandle.status,
        trio_mcp.TaskHandle.cancel,
        trio_mcp.TaskHandle.result,
        trio_mcp.TaskHandle.wait,
        trio_mcp.RequestContext.elicit,
        trio_mcp.RequestContext.sample,
        trio_mcp.RequestContext.report_progress,
    ],
    ids=lambda f: f.__qualname__,
)
def test_api_awaitable_documents_its_cancellation(awaitable: Any) -> None:
    doc = inspect.getdoc(awaitable) or ""
    assert "Cancellation:" in doc, f"{awaitable.__qualname__} does not say what cancelling it does"
