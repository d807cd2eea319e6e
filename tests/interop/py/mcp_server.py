"""A server of the Python SDK ``mcp`` 1.30.0 with task tools, for a trio-mcp client to drive.

Runs under the interpreter of the mcp 1.30.0 venv (``.interop/mcp130``), never ours:

    python mcp_server.py                 # stdio
    python mcp_server.py --ws PORT       # WebSocket on 127.0.0.1:PORT (uvicorn + starlette)

It uses the low-level ``Server`` with ``server.experimental.enable_tasks()`` and
``ctx.experimental.run_task()``, the way the SDK's own task examples do.

Tools (taskSupport):
    echo {text}                forbidden
    slow {seconds}             optional   sleeps, as a task or not
    needs-task {text}          required
    flaky {message}            optional   the work raises: the task ends ``failed``
    ask {question}             required   task.elicit(): input_required, via tasks/result
    sample {prompt}            required   task.create_message(): sampling via tasks/result
    sample-as-task {prompt}    required   task.create_message_as_task(): the CLIENT hosts it
    elicit-as-task {question}  required   task.elicit_as_task(): the CLIENT hosts it
"""

from __future__ import annotations

import argparse
import warnings
from typing import Any

import anyio

# The experimental tasks API warns that it is deprecated (mcp 2.x removed it): known.
warnings.simplefilter("ignore", DeprecationWarning)

import mcp.types as types  # noqa: E402
from mcp.server.experimental.task_context import ServerTaskContext  # noqa: E402
from mcp.server.lowlevel import Server  # noqa: E402

server = Server("mcp130-interop-server", version="1.30.0")
server.experimental.enable_tasks()

APPROVE_SCHEMA: Any = {
    "type": "object",
    "properties": {"approve": {"type": "boolean"}},
    "required": ["approve"],
}


def _tool(name: str, properties: dict[str, Any], support: str | None) -> types.Tool:
    return types.Tool(
        name=name,
        inputSchema={"type": "object", "properties": properties, "required": list(properties)},
        execution=types.ToolExecution(taskSupport=support) if support else None,
    )


TOOLS = {
    "echo": _tool("echo", {"text": {"type": "string"}}, None),
    "slow": _tool("slow", {"seconds": {"type": "number"}}, types.TASK_OPTIONAL),
    "needs-task": _tool("needs-task", {"text": {"type": "string"}}, types.TASK_REQUIRED),
    "flaky": _tool("flaky", {"message": {"type": "string"}}, types.TASK_OPTIONAL),
    "ask": _tool("ask", {"question": {"type": "string"}}, types.TASK_REQUIRED),
    "sample": _tool("sample", {"prompt": {"type": "string"}}, types.TASK_REQUIRED),
    "sample-as-task": _tool("sample-as-task", {"prompt": {"type": "string"}}, types.TASK_REQUIRED),
    "elicit-as-task": _tool("elicit-as-task", {"question": {"type": "string"}}, types.TASK_REQUIRED),
}


def _text(value: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)], isError=error)


def _sampled_text(result: types.CreateMessageResult) -> str:
    content = result.content
    return content.text if isinstance(content, types.TextContent) else repr(content)


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return list(TOOLS.values())


@server.call_tool()
async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult | types.CreateTaskResult:
    ctx = server.request_context
    tool = TOOLS[name]
    ctx.experimental.validate_for_tool(tool)  # -32601 for a wrong task mode (as an McpError)

    if name == "echo":
        return _text(arguments["text"])

    async def slow(task: ServerTaskContext | None = None) -> types.CallToolResult:
        await anyio.sleep(arguments["seconds"])
        return _text(f"slept {arguments['seconds']:g} seconds")

    async def flaky(task: ServerTaskContext) -> types.CallToolResult:
        raise RuntimeError(arguments["message"])

    async def needs_task(task: ServerTaskContext) -> types.CallToolResult:
        return _text(f"done: {arguments['text']}")

    async def ask(task: ServerTaskContext) -> types.CallToolResult:
        answer = await task.elicit(message=arguments["question"], requestedSchema=APPROVE_SCHEMA)
        approved = answer.action == "accept" and (answer.content or {}).get("approve") is True
        return _text(f"{'approved' if approved else 'declined'}: {arguments['question']}")

    def _message(prompt: str) -> list[types.SamplingMessage]:
        return [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))]

    async def sample(task: ServerTaskContext) -> types.CallToolResult:
        result = await task.create_message(messages=_message(arguments["prompt"]), max_tokens=50)
        return _text(f"sampled: {_sampled_text(result)}")

    async def sample_as_task(task: ServerTaskContext) -> types.CallToolResult:
        result = await task.create_message_as_task(messages=_message(arguments["prompt"]), max_tokens=50)
        return _text(f"sampled as task: {_sampled_text(result)}")

    async def elicit_as_task(task: ServerTaskContext) -> types.CallToolResult:
        answer = await task.elicit_as_task(message=arguments["question"], requestedSchema=APPROVE_SCHEMA)
        return _text(f"elicited as task: {answer.action} {answer.content}")

    work = {
        "slow": slow,
        "flaky": flaky,
        "needs-task": needs_task,
        "ask": ask,
        "sample": sample,
        "sample-as-task": sample_as_task,
        "elicit-as-task": elicit_as_task,
    }[name]
    if ctx.experimental.is_task:
        return await ctx.experimental.run_task(work)
    if name == "slow":
        return await slow()
    if name == "flaky":
        return _text(arguments["message"], error=True)
    raise AssertionError(name)  # the other tools are `required`: refused above


async def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_websocket(port: int) -> None:
    import uvicorn
    from mcp.server.websocket import websocket_server
    from starlette.applications import Starlette
    from starlette.routing import WebSocketRoute

    async def endpoint(websocket: Any) -> None:
        async with websocket_server(websocket.scope, websocket.receive, websocket.send) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    app = Starlette(routes=[WebSocketRoute("/", endpoint)])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", ws="websockets")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ws", type=int, metavar="PORT", help="serve over WebSocket")
    args = parser.parse_args()
    if args.ws:
        serve_websocket(args.ws)
    else:
        anyio.run(serve_stdio)


if __name__ == "__main__":
    main()
