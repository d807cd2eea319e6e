"""Benchmark server of the Python SDK ``mcp`` (1.30.x with tasks, or 2.x plain only).

Runs under the SDK's own interpreter (``.interop/mcp130``, ``.bench/mcp130``,
``.bench/mcp2``), never trio-mcp's:

    python bench/peers/mcp_server.py            # stdio
    python bench/peers/mcp_server.py --ws PORT  # WebSocket (1.x only: uvicorn + starlette)

The low-level ``Server`` is used for both majors (1.30 needs it for tasks:
``server.experimental.enable_tasks()`` + ``ctx.experimental.run_task()``).
Tools: ``echo`` (plain), ``stats`` (plain: RSS and CPU time), and on 1.x
``noop`` (a task that finishes at once) and ``park`` (a task that runs until
cancelled; a ``tasks/cancel`` handler stops its work).
"""

# No `from __future__ import annotations`: mcp 1.30 reads handler annotations at runtime.
import argparse
import os
import sys
import warnings
from importlib.metadata import version
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.simplefilter("ignore", DeprecationWarning)  # mcp 1.30 tasks/WebSocket are deprecated

import anyio  # noqa: E402
from _common import stats_text  # noqa: E402

MAJOR = int(version("mcp").split(".")[0])
ECHO_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def build_v1() -> Any:
    import mcp.types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.experimental.tasks.helpers import cancel_task

    server = Server("mcp130-bench", version="1.0")
    server.experimental.enable_tasks()
    task_optional = types.ToolExecution(taskSupport=types.TASK_OPTIONAL)
    tools = [
        types.Tool(name="echo", inputSchema=ECHO_SCHEMA),
        types.Tool(name="stats", inputSchema=EMPTY_SCHEMA),
        types.Tool(name="noop", inputSchema=EMPTY_SCHEMA, execution=task_optional),
        types.Tool(name="park", inputSchema=EMPTY_SCHEMA, execution=task_optional),
    ]
    parked: dict[str, tuple[anyio.CancelScope, Any]] = {}

    def text(value: str) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=value)])

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return tools

    @server.call_tool()
    async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
        if name == "echo":
            return text(arguments["text"])
        if name == "stats":
            return text(stats_text())
        ctx = server.request_context

        async def noop(task: Any) -> types.CallToolResult:
            return text("ok")

        async def park(task: Any) -> types.CallToolResult:
            with anyio.CancelScope() as scope:
                parked[task.task_id] = (scope, task)
                await anyio.sleep_forever()
            return text("cancelled")

        return await ctx.experimental.run_task(noop if name == "noop" else park)

    support = server.experimental.task_support
    assert support is not None

    @server.experimental.cancel_task()
    async def on_cancel(req: types.CancelTaskRequest) -> types.CancelTaskResult:
        # The SDK's default handler only marks the task cancelled; stop the work too.
        server.experimental._require_task_in_requestor_scope(req.params.taskId)
        result = await cancel_task(support.store, req.params.taskId)
        entry = parked.pop(req.params.taskId, None)
        if entry is not None:
            scope, task = entry
            # run_task() completes a task whose work returns unless the work's
            # own snapshot is terminal, and the store refuses to complete a
            # cancelled task (an unhandled error that ends the server): give
            # the work the cancelled snapshot (no public API does), then stop it.
            task._ctx._task = types.Task.model_validate(result.model_dump())
            scope.cancel()
        return result

    return server


def build_v2() -> Any:
    import mcp_types as types
    from mcp.server.lowlevel import Server

    def text(value: str) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=value)])

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name="echo", input_schema=ECHO_SCHEMA),
                types.Tool(name="stats", input_schema=EMPTY_SCHEMA),
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "echo":
            return text((params.arguments or {})["text"])
        if params.name == "stats":
            return text(stats_text())
        raise ValueError(f"unknown tool {params.name}")

    return Server("mcp2-bench", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(server: Any) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_websocket(server: Any, port: int) -> None:
    import uvicorn
    from mcp.server.websocket import websocket_server
    from starlette.applications import Starlette
    from starlette.routing import WebSocketRoute

    async def endpoint(websocket: Any) -> None:
        async with websocket_server(websocket.scope, websocket.receive, websocket.send) as (r, w):
            await server.run(r, w, server.create_initialization_options())

    app = Starlette(routes=[WebSocketRoute("/", endpoint)])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", ws="websockets")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ws", type=int, metavar="PORT", help="serve WebSocket (mcp 1.x)")
    args = parser.parse_args()
    server = build_v1() if MAJOR == 1 else build_v2()
    if args.ws is not None:
        serve_websocket(server, args.ws)
    else:
        anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main()
