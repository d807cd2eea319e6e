"""Call tools as tasks from a Trio program, answering the server's questions.

Starts examples/task_server.py as a subprocess (over stdio, as MCP clients
do) and:

1. calls `sleep` as a task, following its status and progress;
2. calls `approve` as a task: the task pauses in `input_required` to ask a
   question (elicitation), which this client's handler answers;
3. calls `summarize`: the server asks this client's "model" for text
   (sampling), and this client hosts that request as a task of its own.

    python examples/task_client.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

import trio_mcp

SERVER = [sys.executable, str(Path(__file__).with_name("task_server.py"))]

# What this client offers the server. host_tasks=True (the default) declares
# the client-side tasks capability for the handlers below, so the server may
# ask this client to run sampling and elicitation as tasks.
client = trio_mcp.App("example-client", "1.0", host_tasks=True)


@client.on_elicitation
async def answer(
    ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
) -> trio_mcp.ElicitResult:
    # Called while the server's task is input_required. A real client shows
    # params.message and a form built from params.requested_schema.
    print(f"  the server asks: {params.message!r} -> yes")
    return trio_mcp.ElicitResult(action="accept", content={"approve": True})


@client.on_sampling
async def sample(
    ctx: trio_mcp.RequestContext, params: trio_mcp.CreateMessageParams
) -> trio_mcp.CreateMessageResult:
    # ctx.task_id is set when the server asked us to host this as a task.
    where = f"as our task {ctx.task_id[:8]}" if ctx.task_id else "directly"
    print(f"  the server wants a model reply ({where})")
    return trio_mcp.CreateMessageResult(
        role="assistant",
        content={"type": "text", "text": "Tasks make long MCP calls easy to follow."},
        model="example-model",
    )


def show_progress(progress: trio_mcp.ProgressParams) -> None:
    print(f"  progress {progress.progress:g}/{progress.total:g} {progress.message or ''}")


async def main() -> None:
    async with trio_mcp.open_stdio_client(SERVER, client) as server:
        # 1. call_tool_task returns at once with a handle on the task.
        handle = await server.call_tool_task(
            "sleep", {"seconds": 1, "steps": 4}, progress=show_progress
        )
        print(f"sleep runs as task {handle.task_id[:8]}")
        async for task in handle:  # each new status, until a terminal one
            print(f"  status: {task.status.value}")
        print("  result:", (await handle.result()).text)

        # 2. While a task is input_required, following it (wait() or async for)
        #    lets the server deliver its question to answer() above.
        handle = await server.call_tool_task("approve", {"question": "Ship it?"})
        task = await handle.wait()
        print(f"approve ended {task.status.value}:", (await handle.result()).text)

        # 3. A plain call whose tool samples from us; we host that as a task.
        result = await server.call_tool("summarize", {"text": "A long text about tasks."})
        print("summarize:", result.text)


if __name__ == "__main__":
    trio.run(main)
